// Package kawatest starts in-process Kawa brokers for tests, like
// net/http/httptest: a real broker on 127.0.0.1:0 with its data in a
// directory, stopped by t.Cleanup, plus franz-go client factories.
package kawatest

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kawa-broker/kawa/internal/auth"
	"github.com/kawa-broker/kawa/internal/broker"
	"github.com/kawa-broker/kawa/internal/config"
	"github.com/kawa-broker/kawa/internal/server"
	"github.com/kawa-broker/kawa/internal/vfs"
)

// Broker is a running in-process broker.
type Broker struct {
	t      testing.TB
	Addr   string
	FS     vfs.FS // the file system holding Dir: vfs.OS, or what NewBrokerOn was given
	Dir    string
	Config config.Broker
	B      *broker.Broker
	// ClientOpts are added to every client Client and Admin make (the
	// credentials and TLS settings of a NewSecureBroker).
	ClientOpts []kgo.Opt
	listener   server.Listener
	srv        *server.Server
	done       chan error
	closed     bool
}

// Option adjusts the broker config before start.
type Option func(*config.Broker)

// NewBroker starts a broker in t.TempDir() and stops it at cleanup (Start
// takes a full config, e.g. a previous broker's DataDir for restart tests).
func NewBroker(t testing.TB, opts ...Option) *Broker {
	t.Helper()
	cfg := config.Broker{Listen: "127.0.0.1:0", DataDir: t.TempDir(), AutoCreateTopics: true}
	for _, o := range opts {
		o(&cfg)
	}
	return Start(t, cfg)
}

// NewBrokerOn starts a broker whose files all live in fsys, under the data
// dir /kawa-data unless an option sets another; it stops at cleanup. Tests
// pass a *vfs.MemFS to simulate power cuts (see PowerCut) or a *vfs.ErrorFS
// to fail chosen writes and fsyncs.
func NewBrokerOn(t testing.TB, fsys vfs.FS, opts ...Option) *Broker {
	t.Helper()
	cfg := config.Broker{Listen: "127.0.0.1:0", DataDir: "/kawa-data", AutoCreateTopics: true}
	for _, o := range opts {
		o(&cfg)
	}
	return StartOn(t, fsys, cfg)
}

// WithDir runs the broker on an existing data directory (restart tests).
func WithDir(dir string) Option { return func(c *config.Broker) { c.DataDir = dir } }

// Start starts a broker with cfg on the real file system.
func Start(t testing.TB, cfg config.Broker) *Broker {
	t.Helper()
	return StartOn(t, vfs.OS, cfg)
}

// StartOn starts a broker with cfg whose files live in fsys.
func StartOn(t testing.TB, fsys vfs.FS, cfg config.Broker) *Broker {
	t.Helper()
	return startOn(t, fsys, cfg, server.Listener{})
}

// NewSecureBroker starts a broker in t.TempDir() whose one listener is l
// (SSL, SASL_PLAINTEXT or SASL_SSL); Client then needs the matching kgo
// options (kgo.DialTLSConfig, kgo.SASL). A SASL listener without l.SASL
// gets PLAIN and both SCRAM mechanisms over the broker's credential store
// (B.Credentials()).
func NewSecureBroker(t testing.TB, l server.Listener, opts ...Option) *Broker {
	t.Helper()
	cfg := config.Broker{Listen: "127.0.0.1:0", DataDir: t.TempDir(), AutoCreateTopics: true}
	for _, o := range opts {
		o(&cfg)
	}
	return startOn(t, vfs.OS, cfg, l)
}

