package verify

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// runReader reads every partition of spec.Topics from the start at
// isolation spec.Iso, emitting a read event per record (with the LSO the
// same fetch reported), until it has seen the end-of-run fence in every
// partition; then it emits drained and returns. It ignores stop: the fence
// is its stop signal, so it never ends before reading everything.
func runReader(ctx context.Context, spec WorkerSpec, emit Emit) error {
	return readUntilFence(ctx, spec.Brokers, spec.Topics, spec.Partitions, spec.Iso, spec.Name, KindRead, emit)
}

// readUntilFence is the reader loop, shared with the controller's final
// scan (kind KindScan there).
func readUntilFence(ctx context.Context, brokers, topics []string, partitions int32, iso Isolation, name string, kind Kind, emit Emit) error {
	level := kgo.ReadUncommitted()
	if iso == ReadCommitted {
		level = kgo.ReadCommitted()
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(brokers...),
		kgo.ClientID("kawa-verify-"+name),
		kgo.MetadataMinAge(250*time.Millisecond),
		kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(level),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
	)
	if err != nil {
		return err
	}
	defer cl.Close()
	type tp struct {
		t string
		p int32
	}
	fenced := map[tp]bool{}
	want := len(topics) * int(partitions)
	for len(fenced) < want {
		pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fs := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil || fs.IsClientClosed() {
			return nil
		}
		var evs []Event
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			for _, r := range p.Records {
				id, txn := parseValue(r.Value)
				if id == fenceID {
					fenced[tp{r.Topic, r.Partition}] = true
					continue
				}
				evs = append(evs, Event{Kind: kind, ID: id, Txn: txn, Topic: r.Topic, Part: r.Partition,
					Off: r.Offset, Iso: iso, LSO: p.LastStableOffset})
			}
		})
		if len(evs) > 0 {
			emit(evs...)
		}
	}
	emit(Event{Kind: KindDrained, Iso: iso})
	return nil
}
