package server

import (
	"context"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	xscram "github.com/xdg-go/scram"

	"github.com/kawa-broker/kawa/internal/auth"
	"github.com/kawa-broker/kawa/internal/kawatest/rawreq"
)

// fakeClock is a settable clock for session lifetimes.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// saslConn is a raw client connection to a SASL_PLAINTEXT listener.
type saslConn struct {
	t    *testing.T
	c    net.Conn
	corr int32
}

func (s *saslConn) roundTrip(req kmsg.Request, version int16) kmsg.Response {
	s.t.Helper()
	s.corr++
	req.SetVersion(version)
	if _, err := s.c.Write(rawreq.Frame(req, s.corr, nil)); err != nil {
		s.t.Fatal(err)
	}
	resp := req.ResponseKind()
	resp.SetVersion(version)
	if err := rawreq.ReadResponse(s.c, s.corr, resp); err != nil {
		s.t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
	}
	return resp
}

func (s *saslConn) handshake(mech string) {
	s.t.Helper()
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Mechanism = mech
	if r := s.roundTrip(hs, 1).(*kmsg.SASLHandshakeResponse); r.ErrorCode != 0 {
		s.t.Fatalf("SaslHandshake %s: error %d", mech, r.ErrorCode)
	}
}

func (s *saslConn) authenticate(msg []byte, version int16) *kmsg.SASLAuthenticateResponse {
	s.t.Helper()
	a := kmsg.NewPtrSASLAuthenticateRequest()
	a.SASLAuthBytes = msg
	return s.roundTrip(a, version).(*kmsg.SASLAuthenticateResponse)
}

// plainLogin logs in as user with PLAIN and returns the session lifetime.
func (s *saslConn) plainLogin(user string, version int16) int64 {
	s.t.Helper()
	s.handshake(auth.Plain)
	r := s.authenticate([]byte("\x00"+user+"\x00"+user+"-pw"), version)
	if r.ErrorCode != 0 {
		s.t.Fatalf("PLAIN login as %s: error %d", user, r.ErrorCode)
	}
	return r.SessionLifetimeMillis
}

func (s *saslConn) metadata() {
	s.t.Helper()
	s.roundTrip(kmsg.NewPtrMetadataRequest(), 1)
}

// TestReauthentication (KIP-368): with connections.max.reauth.ms set, a
// login reports the session lifetime; a session that runs out without
// re-authentication closes the connection on its next request (counted); a
// re-authentication on the live connection renews it; one that changes the
// principal or the mechanism fails with SASL_AUTHENTICATION_FAILED and
// closes. The lifetime runs on a fake clock.
func TestReauthentication(t *testing.T) {
	t.Parallel()
	store := auth.NewMemStore()
	for _, u := range []string{"alice", "bob"} {
		for _, m := range []string{auth.ScramSHA256, auth.ScramSHA512} {
			if err := store.SetPassword(u, m, u+"-pw", auth.MinIterations); err != nil {
				t.Fatal(err)
			}
		}
	}
	mechs, err := auth.NewSASL(store, []string{auth.Plain, auth.ScramSHA256, auth.ScramSHA512})
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	var expired atomic.Int64
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(Config{MaxRequestBytes: 1 << 20, ConnectionsMaxReauth: time.Minute, Now: clock.Now,
		OnSessionExpired: func() { expired.Add(1) }}, testHandler{})
	go s.ServeListener(ln, Listener{Protocol: SASLPlaintext, SASL: mechs})
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	conn := func() *saslConn { return &saslConn{t: t, c: dial(t, ln.Addr().String())} }

	t.Run("expired session closes", func(t *testing.T) {
		c := conn()
		if life := c.plainLogin("alice", 1); life != 60000 {
			t.Fatalf("session_lifetime_ms %d, want 60000", life)
		}
		c.metadata()
		clock.Advance(time.Minute)
		before := expired.Load()
		c.corr++
		_, _ = c.c.Write(rawreq.Frame(kmsg.NewPtrMetadataRequest(), c.corr, nil))
		waitClosed(t, c.c)
		if expired.Load() != before+1 {
			t.Errorf("expired sessions counted %d, want %d", expired.Load(), before+1)
		}
	})
	t.Run("v0 client expires too", func(t *testing.T) {
		c := conn()
		c.plainLogin("alice", 0)
		clock.Advance(time.Minute + time.Second)
		c.corr++
		_, _ = c.c.Write(rawreq.Frame(kmsg.NewPtrMetadataRequest(), c.corr, nil))
		waitClosed(t, c.c)
	})
	t.Run("reauthentication renews", func(t *testing.T) {
		c := conn()
		c.plainLogin("alice", 1)
		for range 3 {
			clock.Advance(59 * time.Second)
			c.metadata()
			clock.Advance(2 * time.Second) // expired: only a handshake may come now
			if life := c.plainLogin("alice", 2); life != 60000 {
				t.Fatalf("re-authentication: session_lifetime_ms %d, want 60000", life)
			}
			c.metadata()
		}
	})
	t.Run("SCRAM reauthentication", func(t *testing.T) {
		c := conn()
		scramLogin := func(user string) *kmsg.SASLAuthenticateResponse {
			c.handshake(auth.ScramSHA512)
			cl, _ := xscram.SHA512.NewClient(user, user+"-pw", "")
			conv := cl.NewConversation()
			first, _ := conv.Step("")
			r := c.authenticate([]byte(first), 1)
			if r.ErrorCode != 0 {
				t.Fatalf("client-first: error %d", r.ErrorCode)
			}
			final, err := conv.Step(string(r.SASLAuthBytes))
			if err != nil {
				t.Fatal(err)
			}
			return c.authenticate([]byte(final), 1)
		}
		if r := scramLogin("alice"); r.ErrorCode != 0 {
			t.Fatalf("login: %d", r.ErrorCode)
		}
		clock.Advance(30 * time.Second)
		if r := scramLogin("alice"); r.ErrorCode != 0 || r.SessionLifetimeMillis != 60000 {
			t.Fatalf("re-authentication: %+v", r)
		}
		c.metadata()
		r := scramLogin("bob")
		if r.ErrorCode != kerr.SaslAuthenticationFailed.Code || r.ErrorMessage == nil ||
			*r.ErrorMessage != "Cannot change principals during re-authentication from User:alice: User:bob" {
			t.Fatalf("re-authentication as bob: error %d, message %v", r.ErrorCode, r.ErrorMessage)
		}
		waitClosed(t, c.c)
	})
	for _, c := range []struct {
		name, mech, msg, want string
	}{
		{"principal change refused", auth.Plain, "\x00bob\x00bob-pw", "Cannot change principals"},
		{"mechanism change refused", auth.ScramSHA256, "n,,n=alice,r=abcdefgh", "mechanism changed"},
		{"wrong password on reauthentication", auth.Plain, "\x00alice\x00nope", "Invalid username or password"},
	} {
		t.Run(c.name, func(t *testing.T) {
			sc := conn()
			sc.plainLogin("alice", 1)
			sc.handshake(c.mech)
			r := sc.authenticate([]byte(c.msg), 1)
			if r.ErrorCode != kerr.SaslAuthenticationFailed.Code || r.ErrorMessage == nil || !strings.Contains(*r.ErrorMessage, c.want) {
				t.Fatalf("error %d, message %v; want SASL_AUTHENTICATION_FAILED with %q", r.ErrorCode, r.ErrorMessage, c.want)
			}
			waitClosed(t, sc.c)
		})
	}
}

