package auth_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kawa-broker/kawa/internal/auth"
)

// jwt returns an unsecured JWT (alg none, empty signature) with claims.
func jwt(t testing.TB, header, claims map[string]any) string {
	t.Helper()
	enc := func(v map[string]any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return base64.RawURLEncoding.EncodeToString(b)
	}
	return enc(header) + "." + enc(claims) + "."
}

var none = map[string]any{"alg": "none"}

// TestParseOAuthBearer: RFC 7628 client initial responses as Kafka's
// OAuthBearerClientInitialResponse reads them.
func TestParseOAuthBearer(t *testing.T) {
	m, err := auth.ParseOAuthBearer([]byte("n,a=al=2Cice=3D,\x01auth=Bearer abc.def.\x01traceId=42\x01\x01"))
	if err != nil {
		t.Fatal(err)
	}
	if m.AuthzID != "al,ice=" || m.Token != "abc.def." || len(m.Extensions) != 1 || m.Extensions["traceId"] != "42" {
		t.Fatalf("parsed %+v", m)
	}
	if m, err := auth.ParseOAuthBearer([]byte("y,,\x01auth=bearer  tok\x01\x01")); err != nil || m.Token != "tok" || m.AuthzID != "" {
		t.Fatalf("lower-case scheme, two spaces: %+v, %v", m, err)
	}
	for _, bad := range []string{
		"",
		"n,,",
		"n,,\x01auth=Bearer tok\x01", // no terminating empty pair
		"n,,\x01auth=Bearer tok",     // no pair terminator
		"p=tls-unique,,\x01auth=Bearer t\x01\x01", // channel binding
		"n,a=,\x01auth=Bearer t\x01\x01",
		"n,a=x=2,\x01auth=Bearer t\x01\x01",
		"n,b=x,\x01auth=Bearer t\x01\x01",
		"n,,\x01auth=Basic dXNlcg\x01\x01",
		"n,,\x01auth=Bearer\x01\x01",
		"n,,\x01auth=Bearer t o\x01\x01",
		"n,,\x01\x01",                                   // no auth
		"n,,\x01auth=Bearer a\x01auth=Bearer b\x01\x01", // auth twice
		"n,,\x01auth=Bearer a\x01\x01x=1\x01\x01",       // empty pair in the middle
		"n,,\x01auth=Bearer a\x01k1=v\x01\x01",          // key not letters
		"n,,\x01auth=Bearer a\x01k=\x01\x01",            // empty value
		"n,,\x01auth=Bearer " + strings.Repeat("a", 70<<10) + "\x01\x01",
	} {
		if m, err := auth.ParseOAuthBearer([]byte(bad)); err == nil {
			t.Errorf("%q parsed as %+v", bad, m)
		}
	}
}

// TestValidateUnsecuredJWT: Kafka's unsecured validator rules, on a fixed
// clock.
func TestValidateUnsecuredJWT(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	o := auth.UnsecuredJWT{Now: func() time.Time { return now }}
	exp := float64(now.Unix() + 3600)
	user, gotExp, err := auth.ValidateUnsecuredJWT(jwt(t, none, map[string]any{"sub": "alice", "exp": exp, "iat": float64(now.Unix())}), o)
	if err != nil || user != "alice" || !gotExp.Equal(now.Add(time.Hour)) {
		t.Fatalf("valid token: %q %v %v", user, gotExp, err)
	}
	if _, e, err := auth.ValidateUnsecuredJWT(jwt(t, none, map[string]any{"sub": "a", "exp": exp + 0.25}), o); err != nil || !e.Equal(now.Add(time.Hour+250*time.Millisecond)) {
		t.Fatalf("fractional exp: %v %v", e, err)
	}
	scoped := o
	scoped.RequiredScope = []string{"kafka", "write"}
	for _, sc := range []any{"read kafka write", []any{"write", "kafka"}} {
		if _, _, err := auth.ValidateUnsecuredJWT(jwt(t, none, map[string]any{"sub": "a", "exp": exp, "scope": sc}), scoped); err != nil {
			t.Errorf("scope %v: %v", sc, err)
		}
	}
	if _, _, err := auth.ValidateUnsecuredJWT(jwt(t, none, map[string]any{"sub": "a", "exp": exp, "scope": "kafka"}), scoped); err == nil || !strings.Contains(err.Error(), "insufficient_scope") {
		t.Errorf("missing scope: %v", err)
	}
	skew := o
	skew.AllowableClockSkew = time.Minute
	if _, _, err := auth.ValidateUnsecuredJWT(jwt(t, none, map[string]any{"sub": "a", "exp": float64(now.Unix() - 30)}), skew); err != nil {
		t.Errorf("expired within the allowed skew: %v", err)
	}
	principal := o
	principal.PrincipalClaim = "client_id"
	if u, _, err := auth.ValidateUnsecuredJWT(jwt(t, none, map[string]any{"client_id": "svc", "exp": exp}), principal); err != nil || u != "svc" {
		t.Errorf("principal claim client_id: %q %v", u, err)
	}
	valid := jwt(t, none, map[string]any{"sub": "a", "exp": exp})
	for name, tok := range map[string]string{
		"HS256":            jwt(t, map[string]any{"alg": "HS256"}, map[string]any{"sub": "a", "exp": exp}),
		"no alg":           jwt(t, map[string]any{}, map[string]any{"sub": "a", "exp": exp}),
		"signed":           valid + "c2ln",
		"two parts":        strings.TrimSuffix(valid, "."),
		"four parts":       valid + ".",
		"no sub":           jwt(t, none, map[string]any{"exp": exp}),
		"empty sub":        jwt(t, none, map[string]any{"sub": " ", "exp": exp}),
		"numeric sub":      jwt(t, none, map[string]any{"sub": 7, "exp": exp}),
		"no exp":           jwt(t, none, map[string]any{"sub": "a"}),
		"string exp":       jwt(t, none, map[string]any{"sub": "a", "exp": "tomorrow"}),
		"huge exp":         jwt(t, none, map[string]any{"sub": "a", "exp": 1e300}),
		"expired":          jwt(t, none, map[string]any{"sub": "a", "exp": float64(now.Unix())}),
		"issued in future": jwt(t, none, map[string]any{"sub": "a", "exp": exp, "iat": float64(now.Unix() + 60)}),
		"iat after exp":    jwt(t, none, map[string]any{"sub": "a", "exp": float64(now.Unix() + 10), "iat": float64(now.Unix() + 20)}),
		"not base64":       "!!!." + strings.Split(valid, ".")[1] + ".",
		"header not JSON":  base64.RawURLEncoding.EncodeToString([]byte("[1]")) + "." + strings.Split(valid, ".")[1] + ".",
		"claims null":      strings.Split(valid, ".")[0] + "." + base64.RawURLEncoding.EncodeToString([]byte("null")) + ".",
	} {
		if u, _, err := auth.ValidateUnsecuredJWT(tok, o); err == nil || !strings.Contains(err.Error(), "invalid_token") {
			t.Errorf("%s: principal %q, err %v; want invalid_token", name, u, err)
		}
	}
}

