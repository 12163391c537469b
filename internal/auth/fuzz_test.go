package auth_test

import (
	"bytes"
	"testing"

	"github.com/kawa-broker/kawa/internal/auth"
)

// FuzzParsePlain: any PLAIN message parses or errors without panicking, and
// what parses re-encodes to an equivalent message.
func FuzzParsePlain(f *testing.F) {
	f.Add([]byte("\x00alice\x00secret"))
	f.Add([]byte("alice\x00alice\x00secret"))
	f.Add([]byte("bob\x00alice\x00x"))
	f.Fuzz(func(t *testing.T, msg []byte) {
		user, pass, err := auth.ParsePlain(msg)
		if err != nil {
			return
		}
		if user == "" || pass == "" {
			t.Fatalf("ParsePlain(%q) accepted an empty user or password", msg)
		}
		again, again2, err := auth.ParsePlain([]byte("\x00" + user + "\x00" + pass))
		if err != nil || again != user || again2 != pass {
			t.Fatalf("re-encoded %q/%q does not parse back: %v", user, pass, err)
		}
		if !bytes.Contains(msg, []byte(user)) {
			t.Fatalf("user %q not in the message", user)
		}
	})
}

// fuzzSASL is a SASL over a store with one user, alice/secret.
func fuzzSASL(f *testing.F) *auth.SASL {
	store := auth.NewMemStore()
	for _, m := range []string{auth.ScramSHA256, auth.ScramSHA512} {
		if err := store.SetPassword("alice", m, "secret", auth.MinIterations); err != nil {
			f.Fatal(err)
		}
	}
	a, err := auth.NewSASL(store, []string{auth.Plain, auth.ScramSHA256, auth.ScramSHA512})
	if err != nil {
		f.Fatal(err)
	}
	return a
}

// FuzzScramClientFirst: any client-first message is answered (a
// server-first or an error, never a panic) and never logs in by itself.
func FuzzScramClientFirst(f *testing.F) {
	a := fuzzSASL(f)
	f.Add([]byte("n,,n=alice,r=abcdefgh"))
	f.Add([]byte("y,,n=alice,r=x"))
	f.Add([]byte("p=tls-unique,,n=alice,r=x"))
	f.Add([]byte("n,a=alice,n=alice,r=x"))
	f.Add([]byte("n,,n=al=2Cice,r=x"))
	f.Add([]byte("n,,m=ext,n=alice,r=x"))
	f.Fuzz(func(t *testing.T, msg []byte) {
		s, _ := a.Start(auth.ScramSHA256)
		out, done, err := s.Step(msg)
		if done {
			t.Fatalf("client-first %q completed a login", msg)
		}
		if err == nil && len(out) == 0 {
			t.Fatalf("client-first %q got neither an answer nor an error", msg)
		}
	})
}

// FuzzScramClientFinal: after a valid client-first, no client-final the
// fuzzer makes (without the password) logs in, and none panics.
func FuzzScramClientFinal(f *testing.F) {
	a := fuzzSASL(f)
	f.Add([]byte("c=biws,r=abcdefgh,p=AAAA"))
	f.Add([]byte("c=biws,r=abcdefghabcdefgh,p=dGVzdA=="))
	f.Add([]byte("c=eSws,r=x,p=="))
	f.Add([]byte("c=biws,r=abcdefgh,x=ext,p=AAAA"))
	f.Add([]byte(",,"))
	f.Fuzz(func(t *testing.T, msg []byte) {
		s, _ := a.Start(auth.ScramSHA512)
		if _, _, err := s.Step([]byte("n,,n=alice,r=abcdefgh")); err != nil {
			t.Fatal(err)
		}
		if _, done, err := s.Step(msg); done || (err == nil) {
			t.Fatalf("client-final %q: done %v, err %v; want a failure", msg, done, err)
		}
	})
}

// FuzzOAuthBearer: any OAUTHBEARER initial response is refused, answered
// with an error challenge, or logs in; a login only for a message that
// parses and carries a token the unsecured validator accepts, as its
// principal; never a panic.
func FuzzOAuthBearer(f *testing.F) {
	a, err := auth.NewSASL(auth.NewMemStore(), []string{auth.OAuthBearer})
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte("n,,\x01auth=Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJhbGljZSIsImV4cCI6OTk5OTk5OTk5OX0.\x01\x01"))
	f.Add([]byte("n,a=alice,\x01auth=Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJhbGljZSIsImV4cCI6OTk5OTk5OTk5OX0.\x01x=y\x01\x01"))
	f.Add([]byte("n,,\x01auth=Bearer a.b.\x01\x01"))
	f.Add([]byte("y,a=a=2Cb,\x01auth=bearer x\x01\x01"))
	f.Fuzz(func(t *testing.T, msg []byte) {
		s, _ := a.Start(auth.OAuthBearer)
		out, done, err := s.Step(msg)
		if err != nil || !done {
			if err == nil && len(out) == 0 {
				t.Fatalf("%q got neither a login, a challenge nor an error", msg)
			}
			return
		}
		m, perr := auth.ParseOAuthBearer(msg)
		if perr != nil {
			t.Fatalf("%q logged in but does not parse: %v", msg, perr)
		}
		user, _, verr := auth.ValidateUnsecuredJWT(m.Token, auth.UnsecuredJWT{})
		if verr != nil || user != s.User() || user == "" {
			t.Fatalf("%q logged in as %q; validator says %q, %v", msg, s.User(), user, verr)
		}
	})
}
