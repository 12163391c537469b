package outbox_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/kawa-broker/kawa/internal/config"
	"github.com/kawa-broker/kawa/internal/sqltest"
	"github.com/kawa-broker/kawa/outbox"
)

// TestUnknownTopicRowGoesDead: with topic auto-creation off, a row for a
// topic that does not exist is charged its attempts with
// UNKNOWN_TOPIC_OR_PARTITION and goes dead, and the rows for an existing
// topic around it, in the same shards and batches, are all published.
func TestUnknownTopicRowGoesDead(t *testing.T) {
	for _, mode := range []outbox.Mode{outbox.Idempotent, outbox.Transactional} {
		t.Run(mode.String(), func(t *testing.T) {
			sqltest.Each(t, func(t *testing.T, be sqltest.Backend) {
				e := newEnv(t, be, func(c *config.Broker) { c.AutoCreateTopics = false })
				ctx := context.Background()
				var committed []enqueued
				for i := range 12 {
					topic, key := testTopic, "k-"+strconv.Itoa(i%4)
					if i == 5 {
						topic, key = "no-such-topic", "lost"
					}
					tx, err := be.DB.BeginTx(ctx, nil)
					if err != nil {
						t.Fatal(err)
					}
					id, err := e.ob.Enqueue(ctx, tx, outbox.Record{Topic: topic, Key: []byte(key), Value: []byte("v" + strconv.Itoa(i))})
					if err != nil {
						t.Fatal(err)
					}
					if err := tx.Commit(); err != nil {
						t.Fatal(err)
					}
					if topic == testTopic {
						committed = append(committed, enqueued{id, key})
					}
				}
				rr := e.startRelay(outbox.RelayConfig{Mode: mode, BatchSize: 4, MaxAttempts: 2})
				e.waitUnsent(rr, 0)
				dead, err := e.ob.ListDead(ctx, 0)
				if err != nil {
					t.Fatal(err)
				}
				if len(dead) != 1 || dead[0].Topic != "no-such-topic" || dead[0].Attempts != 2 ||
					!strings.Contains(dead[0].Error, "UNKNOWN_TOPIC_OR_PARTITION") {
					t.Fatalf("dead rows %+v, want the no-such-topic row after 2 attempts with UNKNOWN_TOPIC_OR_PARTITION", dead)
				}
				rr.stop()
				e.checkExact(e.readTopic(), committed, nil, 0)
			})
		})
	}
}
