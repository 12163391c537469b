package broker_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/batch"
	"github.com/kawa-broker/kawa/internal/kawatest"
)

// keyedBatch is p's batch with base sequence seq and one record per key, each valued "<prefix>-<key>".
func (p idem) keyedBatch(seq int32, prefix string, keys ...string) []byte {
	ts := time.Now().UnixMilli()
	recs := make([]kmsg.Record, len(keys))
	for i, k := range keys {
		recs[i] = kmsg.Record{Key: []byte(k), Value: []byte(prefix + "-" + k)}
	}
	return batch.Encode(batch.Header{FirstTimestamp: ts, MaxTimestamp: ts, ProducerID: p.pid, ProducerEpoch: p.epoch, BaseSequence: seq}, recs)
}

// TestCompactionKeepsProducerState (issue 13 item 3): an idempotent producer's batches are all superseded and
// compacted away; its last batch stays as an empty batch, so after a restart (from the producer snapshot, and
// again with the snapshots removed so the state is rebuilt from the log) the retry of that batch is a
// duplicate answered with its original offset, and the next sequence is accepted.
func TestCompactionKeepsProducerState(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	compactedTopic(k, "ic", nil)
	p := initProducer(t, k.Addr)
	c := dial(t, k.Addr)
	keys := []string{"a", "b", "c", "d", "e"}
	c.mustProduce("ic", 0, p.keyedBatch(0, "first", keys...), 0)
	last := p.keyedBatch(5, "second", keys...)
	c.mustProduce("ic", 0, last, 5)
	plain := k.Client(kgo.DefaultProduceTopic("ic"))
	var newer []*kgo.Record
	for _, key := range keys {
		newer = append(newer, &kgo.Record{Key: []byte(key), Value: []byte("plain-" + key)})
	}
	produceAll(t, plain, newer)
	rollPast(t, plain, "ic", "roll", 20)
	if err := k.B.CleanNow(); err != nil {
		t.Fatal(err)
	}
	for _, r := range readAll(t, k, "ic") {
		if v := string(r.Value); strings.HasPrefix(v, "first-") || strings.HasPrefix(v, "second-") {
			t.Fatalf("superseded record %s=%s at %d survived cleaning", r.Key, v, r.Offset)
		}
	}
	if st := k.B.CleanerStats(); st.RecordsRemoved != 10 {
		t.Fatalf("cleaner removed %d records, want the producer's 10", st.RecordsRemoved)
	}

	k = k.Restart() // producer state from the snapshot written at close
	c = dial(t, k.Addr)
	c.mustProduce("ic", 0, last, 5) // duplicate: the original offset, nothing appended

	k.Close() // now rebuild it from the log alone
	dir := filepath.Join(k.Dir, "ic-0")
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".snapshot") {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
	cfg := k.Config
	cfg.Listen = "127.0.0.1:0"
	k = kawatest.Start(t, cfg)
	c = dial(t, k.Addr)
	c.mustProduce("ic", 0, last, 5)
	end := int64(5 + 5 + len(keys) + 20)
	c.mustProduce("ic", 0, p.keyedBatch(10, "third", "a"), end)
	got := latest(readAll(t, k, "ic"))
	if string(got["a"]) != "third-a" || string(got["b"]) != "plain-b" {
		t.Fatalf("after the retry and the next batch: a=%q b=%q", got["a"], got["b"])
	}
}

// TestCompactedTopicRequiresKeys: as Kafka's LogValidator, a batch with a record without a key is refused on a
// compacted topic with INVALID_RECORD and nothing is appended; keyed batches and keyless ones on a delete
// topic are accepted.
func TestCompactedTopicRequiresKeys(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	compactedTopic(k, "ck", nil)
	k.CreateTopic("dk", 1, nil)
	p := initProducer(t, k.Addr)
	c := dial(t, k.Addr)
	c.wantCode("ck", 0, p.batch(0, "no-key"), kerr.InvalidRecord)
	c.mustProduce("ck", 0, p.keyedBatch(0, "v", "a"), 0)
	c.mustProduce("dk", 0, p.batch(0, "no-key"), 0)
}
