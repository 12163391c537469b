package outbox_test

import (
	"context"
	"errors"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kawa-broker/kawa/dedup"
	"github.com/kawa-broker/kawa/internal/sqltest"
	"github.com/kawa-broker/kawa/outbox"
)

// TestMigrate: concurrent and repeated Migrate calls succeed and leave one
// version row; a database with a newer schema is refused.
func TestMigrate(t *testing.T) {
	sqltest.Each(t, func(t *testing.T, be sqltest.Backend) {
		ctx := context.Background()
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = outbox.Migrate(ctx, be.DB, be.Dialect)
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatalf("concurrent Migrate: %v", err)
			}
		}
		if err := outbox.Migrate(ctx, be.DB, be.Dialect); err != nil {
			t.Fatal(err)
		}
		var n, v int
		if err := be.DB.QueryRow(`SELECT COUNT(*), MAX(version) FROM kawa_outbox_schema`).Scan(&n, &v); err != nil || n != 1 || v != outbox.SchemaVersion {
			t.Fatalf("version table: %d rows, version %d, %v", n, v, err)
		}
		if _, err := be.DB.Exec(`UPDATE kawa_outbox_schema SET version = 99`); err != nil {
			t.Fatal(err)
		}
		if err := outbox.Migrate(ctx, be.DB, be.Dialect); err == nil {
			t.Error("Migrate on a newer schema: no error")
		}
		if len(outbox.DDL(be.Dialect)) == 0 || outbox.DDL(dedup.Dialect(0)) != nil {
			t.Error("DDL: want statements for known dialects only")
		}
	})
}

