package broker_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kawa-broker/kawa/internal/kawatest"
)

// Fetch responses carry record batches in pooled buffers that go back to the
// pool once the frame is encoded (fetch.go's fetchResponse). A buffer handed
// out again too early would show up as another fetch's bytes: three
// consumers on three connections read the same 3-partition backlog at once
// with small fetch sizes (many responses, buffers of several size classes)
// while a tailing consumer long-polls new records (responses read and then
// discarded for the wait), and every record must come back exact, in order.
func TestFetchPooledBuffersServeExactRecords(t *testing.T) {
	k := kawatest.NewBroker(t)
	const topic, parts, perPart = "pool", 3, 3000
	k.CreateTopic(topic, parts, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	value := func(p int32, i int) []byte {
		return fmt.Appendf(nil, "p%d-r%06d-%0*d", p, i, 20+i%700, i) // sizes vary per record
	}
	prod := k.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(time.Millisecond))
	produce := func(from, to int) {
		var results kgo.ProduceResults
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i := from; i < to; i++ {
			for p := int32(0); p < parts; p++ {
				wg.Add(1)
				prod.Produce(ctx, &kgo.Record{Topic: topic, Partition: p, Value: value(p, i)}, func(r *kgo.Record, err error) {
					mu.Lock()
					results = append(results, kgo.ProduceResult{Record: r, Err: err})
					mu.Unlock()
					wg.Done()
				})
			}
		}
		wg.Wait()
		if err := results.FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce(0, perPart)

	consume := func(total int, opts ...kgo.Opt) error {
		cl := k.Client(append(opts, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
		next := make([]int, parts)
		for seen := 0; seen < total; {
			fs := cl.PollFetches(ctx)
			if err := fs.Err0(); err != nil {
				return err
			}
			for it := fs.RecordIter(); !it.Done(); {
				r := it.Next()
				want := value(r.Partition, next[r.Partition])
				if string(r.Value) != string(want) || r.Offset != int64(next[r.Partition]) {
					return fmt.Errorf("partition %d offset %d: got %q, want offset %d %q", r.Partition, r.Offset, r.Value, next[r.Partition], want)
				}
				next[r.Partition]++
				seen++
			}
		}
		return nil
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for _, maxBytes := range []int32{5_000, 60_000, 400_000} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- consume(parts*perPart, kgo.FetchMaxPartitionBytes(maxBytes), kgo.FetchMaxBytes(maxBytes))
		}()
	}
	wg.Add(1)
	go func() { // the tailer: long polls, woken by the appends below
		defer wg.Done()
		errs <- consume(parts*(perPart+500), kgo.FetchMaxWait(200*time.Millisecond), kgo.FetchMinBytes(1<<20))
	}()
	produce(perPart, perPart+500)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}
