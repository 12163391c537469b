package pgnotify_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kawa-broker/kawa/internal/kawatest"
	"github.com/kawa-broker/kawa/internal/sqltest"
	"github.com/kawa-broker/kawa/outbox"
	"github.com/kawa-broker/kawa/outbox/pgnotify"
)

// TestNotifyWakesRelay: with the relay's poll interval at a minute, a row
// committed with Notify is published at once, and a row committed without
// one (a notification lost while the listener was away) is published when
// the listener reconnects.
func TestNotifyWakesRelay(t *testing.T) {
	be := sqltest.New(t, "postgres")
	b := kawatest.NewBroker(t)
	b.CreateTopic("events", 1, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := outbox.Migrate(ctx, be.DB, be.Dialect); err != nil {
		t.Fatal(err)
	}
	ob, err := outbox.New(be.DB, be.Dialect, outbox.Config{Source: "notifytest", Shards: 1})
	if err != nil {
		t.Fatal(err)
	}
	published := make(chan int, 16)
	r, err := ob.NewRelay(outbox.RelayConfig{
		Mode:       outbox.Idempotent,
		ClientOpts: []kgo.Opt{kgo.SeedBrokers(b.Addr)},
		PollMin:    time.Minute, PollMax: time.Minute,
		Hooks: outbox.Hooks{Published: func(_, n int) { published <- n }},
	})
	if err != nil {
		t.Fatal(err)
	}
	kicks := &countingKicker{r: r, kicked: make(chan struct{}, 100)}
	relayDone := make(chan error, 1)
	go func() { relayDone <- r.Run(ctx) }()
	listenDone := make(chan error, 1)
	go func() {
		listenDone <- pgnotify.Listen(ctx, pgnotify.Config{ConnString: be.URL, ReconnectDelay: 50 * time.Millisecond}, kicks)
	}()
	defer func() {
		cancel()
		<-relayDone
		<-listenDone
	}()

	enqueue := func(notify bool) {
		t.Helper()
		tx, err := be.DB.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if _, err := ob.Enqueue(ctx, tx, outbox.Record{Topic: "events", Key: []byte("k"), Value: []byte("v")}); err != nil {
				t.Fatal(err)
			}
			if notify {
				if err := pgnotify.Notify(ctx, tx); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	awaitPublished := func(what string) {
		t.Helper()
		got := 0
		timeout := time.After(20 * time.Second) // well under the one-minute poll
		for got < 3 {
			select {
			case n := <-published:
				got += n
			case <-timeout:
				t.Fatalf("%s: %d of 3 rows published within 20s", what, got)
			}
		}
	}
	// The first batch may be found by the shard's first poll; the relay is
	// idle for a minute after it.
	enqueue(true)
	awaitPublished("first batch")
	enqueue(true)
	awaitPublished("after NOTIFY")

	// A lost notification: commit without one, then cut the listener's
	// connection; its reconnect kicks the relay (no NOTIFY is sent from
	// here on, so every kick now is a reconnect's).
	enqueue(false)
	for len(kicks.kicked) > 0 {
		<-kicks.kicked
	}
	res, err := be.DB.ExecContext(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, pgnotify.ApplicationName)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("terminated %d listener connections, want 1", n)
	}
	select {
	case <-kicks.kicked:
	case <-time.After(20 * time.Second):
		t.Fatal("the listener did not kick the relay after reconnecting")
	}
	awaitPublished("after the listener reconnected")
}

// countingKicker forwards kicks to the relay and signals each one.
type countingKicker struct {
	r      *outbox.Relay
	kicked chan struct{}
}

func (k *countingKicker) Notify() {
	k.r.Notify()
	select {
	case k.kicked <- struct{}{}:
	default:
	}
}