// TestOAuthBearerSession: a valid token logs in with its sub as the user and
// its exp as the credential's end; an invalid one gets RFC 7628's JSON error
// challenge, and the client's 0x01 acknowledgement then fails the exchange;
// an authorization id other than the principal fails.
func TestOAuthBearerSession(t *testing.T) {
	a, err := auth.NewSASL(auth.NewMemStore(), []string{auth.OAuthBearer})
	if err != nil {
		t.Fatal(err)
	}
	exp := time.Now().Add(time.Hour).Truncate(time.Second)
	msg := func(authz, tok string) []byte {
		return []byte("n," + authz + ",\x01auth=Bearer " + tok + "\x01\x01")
	}
	good := jwt(t, none, map[string]any{"sub": "alice", "exp": float64(exp.Unix())})
	s, _ := a.Start(auth.OAuthBearer)
	if out, done, err := s.Step(msg("a=alice", good)); err != nil || !done || len(out) != 0 || s.User() != "alice" {
		t.Fatalf("valid token: out %q done %v err %v user %q", out, done, err, s.User())
	}
	if e, ok := s.(auth.Expiring); !ok || !e.Expires().Equal(exp) {
		t.Fatalf("session does not end at the token's exp %v", exp)
	}

	s, _ = a.Start(auth.OAuthBearer)
	expired := jwt(t, none, map[string]any{"sub": "alice", "exp": float64(time.Now().Add(-time.Minute).Unix())})
	out, done, err := s.Step(msg("", expired))
	if err != nil || done || string(out) != `{"status":"invalid_token"}` {
		t.Fatalf("expired token: out %q done %v err %v; want the invalid_token challenge", out, done, err)
	}
	if _, done, err := s.Step([]byte{0x01}); done || !errors.Is(err, auth.ErrAuthentication) || !strings.Contains(err.Error(), "invalid_token") {
		t.Fatalf("after the challenge: done %v err %v", done, err)
	}

	s, _ = a.Start(auth.OAuthBearer)
	if _, done, err := s.Step(msg("a=bob", good)); done || err == nil {
		t.Fatalf("authzid bob for alice's token: done %v err %v", done, err)
	}
	s, _ = a.Start(auth.OAuthBearer)
	if _, done, err := s.Step([]byte("garbage")); done || err == nil {
		t.Fatalf("malformed message: done %v err %v", done, err)
	}
	if _, err := auth.NewSASL(auth.NewMemStore(), []string{"GSSAPI"}); err == nil {
		t.Fatal("GSSAPI accepted")
	}
}

// TestScramMessageBound: a SCRAM client-first with a nonce of 10 KiB is
// refused before the SCRAM library sees it (it would be echoed back in
// server-first).
func TestScramMessageBound(t *testing.T) {
	store := auth.NewMemStore()
	if err := store.SetPassword("alice", auth.ScramSHA512, "pw", auth.MinIterations); err != nil {
		t.Fatal(err)
	}
	a, err := auth.NewSASL(store, []string{auth.ScramSHA512})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := a.Start(auth.ScramSHA512)
	if out, _, err := s.Step([]byte("n,,n=alice,r=" + strings.Repeat("x", 10<<10))); err == nil || !errors.Is(err, auth.ErrAuthentication) {
		t.Fatalf("10 KiB nonce: answered %d bytes, err %v", len(out), err)
	}
	s, _ = a.Start(auth.ScramSHA512)
	if _, _, err := s.Step([]byte("n,,n=alice,r=" + strings.Repeat("x", 64))); err != nil {
		t.Fatalf("64-byte nonce: %v", err)
	}
}
