package broker_test

import (
	"context"
	"crypto/tls"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	xscram "github.com/xdg-go/scram"

	"github.com/kawa-broker/kawa/internal/auth"
	"github.com/kawa-broker/kawa/internal/kawatest"
	"github.com/kawa-broker/kawa/internal/server"
)

// setUser gives user the password pass for each SCRAM mechanism.

type secured struct {
	b  *kawatest.Broker
	ca *kawatest.CA
}

// startSecure starts a broker whose one listener is protocol, with users
// alice/alice-secret (both SCRAM mechanisms) and all three mechanisms on.
func startSecure(t *testing.T, protocol string, clientAuth tls.ClientAuthType) secured {
	t.Helper()
	ca := kawatest.NewCA(t, "kawa test CA")
	l := server.Listener{Protocol: protocol}
	if protocol == server.SSL || protocol == server.SASLSSL {
		l.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Issue("localhost", "")}, ClientCAs: ca.Pool(), ClientAuth: clientAuth}
	}
	b := kawatest.NewSecureBroker(t, l)
	for _, m := range []string{auth.ScramSHA256, auth.ScramSHA512} {
		if err := b.B.Credentials().SetPassword("alice", m, "alice-secret", auth.MinIterations); err != nil {
			t.Fatal(err)
		}
	}
	return secured{b: b, ca: ca}
}

func (s secured) tlsOpt() kgo.Opt {
	return kgo.DialTLSConfig(&tls.Config{RootCAs: s.ca.Pool(), ServerName: "localhost"})
}

// produceConsume produces one record to topic and consumes it back.
func produceConsume(t *testing.T, b *kawatest.Broker, topic string, opts ...kgo.Opt) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl := b.Client(append([]kgo.Opt{kgo.ConsumeTopics(topic), kgo.AllowAutoTopicCreation(), kgo.RequestRetries(0)}, opts...)...)
	res := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("v1")})
	if err := res.FirstErr(); err != nil {
		return err
	}
	// The topic may hold records of an earlier call: read until the one
	// just produced, which must come back as it was written.
	produced := res[0].Record
	for {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			return err
		}
		for _, r := range fs.Records() {
			if r.Partition == produced.Partition && r.Offset == produced.Offset {
				if string(r.Value) != "v1" {
					t.Fatalf("consumed %q at offset %d, want v1", r.Value, r.Offset)
				}
				return nil
			}
		}
	}
}

func TestSASLClients(t *testing.T) {
	for _, tc := range []struct {
		name     string
		protocol string
		mech     func(user, pass string) kgo.Opt
	}{
		{"SASL_SSL/SCRAM-SHA-512", server.SASLSSL, func(u, p string) kgo.Opt {
			return kgo.SASL(scram.Auth{User: u, Pass: p}.AsSha512Mechanism())
		}},
		{"SASL_PLAINTEXT/SCRAM-SHA-256", server.SASLPlaintext, func(u, p string) kgo.Opt {
			return kgo.SASL(scram.Auth{User: u, Pass: p}.AsSha256Mechanism())
		}},
		{"SASL_SSL/PLAIN", server.SASLSSL, func(u, p string) kgo.Opt { return kgo.SASL(plain.Auth{User: u, Pass: p}.AsMechanism()) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startSecure(t, tc.protocol, tls.NoClientCert)
			var opts []kgo.Opt
			if tc.protocol == server.SASLSSL {
				opts = append(opts, s.tlsOpt())
			}
			if err := produceConsume(t, s.b, "orders", append(opts, tc.mech("alice", "alice-secret"))...); err != nil {
				t.Fatalf("right password: %v", err)
			}
			for _, bad := range [][2]string{{"alice", "wrong"}, {"mallory", "alice-secret"}} {
				err := loginErr(t, s.b, append(opts, tc.mech(bad[0], bad[1]))...)
				if !errors.Is(err, kerr.SaslAuthenticationFailed) {
					t.Fatalf("%s/%s: err %v, want SASL_AUTHENTICATION_FAILED", bad[0], bad[1], err)
				}
			}
			if err := loginErr(t, s.b, opts...); err == nil {
				t.Fatal("a client without SASL produced on a SASL listener")
			}
		})
	}
}

