package outbox_test

import (
	"context"
	"crypto/rand"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kawa-broker/kawa/internal/sqltest"
	"github.com/kawa-broker/kawa/outbox"
)

// TestPoisonRowParksItsKey: a record the broker rejects for good
// (MESSAGE_TOO_LARGE) is charged MaxAttempts attempts, moves to the dead
// table and parks its key; the other keys, including those sharing its
// partition and batch, are published. After the topic's limit is raised,
// RetryDead publishes it before the parked rows of its key, in kawa-seq
// order. A row whose headers column is malformed goes dead at once.
func TestPoisonRowParksItsKey(t *testing.T) {
	for _, mode := range []outbox.Mode{outbox.Idempotent, outbox.Transactional} {
		t.Run(mode.String(), func(t *testing.T) {
			sqltest.Each(t, func(t *testing.T, be sqltest.Backend) {
				e := newEnv(t, be)
				ctx := context.Background()
				adm := e.b.Admin()
				setMaxBytes := func(v string) {
					t.Helper()
					rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "max.message.bytes", Value: &v}}, testTopic)
					if err == nil {
						_, err = rs.On(testTopic, nil)
					}
					if err != nil {
						t.Fatalf("alter max.message.bytes: %v", err)
					}
				}
				setMaxBytes("2000")
				var committed []enqueued
				enq := func(key string, size int) outbox.MessageID {
					tx, err := be.DB.BeginTx(ctx, nil)
					if err != nil {
						t.Fatal(err)
					}
					id, err := e.ob.Enqueue(ctx, tx, outbox.Record{Topic: testTopic, Key: []byte(key), Value: incompressible(size)})
					if err != nil {
						t.Fatal(err)
					}
					if err := tx.Commit(); err != nil {
						t.Fatal(err)
					}
					committed = append(committed, enqueued{id, key})
					return id
				}
				for i := range 30 {
					if i == 10 {
						enq("poison", 5000) // seq 3 of key poison
					}
					enq([]string{"poison", "a", "b", "c", "d"}[i%5], 10)
				}
				rr := e.startRelay(outbox.RelayConfig{Mode: mode, BatchSize: 8, MaxAttempts: 3})
				e.waitUnsent(rr, 4) // poison's seq 4..7 wait behind the dead seq 3
				st, err := e.ob.Status(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if st.Dead != 1 || st.ParkedKeys != 1 || st.ParkedRows != 4 {
					t.Fatalf("status %+v, want 1 dead row, 1 parked key, 4 parked rows", st)
				}
				dead, err := e.ob.ListDead(ctx, 0)
				if err != nil {
					t.Fatal(err)
				}
				if len(dead) != 1 || string(dead[0].Key) != "poison" || dead[0].Seq != 3 || dead[0].Attempts != 3 ||
					!strings.Contains(dead[0].Error, "MESSAGE_TOO_LARGE") {
					t.Fatalf("dead rows %+v, want poison seq 3 after 3 attempts with MESSAGE_TOO_LARGE", dead)
				}
				if err := e.ob.RetryDead(ctx, dead[0].ID+1000); err == nil {
					t.Errorf("RetryDead of a missing id: no error")
				}
				setMaxBytes("1048588")
				if err := e.ob.RetryDead(ctx, dead[0].ID); err != nil {
					t.Fatal(err)
				}
				rr.relay.Notify()
				e.waitUnsent(rr, 0)

				// A malformed row goes dead without being produced and parks key m.
				if _, err := be.DB.ExecContext(ctx, `INSERT INTO kawa_outbox (shard, topic, msg_key, value, headers, seq, message_id, created_at) VALUES (0, 'orders', 'm', 'v', 'not json', 1, 'bad-row', 0)`); err != nil {
					t.Fatal(err)
				}
				rr.relay.Notify()
				e.waitUnsent(rr, 0)
				dead, err = e.ob.ListDead(ctx, 0)
				if err != nil {
					t.Fatal(err)
				}
				if len(dead) != 1 || dead[0].MessageID != "bad-row" || !strings.Contains(dead[0].Error, "malformed headers") {
					t.Fatalf("dead rows %+v, want the malformed row", dead)
				}
				if err := e.ob.DropDead(ctx, dead[0].ID); err != nil {
					t.Fatal(err)
				}
				if n := e.countRows("kawa_outbox_dead"); n != 0 {
					t.Errorf("%d dead rows after drop, want 0", n)
				}
				rr.stop()
				e.checkExact(e.readTopic(), committed, nil, 0)
			})
		})
	}
}

// incompressible returns n random bytes: the producer's compression cannot
// shrink them below max.message.bytes.
func incompressible(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}
