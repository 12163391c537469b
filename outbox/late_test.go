package outbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/kawa-broker/kawa/internal/kawatest/wait"
	"github.com/kawa-broker/kawa/internal/sqltest"
	"github.com/kawa-broker/kawa/outbox"
)

// TestLateCommitNotSkipped: rows whose transactions commit after later
// rows were already published still go out, and two interleaved
// transactions on one key get kawa-seq in commit order.
func TestLateCommitNotSkipped(t *testing.T) {
	sqltest.Each(t, func(t *testing.T, be sqltest.Backend) {
		e := newEnv(t, be)
		ctx := context.Background()
		rr := e.startRelay(outbox.RelayConfig{Mode: outbox.Transactional, PollMax: 10 * time.Second})
		var committed []enqueued
		enqueue := func(tx outbox.Tx, key string) outbox.MessageID {
			t.Helper()
			id, err := e.ob.Enqueue(ctx, tx, outbox.Record{Topic: testTopic, Key: []byte(key), Value: []byte(key)})
			if err != nil {
				t.Fatal(err)
			}
			return id
		}

		// tx1 enqueues on key k and stays open; tx2 on the same key waits
		// for it (the key's counter row on PostgreSQL, the write lock on
		// SQLite) and so takes the next kawa-seq after tx1 commits.
		tx1, err := be.DB.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		id1 := enqueue(tx1, "k")
		tx2done := make(chan outbox.MessageID)
		go func() {
			tx2, err := be.DB.BeginTx(ctx, nil)
			if err != nil {
				t.Error(err)
				close(tx2done)
				return
			}
			id := enqueue(tx2, "k")
			if err := rr.relay.Commit(tx2); err != nil {
				t.Error(err)
			}
			tx2done <- id
		}()
		if be.Dialect.String() == "postgres" {
			waitLockWaiter(t, e)
			// Meanwhile another key commits and is published while tx1
			// (holding a lower row id) is still open.
			tx3, err := be.DB.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			id3 := enqueue(tx3, "other")
			if err := rr.relay.Commit(tx3); err != nil {
				t.Fatal(err)
			}
			committed = append(committed, enqueued{id3, "other"})
			e.waitUnsent(rr, 0) // tx1's row is not visible yet
		}
		if err := rr.relay.Commit(tx1); err != nil {
			t.Fatal(err)
		}
		committed = append(committed, enqueued{id1, "k"})
		id2 := <-tx2done
		committed = append(committed, enqueued{id2, "k"})
		e.waitUnsent(rr, 0)
		rr.stop()
		recs := e.readTopic()
		e.checkExact(recs, committed, nil, 0) // checks k's seq 1 (tx1) then 2 (tx2)
		for _, g := range recs {
			if (g.id == string(id1) && g.seq != 1) || (g.id == string(id2) && g.seq != 2) {
				t.Errorf("record %s has kawa-seq %d: want tx1 = 1, tx2 = 2", g.id, g.seq)
			}
		}
	})
}

// waitLockWaiter waits until a PostgreSQL session waits for a lock (tx2
// blocked on the key's counter row); nothing signals that, so it polls the
// catalogue.
func waitLockWaiter(t *testing.T, e *env) {
	t.Helper()
	wait.Until(t, 30*time.Second, "the second transaction to wait for the key's row lock", func() bool {
		var n int
		if err := e.be.DB.QueryRow(`SELECT COUNT(*) FROM pg_locks WHERE NOT granted`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > 0
	})
}
