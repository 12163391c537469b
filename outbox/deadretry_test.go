package outbox_test

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"testing"

	"github.com/kawa-broker/kawa/dedup"
	"github.com/kawa-broker/kawa/internal/sqltest"
	"github.com/kawa-broker/kawa/outbox"
)

// TestConcurrentRetryDeadOfOneID: several `kawa outbox dead retry ID` at
// once move the row back exactly once; every other caller gets ErrNotFound
// (on PostgreSQL the losers used to fail on kawa_outbox's primary key with a
// raw "duplicate key value" error).
func TestConcurrentRetryDeadOfOneID(t *testing.T) {
	sqltest.Each(t, func(t *testing.T, be sqltest.Backend) {
		e := newEnv(t, be)
		ctx := context.Background()
		ins := `INSERT INTO kawa_outbox_dead (id, shard, topic, msg_key, value, headers, part, seq, message_id, created_at, attempts, error, died_at)
VALUES (?, 0, ?, ?, ?, ?, NULL, 1, 'dead-1', 0, 5, 'MESSAGE_TOO_LARGE', 0)`
		if be.Dialect == dedup.Postgres {
			ins = `INSERT INTO kawa_outbox_dead (id, shard, topic, msg_key, value, headers, part, seq, message_id, created_at, attempts, error, died_at)
VALUES ($1, 0, $2, $3, $4, $5, NULL, 1, 'dead-1', 0, 5, 'MESSAGE_TOO_LARGE', 0)`
		}
		const callers, rounds = 8, 20
		// Open the pool's connections first so the callers' transactions
		// overlap instead of queueing behind connection setup.
		var conns []*sql.Conn
		for range callers {
			c, err := be.DB.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, c)
		}
		for _, c := range conns {
			c.Close()
		}
		for round := range rounds {
			id := int64(1000 + round)
			if _, err := be.DB.ExecContext(ctx, ins, id, testTopic, []byte("k"), []byte("v"), []byte("[]")); err != nil {
				t.Fatal(err)
			}
			errs := make([]error, callers)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					errs[i] = e.ob.RetryDead(ctx, id)
				}()
			}
			close(start)
			wg.Wait()
			moved := 0
			for _, err := range errs {
				switch {
				case err == nil:
					moved++
				case !errors.Is(err, outbox.ErrNotFound):
					t.Errorf("round %d: concurrent RetryDead(%d): %v, want nil or ErrNotFound", round, id, err)
				}
			}
			if moved != 1 {
				t.Errorf("round %d: %d of %d concurrent RetryDead calls moved the row, want 1", round, moved, callers)
			}
		}
		st, err := e.ob.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Unsent != rounds || st.Dead != 0 {
			t.Fatalf("status %+v, want %d unsent and 0 dead rows", st, rounds)
		}
	})
}