// saslServer starts a SASL_PLAINTEXT server over a store with alice/alice-pw
// and returns its address.
func saslServer(t *testing.T, cfg Config) string {
	t.Helper()
	store := auth.NewMemStore()
	if err := store.SetPassword("alice", auth.ScramSHA512, "alice-pw", auth.MinIterations); err != nil {
		t.Fatal(err)
	}
	mechs, err := auth.NewSASL(store, []string{auth.Plain, auth.ScramSHA512})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(cfg, testHandler{})
	go s.ServeListener(ln, Listener{Protocol: SASLPlaintext, SASL: mechs})
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	return ln.Addr().String()
}

// TestFailedAuthenticationDelay (connection.failed.authentication.delay.ms):
// a failed login is answered only after the delay, then closed, and another
// connection is served meanwhile.
func TestFailedAuthenticationDelay(t *testing.T) {
	t.Parallel()
	const delay = 400 * time.Millisecond
	addr := saslServer(t, Config{MaxRequestBytes: 1 << 20, FailedAuthenticationDelay: delay})
	bad := &saslConn{t: t, c: dial(t, addr)}
	bad.handshake(auth.Plain)
	a := kmsg.NewPtrSASLAuthenticateRequest()
	a.SASLAuthBytes = []byte("\x00alice\x00wrong")
	a.SetVersion(1)
	sent := time.Now()
	if _, err := bad.c.Write(rawreq.Frame(a, 99, nil)); err != nil {
		t.Fatal(err)
	}
	answered := make(chan time.Time, 1)
	go func() {
		resp := a.ResponseKind()
		resp.SetVersion(1)
		_ = rawreq.ReadResponse(bad.c, 99, resp)
		answered <- time.Now()
		if r := resp.(*kmsg.SASLAuthenticateResponse); r.ErrorCode != kerr.SaslAuthenticationFailed.Code {
			t.Errorf("wrong password: error %d, want 58", r.ErrorCode)
		}
	}()
	good := &saslConn{t: t, c: dial(t, addr)}
	good.plainLogin("alice", 1)
	good.metadata()
	goodDone := time.Now()
	at := <-answered
	if at.Sub(sent) < delay {
		t.Errorf("failed login answered after %v, want at least %v", at.Sub(sent), delay)
	}
	if !goodDone.Before(at) {
		t.Errorf("another connection waited for the delayed failure")
	}
	waitClosed(t, bad.c)
}

// TestSASLMaxReceive (sasl.server.max.receive.size): before login a frame
// over 512 KiB closes the connection without being read; after login the
// connection's limit is MaxRequestBytes again.
func TestSASLMaxReceive(t *testing.T) {
	t.Parallel()
	addr := saslServer(t, Config{MaxRequestBytes: 4 << 20})
	c := dial(t, addr)
	if _, err := c.Write([]byte{0, 0x10, 0, 0}); err != nil { // declares 1 MiB
		t.Fatal(err)
	}
	waitClosed(t, c)
	ok := &saslConn{t: t, c: dial(t, addr)}
	ok.plainLogin("alice", 1)
	md := kmsg.NewPtrMetadataRequest()
	md.SetVersion(1)
	for range 20000 { // a 1 MiB+ Metadata request: allowed once authenticated
		md.Topics = append(md.Topics, kmsg.MetadataRequestTopic{Topic: kmsg.StringPtr(strings.Repeat("t", 50))})
	}
	if f := rawreq.Frame(md, 1, nil); len(f) <= SASLMaxReceiveBytes {
		t.Fatalf("frame of %d bytes is not over the limit", len(f))
	}
	ok.roundTrip(md, 1)
}