func startOn(t testing.TB, fsys vfs.FS, cfg config.Broker, l server.Listener) *Broker {
	t.Helper()
	cfg = cfg.WithDefaults()
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		t.Fatalf("kawatest: listen: %v", err)
	}
	host, portStr, _ := net.SplitHostPort(ln.Addr().String())
	port, _ := strconv.Atoi(portStr)
	lg := slog.New(slog.NewTextHandler(io.Discard, nil))
	if os.Getenv("KAWA_TEST_LOG") != "" {
		lg = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	b, err := broker.Open(fsys, cfg, host, int32(port), lg, nil)
	if err != nil {
		ln.Close()
		t.Fatalf("kawatest: open broker: %v", err)
	}
	if (l.Protocol == server.SASLPlaintext || l.Protocol == server.SASLSSL) && l.SASL == nil {
		// Every mechanism, over the broker's own credential store.
		if l.SASL, err = auth.NewSASL(b.Credentials(), []string{auth.Plain, auth.ScramSHA256, auth.ScramSHA512}); err != nil {
			t.Fatalf("kawatest: %v", err)
		}
	}
	srv := server.New(server.ConfigFrom(cfg, lg), b)
	kb := &Broker{t: t, Addr: ln.Addr().String(), FS: fsys, Dir: cfg.DataDir, Config: cfg, B: b, srv: srv, listener: l, done: make(chan error, 1)}
	go func() { kb.done <- srv.ServeListener(ln, l) }()
	t.Cleanup(kb.Close)
	return kb
}

// Close shuts the broker down gracefully (idempotent).
func (k *Broker) Close() {
	if k.closed {
		return
	}
	k.closed = true
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = k.srv.Shutdown(ctx)
	<-k.done
	if err := k.B.Close(); err != nil {
		k.t.Errorf("kawatest: close broker: %v", err)
	}
}

// Restart closes the broker and starts a new one on the same directory and
// config (a new port).
func (k *Broker) Restart() *Broker {
	k.t.Helper()
	k.Close()
	cfg := k.Config
	cfg.Listen = "127.0.0.1:0"
	nb := startOn(k.t, k.FS, cfg, k.listener)
	nb.ClientOpts = k.ClientOpts
	return nb
}

// PowerCut simulates a power loss: it takes the durable view of the broker's
// *vfs.MemFS (file contents as of their last fsync, directory entries as of
// their directory's last fsync; vfs.MemFS.CrashClone) at this instant, stops
// this broker, and starts a new one on that view with the same config (a new
// port). It fails the test if the broker does not run on a *vfs.MemFS or the
// new broker does not start.
func (k *Broker) PowerCut() *Broker {
	k.t.Helper()
	return k.PowerCutKeeping(nil)
}

// PowerCutKeeping is PowerCut where keep decides what survives of each file
// (vfs.MemFS.CrashCloneFunc: the durable bytes plus a prefix of an unsynced
// tail models a torn write); nil keeps the durable bytes only.
func (k *Broker) PowerCutKeeping(keep func(name string, synced, current []byte) []byte) *Broker {
	k.t.Helper()
	mem, ok := k.FS.(*vfs.MemFS)
	if !ok {
		k.t.Fatalf("kawatest: PowerCut needs a broker on a *vfs.MemFS, have %T", k.FS)
	}
	durable := mem.CrashClone()
	if keep != nil {
		durable = mem.CrashCloneFunc(keep)
	}
	k.Close()
	cfg := k.Config
	cfg.Listen = "127.0.0.1:0"
	return StartOn(k.t, durable, cfg)
}

// Client returns a kgo client for the broker, closed at cleanup.
func (k *Broker) Client(opts ...kgo.Opt) *kgo.Client {
	k.t.Helper()
	all := append([]kgo.Opt{kgo.SeedBrokers(k.Addr)}, k.ClientOpts...)
	c, err := kgo.NewClient(append(all, opts...)...)
	if err != nil {
		k.t.Fatalf("kawatest: client: %v", err)
	}
	k.t.Cleanup(c.Close)
	return c
}

// Admin returns a kadm client for the broker.
func (k *Broker) Admin() *kadm.Client { return kadm.NewClient(k.Client()) }

// CreateTopic creates a topic with partitions and fails the test on error.
func (k *Broker) CreateTopic(name string, partitions int32, configs map[string]*string) {
	k.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := k.Admin().CreateTopic(ctx, partitions, 1, configs, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		k.t.Fatalf("kawatest: create topic %s: %v", name, err)
	}
}