// loginErr sends one Metadata request on a new client with only opts and
// returns its error.
func loginErr(t *testing.T, b *kawatest.Broker, opts ...kgo.Opt) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Not b.Client: its ClientOpts may carry another user's SASL.
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.Addr), kgo.RequestRetries(0)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	_, err = cl.Request(ctx, kmsg.NewPtrMetadataRequest())
	return err
}

func (r *rawConn) roundTrip(req kmsg.Request) kmsg.Response {
	r.t.Helper()
	r.write(r.frame(req))
	resp := req.ResponseKind()
	if err := r.read(resp); err != nil {
		r.t.Fatalf("recv %s: %v", kmsg.NameForKey(req.Key()), err)
	}
	return resp
}

// expectClosed sends a Metadata request and requires the broker to close the
// connection without answering it.
func (c *rawConn) expectClosed() {
	c.t.Helper()
	md := kmsg.NewPtrMetadataRequest()
	md.SetVersion(1)
	_, _ = c.c.Write(c.frame(md))
	if !c.closed() {
		c.t.Fatal("Metadata before authentication did not close the connection")
	}
}

func (c *rawConn) handshake(mech string) {
	c.t.Helper()
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.SetVersion(1)
	hs.Mechanism = mech
	if resp := c.roundTrip(hs).(*kmsg.SASLHandshakeResponse); resp.ErrorCode != 0 {
		c.t.Fatalf("SaslHandshake %s: error %d", mech, resp.ErrorCode)
	}
}

func (c *rawConn) authenticate(msg []byte) *kmsg.SASLAuthenticateResponse {
	c.t.Helper()
	a := kmsg.NewPtrSASLAuthenticateRequest()
	a.SetVersion(1)
	a.SASLAuthBytes = msg
	return c.roundTrip(a).(*kmsg.SASLAuthenticateResponse)
}

// TestUnauthenticatedRequestsClose: before SASL succeeds only ApiVersions,
// SaslHandshake and SaslAuthenticate are served; a client that ignores a
// failed SCRAM proof and sends Metadata is disconnected (the Nisshi/Tansu
// bug: a finished but invalid conversation taken for a login).
func TestUnauthenticatedRequestsClose(t *testing.T) {
	s := startSecure(t, server.SASLPlaintext, tls.NoClientCert)

	t.Run("metadata first", func(t *testing.T) {
		c := dial(t, s.b.Addr)
		av := kmsg.NewPtrApiVersionsRequest()
		av.SetVersion(0)
		if resp := c.roundTrip(av).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 || len(resp.ApiKeys) == 0 {
			t.Fatalf("ApiVersions before auth: %+v", resp)
		}
		c.expectClosed()
	})
	t.Run("metadata after handshake", func(t *testing.T) {
		c := dial(t, s.b.Addr)
		c.handshake(auth.ScramSHA512)
		c.expectClosed()
	})
	t.Run("wrong SCRAM proof", func(t *testing.T) {
		c := dial(t, s.b.Addr)
		c.handshake(auth.ScramSHA512)
		cl, _ := xscram.SHA512.NewClient("alice", "not-alice-secret", "")
		conv := cl.NewConversation()
		first, _ := conv.Step("")
		resp := c.authenticate([]byte(first))
		if resp.ErrorCode != 0 {
			t.Fatalf("client-first: error %d", resp.ErrorCode)
		}
		final, err := conv.Step(string(resp.SASLAuthBytes))
		if err != nil {
			t.Fatal(err)
		}
		resp = c.authenticate([]byte(final))
		if resp.ErrorCode != kerr.SaslAuthenticationFailed.Code || resp.ErrorMessage == nil || *resp.ErrorMessage == "" {
			t.Fatalf("client-final with a wrong proof: error %d, message %v; want 58 with a message", resp.ErrorCode, resp.ErrorMessage)
		}
		c.expectClosed()
	})
	t.Run("malformed client-first", func(t *testing.T) {
		c := dial(t, s.b.Addr)
		c.handshake(auth.ScramSHA256)
		if resp := c.authenticate([]byte("garbage")); resp.ErrorCode != kerr.SaslAuthenticationFailed.Code {
			t.Fatalf("malformed client-first: error %d, want 58", resp.ErrorCode)
		}
		c.expectClosed()
	})
	t.Run("right password then metadata", func(t *testing.T) {
		c := dial(t, s.b.Addr)
		c.handshake(auth.Plain)
		if resp := c.authenticate([]byte("\x00alice\x00alice-secret")); resp.ErrorCode != 0 {
			t.Fatalf("PLAIN: error %d", resp.ErrorCode)
		}
		md := kmsg.NewPtrMetadataRequest()
		md.SetVersion(1)
		if resp := c.roundTrip(md).(*kmsg.MetadataResponse); len(resp.Brokers) != 1 {
			t.Fatalf("Metadata after login: %+v", resp)
		}
	})
	t.Run("unsupported mechanism", func(t *testing.T) {
		c := dial(t, s.b.Addr)
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.SetVersion(1)
		hs.Mechanism = "GSSAPI"
		resp := c.roundTrip(hs).(*kmsg.SASLHandshakeResponse)
		if resp.ErrorCode != kerr.UnsupportedSaslMechanism.Code || len(resp.SupportedMechanisms) != 3 {
			t.Fatalf("GSSAPI: %+v", resp)
		}
	})
}

