package broker_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kawa-broker/kawa/internal/auth"
	"github.com/kawa-broker/kawa/internal/config"
	"github.com/kawa-broker/kawa/internal/kawatest"
	"github.com/kawa-broker/kawa/internal/server"
)

// reauthHooks counts, per client, the SaslHandshake requests written and
// the connections lost.
type reauthHooks struct {
	handshakes, disconnects atomic.Int64
}

func (h *reauthHooks) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == kmsg.SASLHandshake.Int16() && err == nil {
		h.handshakes.Add(1)
	}
}

func (h *reauthHooks) OnBrokerDisconnect(kgo.BrokerMetadata, net.Conn) { h.disconnects.Add(1) }

// TestFranzGoReauthenticates (KIP-368): with connections.max.reauth.ms at
// 2 s, franz-go learns the session lifetime from SaslAuthenticate and
// re-authenticates on its live connections by itself; producing across
// several lifetimes never fails and no connection is dropped.
func TestFranzGoReauthenticates(t *testing.T) {
	t.Parallel()
	b := kawatest.NewSecureBroker(t, server.Listener{Protocol: server.SASLPlaintext},
		func(c *config.Broker) { c.ConnectionsMaxReauth = 2 * time.Second })
	if err := b.B.Credentials().SetPassword("alice", auth.ScramSHA512, "alice-secret", auth.MinIterations); err != nil {
		t.Fatal(err)
	}
	hooks := &reauthHooks{}
	cl := b.Client(kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism()),
		kgo.WithHooks(hooks), kgo.DefaultProduceTopic("reauth"), kgo.AllowAutoTopicCreation())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("first")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	logins := hooks.handshakes.Load() // one per connection the client opened
	// Each produce is real work on the connection; the loop ends when the
	// client has re-authenticated twice on top of its logins.
	for n := 0; hooks.handshakes.Load() < logins+2; n++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatalf("produce %d across re-authentications: %v", n, err)
		}
	}
	if d := hooks.disconnects.Load(); d != 0 {
		t.Errorf("%d connections dropped; re-authentication should keep them", d)
	}
}
