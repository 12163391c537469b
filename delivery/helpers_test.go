package delivery_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kawa-broker/kawa/delivery"
	"github.com/kawa-broker/kawa/internal/kawatest"
)

// produceN writes n records to topic, value "v<i>", key "k<i%keys>" (nil key
// when keys is 0), spread by key over the partitions, and returns them by value.
func produceN(t *testing.T, b *kawatest.Broker, topic string, n, keys int) {
	t.Helper()
	cl := b.Client()
	var rs []*kgo.Record
	for i := range n {
		r := &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "v%d", i)}
		if keys > 0 {
			r.Key = fmt.Appendf(nil, "k%d", i%keys)
		}
		rs = append(rs, r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// seen records what handlers saw, as counts by value, and signals when a
// target number of distinct values has been reached.
type seen struct {
	mu     sync.Mutex
	count  map[string]int
	order  map[string][]string // key -> values in handling order
	target int
	done   chan struct{}
	waits  []waiter
}

type waiter struct {
	n  int
	ch chan struct{}
}

// until returns a channel closed once n distinct values have been handled.
func (s *seen) until(n int) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := make(chan struct{})
	if len(s.count) >= n {
		close(ch)
	} else {
		s.waits = append(s.waits, waiter{n, ch})
	}
	return ch
}

func newSeen(target int) *seen {
	return &seen{count: map[string]int{}, order: map[string][]string{}, target: target, done: make(chan struct{})}
}

func (s *seen) add(r *kgo.Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := string(r.Value)
	s.count[v]++
	s.order[string(r.Key)] = append(s.order[string(r.Key)], v)
	if len(s.count) == s.target {
		close(s.done)
	}
	for i := 0; i < len(s.waits); i++ {
		if len(s.count) >= s.waits[i].n {
			close(s.waits[i].ch)
			s.waits = append(s.waits[:i], s.waits[i+1:]...)
			i--
		}
	}
}

func (s *seen) wait(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case <-s.done:
	case <-time.After(d):
		s.mu.Lock()
		defer s.mu.Unlock()
		t.Fatalf("handled %d distinct records, want %d", len(s.count), s.target)
	}
}

// runLoop runs c in a goroutine. stop cancels it and returns Run's error;
// done is closed when Run has returned (then stop returns at once).
func runLoop(t *testing.T, c *delivery.Consumer) (stop func() error, done <-chan struct{}) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan struct{})
	var err error
	go func() {
		defer close(ch)
		err = c.Run(ctx)
	}()
	stop = func() error {
		cancel()
		select {
		case <-ch:
			return err
		case <-time.After(30 * time.Second):
			return fmt.Errorf("Run did not return within 30s of cancel")
		}
	}
	t.Cleanup(func() { _ = stop() })
	return stop, ch
}

// committed returns the group's committed offsets for topic, by partition.
func committed(t *testing.T, b *kawatest.Broker, group, topic string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := b.Admin().FetchOffsets(ctx, group)
	if err != nil {
		t.Fatalf("fetch offsets: %v", err)
	}
	out := map[int32]int64{}
	resp.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic && o.Err == nil {
			out[o.Partition] = o.At
		}
	})
	return out
}

// endOffsets returns topic's end offsets by partition.
func endOffsets(t *testing.T, b *kawatest.Broker, topic string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := b.Admin().ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("end offsets: %v", err)
	}
	out := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out
}

// readAll reads every record of topic with read_committed. It first appends
// a sentinel to each partition: once a reader sees every sentinel, it has
// seen everything committed before them, aborted batches and markers
// included, without waiting on time.
func readAll(t *testing.T, b *kawatest.Broker, topic string) []*kgo.Record {
	t.Helper()
	return readAllIso(t, b, topic, kgo.ReadCommitted())
}

// readAllIso is readAll at the given isolation level.
func readAllIso(t *testing.T, b *kawatest.Broker, topic string, iso kgo.IsolationLevel) []*kgo.Record {
	t.Helper()
	ends := endOffsets(t, b, topic)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w := b.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := range ends {
		if err := w.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte(sentinel)}).FirstErr(); err != nil {
			t.Fatalf("sentinel: %v", err)
		}
	}
	cl := b.Client(kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(iso))
	var out []*kgo.Record
	left := len(ends)
	for left > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("readAll %s: %d sentinels not reached", topic, left)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Value) == sentinel {
				left--
				return
			}
			out = append(out, r)
		})
	}
	return out
}

const sentinel = "__sentinel__"

func header(r *kgo.Record, k string) string {
	for _, h := range r.Headers {
		if h.Key == k {
			return string(h.Value)
		}
	}
	return ""
}

// recHooks collects hook events the tests assert on.
type recHooks struct {
	delivery.NopHooks
	mu       sync.Mutex
	commits  []map[string]map[int32]kgo.EpochOffset
	dlts     []*kgo.Record
	parked   []*kgo.Record
	panics   int
	retries  int
	errs     []error
	inFlight int
	onDLT    chan struct{}
	onPark   chan struct{}
}

func newRecHooks() *recHooks {
	return &recHooks{onDLT: make(chan struct{}, 100), onPark: make(chan struct{}, 100)}
}

// waitChan fails the test when ch does not fire within a minute.
func waitChan(t *testing.T, what string, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(60 * time.Second):
		t.Fatalf("%s: not within 60s", what)
	}
}

func (h *recHooks) OnCommit(o map[string]map[int32]kgo.EpochOffset, _ time.Duration, err error) {
	if err != nil {
		return
	}
	h.mu.Lock()
	h.commits = append(h.commits, o)
	h.mu.Unlock()
}

func (h *recHooks) OnDeadLettered(r *kgo.Record, _ string, _ int, _ error) {
	h.mu.Lock()
	h.dlts = append(h.dlts, r)
	h.mu.Unlock()
	h.onDLT <- struct{}{}
}

func (h *recHooks) OnParked(r *kgo.Record, _ string) {
	h.mu.Lock()
	h.parked = append(h.parked, r)
	h.mu.Unlock()
	h.onPark <- struct{}{}
}

func (h *recHooks) OnPanic(*kgo.Record, *delivery.PanicError) {
	h.mu.Lock()
	h.panics++
	h.mu.Unlock()
}

func (h *recHooks) OnRetry(*kgo.Record, int, error, time.Duration) {
	h.mu.Lock()
	h.retries++
	h.mu.Unlock()
}

func (h *recHooks) OnError(err error) {
	h.mu.Lock()
	h.errs = append(h.errs, err)
	h.mu.Unlock()
}

func (h *recHooks) OnInFlight(d int) {
	h.mu.Lock()
	h.inFlight += d
	h.mu.Unlock()
}

func (h *recHooks) waitDLT(t *testing.T) {
	t.Helper()
	select {
	case <-h.onDLT:
	case <-time.After(60 * time.Second):
		t.Fatal("no dead-letter write acknowledged within 60s")
	}
}