// TestTLS: mTLS principals pass, an untrusted client certificate and a
// plaintext client fail, and garbage closes only its own connection.
func TestTLS(t *testing.T) {
	s := startSecure(t, server.SSL, tls.RequireAndVerifyClientCert)
	good := s.ca.Issue("app", "Example")
	if err := produceConsume(t, s.b, "t", kgo.DialTLSConfig(&tls.Config{RootCAs: s.ca.Pool(), ServerName: "localhost", Certificates: []tls.Certificate{good}})); err != nil {
		t.Fatalf("trusted client certificate: %v", err)
	}
	other := kawatest.NewCA(t, "other CA").Issue("mallory", "")
	nc, err := tls.Dial("tcp", s.b.Addr, &tls.Config{RootCAs: s.ca.Pool(), ServerName: "localhost", Certificates: []tls.Certificate{other}})
	if err == nil {
		// TLS 1.3: the client learns of the rejection on its first read.
		_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
		_, err = nc.Read(make([]byte, 1))
		nc.Close()
	}
	if err == nil {
		t.Fatal("a certificate from an untrusted CA was accepted")
	}
	// A plaintext Kafka client on the TLS listener: closed, broker unharmed.
	c := dial(t, s.b.Addr)
	c.expectClosed()
	if err := produceConsume(t, s.b, "t", kgo.DialTLSConfig(&tls.Config{RootCAs: s.ca.Pool(), ServerName: "localhost", Certificates: []tls.Certificate{good}})); err != nil {
		t.Fatalf("after a plaintext client: %v", err)
	}
}

// TestTLSGarbageOnPlaintext: TLS on a PLAINTEXT listener closes only that
// connection.
func TestTLSGarbageOnPlaintext(t *testing.T) {
	b := kawatest.NewBroker(t)
	ca := kawatest.NewCA(t, "ca")
	nc, err := tls.Dial("tcp", b.Addr, &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"})
	if err == nil {
		nc.Close()
		t.Fatal("TLS handshake with a PLAINTEXT listener succeeded")
	}
	if err := produceConsume(t, b, "t"); err != nil {
		t.Fatalf("plaintext client after TLS garbage: %v", err)
	}
}
