package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/kawa-broker/kawa/cmd/internal/procstat"
	"github.com/twmb/franz-go/pkg/kgo"
)

// W8, many partitions (issue 10 item 2): one topic of 1,000 partitions, 16
// producers spreading records over all of them, and tailing consumers that
// each fetch every partition, where KIP-227 fetch sessions decide how much
// a fetch of 1,000 mostly idle partitions costs. Before the load the cell
// measures the partitions at rest on a fresh broker: resident memory per
// partition (VmRSS after creating the topic and a settle, minus VmRSS
// before, over the partition count) and broker CPU while the consumers
// long-poll the idle partitions. During the produce window the consumers
// measure end to end latency, from each record's intended send time (its
// sentHeader) to the poll that returned it.

// partitionsBench is one W8 run against one broker.
type partitionsBench struct {
	produce   *produceBench // the load; its topic gets partitions partitions
	consumers int           // tailing consumers, each reading every partition
	settle    time.Duration // at rest before measuring RSS and idle CPU
	brokerPID int
}

// partitionsResult is what a W8 run measured.
type partitionsResult struct {
	Produce             produceResult
	CreateTopicS        float64        // seconds CreateTopics of the partitions took
	IdleRSSPerPartition int64          // bytes of broker RSS per partition at rest
	IdleCPUPercent      float64        // broker CPU, % of one core, with the consumers polling idle partitions
	E2E                 latencySummary // records sent in the window: intended send -> polled
	Consumed            int64          // records the consumers read sent in the window (each consumer counts)
}

func (b *partitionsBench) run(ctx context.Context, res *partitionsResult) error {
	rss0, err := procstat.RSS(b.brokerPID)
	if err != nil {
		return err
	}
	created := time.Now()
	if _, err := b.produce.ensureTopic(ctx); err != nil {
		return err
	}
	res.CreateTopicS = roundTo(time.Since(created).Seconds(), 3)
	if err := sleepCtx(ctx, b.settle); err != nil {
		return err
	}
	rss1, err := procstat.RSS(b.brokerPID)
	if err != nil {
		return err
	}
	res.IdleRSSPerPartition = (rss1 - rss0) / int64(b.produce.partitions)

	tail := &tailReaders{hist: newHistogram()}
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	errs := make([]error, b.consumers)
	for i := range b.consumers {
		wg.Go(func() { errs[i] = tail.read(cctx, b.produce.brokers, b.produce.topic) })
	}
	// Idle: the consumers join, list offsets and then long-poll 1,000
	// partitions with nothing to return.
	if err := sleepCtx(ctx, b.settle); err != nil {
		return err
	}
	idle := &brokerSampler{pid: b.brokerPID}
	if err := idle.start(); err != nil {
		return err
	}
	began := time.Now()
	if err := sleepCtx(ctx, b.settle); err != nil {
		return err
	}
	u, err := idle.stop(0)
	if err != nil {
		return err
	}
	res.IdleCPUPercent = roundTo(100*u.CPUSeconds/time.Since(began).Seconds(), 2)

	b.produce.stamp = true
	b.produce.onStart = tail.setWindow
	perr := b.produce.run(ctx, &res.Produce)
	// Records sent at the window's end are read within a poll or two.
	serr := sleepCtx(ctx, time.Second)
	stop()
	wg.Wait()
	for i, e := range errs {
		if e != nil && !errors.Is(e, context.Canceled) {
			errs[i] = fmt.Errorf("consumer %d: %w", i, e)
		} else {
			errs[i] = nil
		}
	}
	tail.mu.Lock()
	res.E2E, res.Consumed = summarize(tail.hist), tail.window
	tail.mu.Unlock()
	return errors.Join(perr, serr, errors.Join(errs...))
}

// sleepCtx waits d or until ctx ends (sleepUntil), returning ctx's error in the second case.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if !sleepUntil(ctx, time.Now().Add(d)) {
		return ctx.Err()
	}
	return nil
}

// tailReaders are consumers reading a topic from its end, sharing one
// end-to-end latency histogram.
type tailReaders struct {
	mu           sync.Mutex
	warmEnd, end time.Time // the produce window, set before its first record
	hist         *histogram
	window       int64
}

func (t *tailReaders) setWindow(warmEnd, end time.Time) {
	t.mu.Lock()
	t.warmEnd, t.end = warmEnd, end
	t.mu.Unlock()
}

// read polls every partition of topic from its end (kgo's defaults: one
// fetch session per broker, KIP-227) until ctx ends.
func (t *tailReaders) read(ctx context.Context, brokers, topic string) error {
	return pollTopic(ctx, brokers, topic, func(fs kgo.Fetches, now time.Time) {
		t.mu.Lock()
		fs.EachRecord(func(r *kgo.Record) {
			sent := sentAt(r)
			if sent.IsZero() || t.warmEnd.IsZero() || sent.Before(t.warmEnd) || !sent.Before(t.end) {
				return
			}
			t.hist.RecordDuration(now.Sub(sent))
			t.window++
		})
		t.mu.Unlock()
	}, kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()))
}

// sentAt is a record's intended send time from its sentHeader, zero without one.
func sentAt(r *kgo.Record) time.Time {
	for _, h := range r.Headers {
		if h.Key == sentHeader && len(h.Value) == 8 {
			return time.Unix(0, int64(binary.BigEndian.Uint64(h.Value)))
		}
	}
	return time.Time{}
}
