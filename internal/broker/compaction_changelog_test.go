package broker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestCompactionStreamsChangelog: a Kafka Streams-style changelog (a compacted topic a task writes its store
// updates to, one transaction per processed batch). Six rounds of five transactions each (every third one
// aborted, as a task that failed mid-batch; every fourth one deleting a key with a tombstone; in round 2 one left
// open across two cleaning passes before it commits) interleaved with plain writes. After every round two
// cleaning passes run (delete.retention.ms=0: aborted data, markers and tombstones go as soon as Kafka's rules
// allow), then the broker restarts (power cut in round 3); read_committed from offset 0 after the writes, after
// the passes and after the restart rebuilds exactly the committed store, with the LSO at the high watermark.
func TestCompactionStreamsChangelog(t *testing.T) {
	t.Parallel()
	k, plain := memCompacted(t, "store-changelog")
	const topic = "store-changelog"
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	want := map[string]string{} // the committed store
	end := int64(0)
	txn := 0
	// write runs one transaction of task on keys k<(txn*7+j) mod 50>; the tombstone deletes one more key.
	write := func(task *kgo.Client, commit, leaveOpen bool) {
		t.Helper()
		if err := task.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		staged := map[string]string{}
		var recs []*kgo.Record
		for j := range 10 {
			key, val := fmt.Sprintf("k%d", (txn*7+j)%50), fmt.Sprintf("t%d-%d", txn, j)
			recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(key), Value: []byte(val)})
			staged[key] = val
		}
		if txn%4 == 3 {
			key := fmt.Sprintf("k%d", (txn*7+20)%50)
			recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(key)})
			staged[key] = ""
		}
		produceAll(t, task, recs)
		end += int64(len(recs))
		txn++
		finish := func() {
			if err := task.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
				t.Fatal(err)
			}
			end++
			if commit {
				for key, val := range staged {
					if val == "" {
						delete(want, key)
					} else {
						want[key] = val
					}
				}
			}
		}
		if leaveOpen {
			cleanPasses(t, k, 2) // the open transaction holds the cleaner below it
			checkCommittedLSO(t, k, topic, end, end-int64(len(recs)), want, fmt.Sprintf("transaction %d open", txn-1))
		}
		finish()
	}
	for round := range 6 {
		task := k.Client(kgo.TransactionalID("store-task-0"))
		for i := range 5 {
			write(task, txn%3 != 2, round == 2 && i == 4)
		}
		rollPast(t, plain, topic, fmt.Sprintf("roll%d", round), 20)
		end += 20
		checkCommitted(t, k, topic, end, want, fmt.Sprintf("round %d written", round))
		cleanPasses(t, k, 2)
		checkCommitted(t, k, topic, end, want, fmt.Sprintf("round %d cleaned", round))
		task.Close()
		if round == 3 {
			k = k.PowerCut()
		} else {
			k = k.Restart()
		}
		plain = k.Client(kgo.DefaultProduceTopic(topic))
		checkCommitted(t, k, topic, end, want, fmt.Sprintf("round %d restarted", round))
	}
	if st := k.B.CleanerStats(); st.Errors != 0 {
		t.Fatalf("cleaner stats %+v", st)
	}
}