// TestEnqueueHeaders: Enqueue stamps the contract's headers (UUIDv7 id,
// kawa-seq per key, kawa-source, traceparent from the ctx) and refuses
// records it cannot honour.
func TestEnqueueHeaders(t *testing.T) {
	sqltest.Each(t, func(t *testing.T, be sqltest.Backend) {
		e := newEnv(t, be)
		ctx := outbox.WithTraceParent(context.Background(), "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
		tx, err := be.DB.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		for _, bad := range []outbox.Record{
			{Key: []byte("k")},
			{Topic: testTopic, Headers: []outbox.Header{{Key: "kawa-seq", Value: []byte("7")}}},
			{Topic: testTopic, Headers: []outbox.Header{{Key: "Traceparent"}}},
		} {
			if _, err := e.ob.Enqueue(ctx, tx, bad); !errors.Is(err, outbox.ErrNoTopic) && !errors.Is(err, outbox.ErrReservedHeader) {
				t.Errorf("Enqueue(%+v) = %v, want ErrNoTopic or ErrReservedHeader", bad, err)
			}
		}
		noSource, err := outbox.New(be.DB, be.Dialect, outbox.Config{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := noSource.Enqueue(ctx, tx, outbox.Record{Topic: testTopic}); !errors.Is(err, outbox.ErrNoSource) {
			t.Errorf("Enqueue without a Source: %v, want ErrNoSource", err)
		}
		if _, err := outbox.New(be.DB, be.Dialect, outbox.Config{Source: "has space"}); err == nil {
			t.Error("New with a bad Source: no error")
		}
		var ids []outbox.MessageID
		for _, k := range []string{"a", "b", "a"} {
			id, err := e.ob.Enqueue(ctx, tx, outbox.Record{Topic: testTopic, Key: []byte(k), Value: []byte(k),
				Headers: []outbox.Header{{Key: "app", Value: []byte("x")}}})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		uuid7 := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
		for _, id := range ids {
			if !uuid7.MatchString(string(id)) {
				t.Errorf("message id %q is not a UUIDv7", id)
			}
		}
		rr := e.startRelay(outbox.RelayConfig{Mode: outbox.Idempotent})
		e.waitUnsent(rr, 0)
		rr.stop()
		c := e.b.Client(kgo.ConsumeTopics(testTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		want := map[string]map[string]string{
			string(ids[0]): {"kawa-seq": "1", "app": "x"},
			string(ids[1]): {"kawa-seq": "1", "app": "x"},
			string(ids[2]): {"kawa-seq": "2", "app": "x"},
		}
		for len(want) > 0 {
			fs := c.PollFetches(context.Background())
			fs.EachRecord(func(r *kgo.Record) {
				h := map[string]string{}
				for _, x := range r.Headers {
					h[x.Key] = string(x.Value)
				}
				w, ok := want[h[dedup.HeaderMessageID]]
				if !ok {
					t.Errorf("unexpected record %v", h)
					return
				}
				delete(want, h[dedup.HeaderMessageID])
				if h[dedup.HeaderSequence] != w["kawa-seq"] || h["app"] != "x" || h[dedup.HeaderSource] != testSource ||
					h[dedup.HeaderTraceParent] != "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" {
					t.Errorf("record %s headers %v", r.Key, h)
				}
			})
		}
	})
}

// TestRelaysShareShards: two relays split the shards (each takes its fair
// share), together publish every record once, and a relay refuses to start
// when rows exist for shards beyond its count.
func TestRelaysShareShards(t *testing.T) {
	sqltest.Each(t, func(t *testing.T, be sqltest.Backend) {
		e := newEnv(t, be)
		committed, _ := e.workload(80, 16, 0)
		statuses := make(chan outbox.Status, 100)
		hook := func(st outbox.Status) {
			select {
			case statuses <- st:
			default:
			}
		}
		r1 := e.startRelay(outbox.RelayConfig{Mode: outbox.Transactional, Owner: "r1", Hooks: outbox.Hooks{Status: hook}})
		r2 := e.startRelay(outbox.RelayConfig{Mode: outbox.Transactional, Owner: "r2"})
		e.waitUnsent(r1, 0)
		// Relays that start together may race for shards at first; the
		// next lease rounds converge on half each.
		timeout := time.After(30 * time.Second)
		for fair := false; !fair; {
			var st outbox.Status
			select {
			case st = <-statuses:
			case <-timeout:
				t.Fatal("the relays never split the shards half and half")
			}
			owners := map[string]int{}
			for _, l := range st.Leases {
				if l.Owner != "" {
					owners[l.Owner]++
				}
			}
			fair = owners["r1"] == testShards/2 && owners["r2"] == testShards/2
		}
		r1.stop()
		r2.stop()
		e.checkExact(e.readTopic(), committed, nil, 0)

		other, err := outbox.New(be.DB, be.Dialect, outbox.Config{Source: testSource, Shards: testShards * 2})
		if err != nil {
			t.Fatal(err)
		}
		tx, _ := be.DB.BeginTx(context.Background(), nil)
		for i := range 8 {
			if _, err := other.Enqueue(context.Background(), tx, outbox.Record{Topic: testTopic, Key: []byte{byte(i)}}); err != nil {
				t.Fatal(err)
			}
		}
		tx.Commit()
		r, err := e.ob.NewRelay(outbox.RelayConfig{Mode: outbox.Idempotent, ClientOpts: []kgo.Opt{kgo.SeedBrokers(e.b.Addr)}})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Run(context.Background()); err == nil {
			t.Error("relay with 4 shards started on rows of 8 shards")
		}
	})
}

// TestMigrateAppUser: once the schema is current, Migrate runs no DDL, so an
// application user without CREATE on the schema (PostgreSQL: a role with
// only table privileges) can start and enqueue; before, CREATE TABLE IF NOT
// EXISTS kawa_outbox_schema failed with "permission denied for schema
// public".
func TestMigrateAppUser(t *testing.T) {
	sqltest.Each(t, func(t *testing.T, be sqltest.Backend) {
		ctx := context.Background()
		if err := outbox.Migrate(ctx, be.DB, be.Dialect); err != nil {
			t.Fatal(err)
		}
		app, d := sqltest.Open(t, sqltest.AppUserURL(t, be))
		if err := outbox.Migrate(ctx, app, d); err != nil {
			t.Fatalf("Migrate as the application user on a current schema: %v", err)
		}
		ob, err := outbox.New(app, d, outbox.Config{Source: "appuser"})
		if err != nil {
			t.Fatal(err)
		}
		tx, err := app.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if _, err := ob.Enqueue(ctx, tx, outbox.Record{Topic: testTopic, Key: []byte("k")}); err != nil {
			t.Fatalf("Enqueue as the application user: %v", err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		var n int
		if err := be.DB.QueryRow(`SELECT COUNT(*) FROM kawa_outbox`).Scan(&n); err != nil || n != 1 {
			t.Fatalf("kawa_outbox rows = %d, %v; want 1", n, err)
		}
	})
}
