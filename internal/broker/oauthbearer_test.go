package broker_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/oauth"

	"github.com/kawa-broker/kawa/internal/auth"
	"github.com/kawa-broker/kawa/internal/kawatest"
	"github.com/kawa-broker/kawa/internal/server"
)

// unsecuredJWT is an alg=none JWT for sub expiring at exp.
func unsecuredJWT(t *testing.T, sub string, exp time.Time) string {
	t.Helper()
	enc := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return base64.RawURLEncoding.EncodeToString(b)
	}
	return enc(map[string]string{"alg": "none"}) + "." + enc(map[string]any{"sub": sub, "exp": exp.Unix(), "scope": "kafka"}) + "."
}

// TestOAuthBearerUnsecured: franz-go's sasl/oauth logs in with an unsecured
// JWT and produces and consumes; an expired token, a signed one and an
// authorization id other than its sub get SASL_AUTHENTICATION_FAILED; the
// session lasts until the token's exp (session_lifetime_ms), with no
// connections.max.reauth.ms set, as in Kafka.
func TestOAuthBearerUnsecured(t *testing.T) {
	t.Parallel()
	mechs, err := auth.NewSASL(auth.NewMemStore(), []string{auth.OAuthBearer})
	if err != nil {
		t.Fatal(err)
	}
	b := kawatest.NewSecureBroker(t, server.Listener{Protocol: server.SASLPlaintext, SASL: mechs})
	tok := unsecuredJWT(t, "alice", time.Now().Add(time.Hour))
	if err := produceConsume(t, b, "jwt", kgo.SASL(oauth.Auth{Token: tok}.AsMechanism())); err != nil {
		t.Fatalf("valid unsecured JWT: %v", err)
	}
	for name, a := range map[string]oauth.Auth{
		"expired":       {Token: unsecuredJWT(t, "alice", time.Now().Add(-time.Minute))},
		"signed":        {Token: tok + "c2lnbmF0dXJl"},
		"other authzid": {Token: tok, Zid: "bob"},
	} {
		if err := loginErr(t, b, kgo.SASL(a.AsMechanism())); !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Errorf("%s: err %v, want SASL_AUTHENTICATION_FAILED", name, err)
		}
	}

	c := dial(t, b.Addr)
	c.handshake(auth.OAuthBearer)
	exp := time.Now().Add(10 * time.Minute)
	resp := c.authenticate([]byte("n,,\x01auth=Bearer " + unsecuredJWT(t, "alice", exp) + "\x01\x01"))
	if resp.ErrorCode != 0 {
		t.Fatalf("raw OAUTHBEARER login: error %d", resp.ErrorCode)
	}
	if left := time.Until(exp).Milliseconds(); resp.SessionLifetimeMillis <= 0 || resp.SessionLifetimeMillis > left+1000 || resp.SessionLifetimeMillis < left-60_000 {
		t.Errorf("session_lifetime_ms %d, want about %d (the token's exp)", resp.SessionLifetimeMillis, left)
	}
}
