package broker_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kawa-broker/kawa/internal/kawatest"
)

// TestManyPartitionsReopenInParallel: partitions open (and close) on a pool
// of workers, out of order; after a restart each partition must still be its
// own log: a record written to partition i is read back from partition i
// alone, with every partition's log end at 1.
func TestManyPartitionsReopenInParallel(t *testing.T) {
	t.Parallel()
	const n = 100 // more than the pool's workers
	k := kawatest.NewBroker(t)
	k.CreateTopic("many", n, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := k.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var recs []*kgo.Record
	for i := range int32(n) {
		recs = append(recs, &kgo.Record{Topic: "many", Partition: i, Value: []byte(strconv.Itoa(int(i)))})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl.Close()

	k2 := k.Restart()
	ends, err := k2.Admin().ListEndOffsets(ctx, "many")
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil || o.Offset != 1 {
			t.Errorf("partition %d: end offset %d (err %v), want 1", o.Partition, o.Offset, o.Err)
		}
	})
	if got := len(ends["many"]); got != n {
		t.Fatalf("%d partitions listed after restart, want %d", got, n)
	}
	c := k2.Client(kgo.ConsumeTopics("many"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer c.Close()
	seen := map[int32]string{}
	for len(seen) < n {
		fs := c.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %d of %d partitions: %v", len(seen), n, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if _, dup := seen[r.Partition]; dup || r.Offset != 0 {
				t.Errorf("partition %d: a second record or offset %d", r.Partition, r.Offset)
			}
			seen[r.Partition] = string(r.Value)
		})
	}
	for i := range int32(n) {
		if want := strconv.Itoa(int(i)); seen[i] != want {
			t.Errorf("partition %d holds %q, want %q", i, seen[i], want)
		}
	}
}
