package delivery_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kawa-broker/kawa/delivery"
	"github.com/kawa-broker/kawa/internal/config"
	"github.com/kawa-broker/kawa/internal/kawatest"
)

// fastRetry keeps poison tests quick: 3 attempts, 1-5ms backoff.
var fastRetry = delivery.RetryPolicy{Attempts: 3, Base: time.Millisecond, Max: 5 * time.Millisecond}

// The poison tests use one partition and produceN's in-order writes, so
// record vN sits at offset N.

func TestAtLeastOncePanicOnceIsRetriedAndApplied(t *testing.T) {
	b := kawatest.NewBroker(t)
	b.CreateTopic("p1", 1, nil)
	b.CreateTopic("p1.DLT", 1, nil)
	const n = 50
	produceN(t, b, "p1", n, 5)
	s := newSeen(n)
	h := newRecHooks()
	conf := cfg(b, "g-p1", "p1")
	conf.Hooks = h
	var once sync.Once
	c, err := delivery.NewAtLeastOnce(conf, func(_ context.Context, r *kgo.Record) error {
		if string(r.Value) == "v17" {
			once.Do(func() { panic("boom once") })
		}
		s.add(r)
		return nil
	}, delivery.AtLeastOnceOptions{Retry: fastRetry})
	if err != nil {
		t.Fatal(err)
	}
	stop, _ := runLoop(t, c)
	s.wait(t, 60*time.Second)
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	assertEachOnce(t, s, n)
	assertKeyOrder(t, s)
	assertCommittedAtEnd(t, b, "g-p1", "p1")
	if h.panics != 1 || h.retries != 1 || len(h.dlts) != 0 {
		t.Errorf("panics %d retries %d dead letters %d, want 1 1 0", h.panics, h.retries, len(h.dlts))
	}
	if got := readAll(t, b, "p1.DLT"); len(got) != 0 {
		t.Errorf("DLT holds %d records, want 0", len(got))
	}
}

// TestAtLeastOncePanicAlwaysGoesToDLTWithProvenance: the DLT holds exactly
// the poison record, with its provenance; no commit passed it before its
// dead-letter write was acknowledged; all other records are applied.
func TestAtLeastOncePanicAlwaysGoesToDLTWithProvenance(t *testing.T) {
	b := kawatest.NewBroker(t)
	b.CreateTopic("p2", 1, nil)
	b.CreateTopic("p2.DLT", 1, nil)
	const n = 60
	produceN(t, b, "p2", n, 6)
	poison := int64(23)
	s := newSeen(n - 1)
	h := newRecHooks()
	conf := cfg(b, "g-p2", "p2")
	conf.Hooks = h
	conf.MaxPollRecords = 5 // several commits happen before the poison record
	var mu sync.Mutex
	var beforeAck []int64 // commits seen before the dead-letter ack
	dltAcked := false
	h2 := &commitWatch{recHooks: h, f: func(o map[string]map[int32]kgo.EpochOffset) {
		mu.Lock()
		defer mu.Unlock()
		if !dltAcked {
			beforeAck = append(beforeAck, o["p2"][0].Offset)
		}
	}, dlt: func() { mu.Lock(); dltAcked = true; mu.Unlock() }}
	conf.Hooks = h2
	c, err := delivery.NewAtLeastOnce(conf, func(_ context.Context, r *kgo.Record) error {
		if string(r.Value) == "v23" {
			panic("boom always")
		}
		s.add(r)
		return nil
	}, delivery.AtLeastOnceOptions{Retry: fastRetry})
	if err != nil {
		t.Fatal(err)
	}
	stop, _ := runLoop(t, c)
	s.wait(t, 60*time.Second)
	h.waitDLT(t)
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	assertCommittedAtEnd(t, b, "g-p2", "p2")
	s.mu.Lock()
	if s.count["v23"] != 0 || len(s.count) != n-1 {
		t.Errorf("applied %d distinct, v23 %d times; want %d and 0", len(s.count), s.count["v23"], n-1)
	}
	s.mu.Unlock()
	mu.Lock()
	if len(beforeAck) == 0 {
		t.Error("no commit happened before the dead-letter ack; the test proves nothing")
	}
	for _, o := range beforeAck {
		if o > poison {
			t.Errorf("committed %d before the poison record %d was dead-lettered", o, poison)
		}
	}
	mu.Unlock()
	if h.panics != fastRetry.Attempts {
		t.Errorf("panics %d, want %d", h.panics, fastRetry.Attempts)
	}
	dlt := readAll(t, b, "p2.DLT")
	if len(dlt) != 1 {
		t.Fatalf("DLT holds %d records, want exactly 1", len(dlt))
	}
	d := dlt[0]
	want := map[string]string{
		delivery.HeaderDLTTopic: "p2", delivery.HeaderDLTPartition: "0",
		delivery.HeaderDLTOffset: strconv.FormatInt(poison, 10), delivery.HeaderDLTAttempts: "3",
		delivery.HeaderDLTScope: "g-p2",
	}
	for k, v := range want {
		if got := header(d, k); got != v {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}
	if string(d.Value) != "v23" || string(d.Key) != "k5" || d.Partition != 0 {
		t.Errorf("DLT record %q/%q partition %d, want k5/v23 partition 0", d.Key, d.Value, d.Partition)
	}
	if e := header(d, delivery.HeaderDLTError); !strings.Contains(e, "boom always") {
		t.Errorf("error header %q", e)
	}
	first, err1 := time.Parse(time.RFC3339Nano, header(d, delivery.HeaderDLTFirstFailure))
	last, err2 := time.Parse(time.RFC3339Nano, header(d, delivery.HeaderDLTLastFailure))
	if err1 != nil || err2 != nil || last.Before(first) {
		t.Errorf("failure times %v %v (%v %v)", first, last, err1, err2)
	}
}

// commitWatch forwards to recHooks and also calls f on every successful
// commit and dlt on every dead-letter ack.
type commitWatch struct {
	*recHooks
	f   func(map[string]map[int32]kgo.EpochOffset)
	dlt func()
}

func (w *commitWatch) OnCommit(o map[string]map[int32]kgo.EpochOffset, d time.Duration, err error) {
	if err == nil {
		w.f(o)
	}
	w.recHooks.OnCommit(o, d, err)
}

func (w *commitWatch) OnDeadLettered(r *kgo.Record, dlt string, attempts int, err error) {
	w.dlt()
	w.recHooks.OnDeadLettered(r, dlt, attempts, err)
}

// TestAtLeastOnceMissingDLTStopsThePartition: a handler that always fails
// and a dead-letter topic that does not exist: Run returns the write error,
// and the committed offset never passes the record.
func TestAtLeastOnceMissingDLTStopsThePartition(t *testing.T) {
	b := kawatest.NewBroker(t, func(c *config.Broker) { c.AutoCreateTopics = false })
	b.CreateTopic("p3", 1, nil)
	produceN(t, b, "p3", 20, 0)
	poison := int64(7)
	conf := cfg(b, "g-p3", "p3")
	conf.MaxPollRecords = 3
	// Give up on the missing topic after 2s rather than kgo's default
	// of retrying unknown-topic metadata for ~30s.
	conf.KgoOpts = []kgo.Opt{kgo.RecordDeliveryTimeout(2 * time.Second)}
	c, err := delivery.NewAtLeastOnce(conf, func(_ context.Context, r *kgo.Record) error {
		if string(r.Value) == "v7" {
			return errors.New("always fails")
		}
		return nil
	}, delivery.AtLeastOnceOptions{Retry: fastRetry})
	if err != nil {
		t.Fatal(err)
	}
	stop, done := runLoop(t, c)
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("Run did not stop on the failed dead-letter write")
	}
	runErr := stop()
	if runErr == nil || !strings.Contains(runErr.Error(), "p3.DLT") || !strings.Contains(runErr.Error(), "always fails") {
		t.Fatalf("Run error %v, want the dead-letter write failure naming p3.DLT and the record's error", runErr)
	}
	if got := committed(t, b, "g-p3", "p3")[0]; got > poison {
		t.Errorf("committed %d, past the undelivered poison record at %d", got, poison)
	}
	if got := committed(t, b, "g-p3", "p3")[0]; got != poison {
		t.Errorf("committed %d, want exactly the poison offset %d (everything before it finished)", got, poison)
	}
}

// TestAtLeastOnceErrorForeverWithoutRetryable: a non-retryable error goes to
// the DLT after one attempt.
func TestAtLeastOnceNonRetryableErrorDeadLettersAtOnce(t *testing.T) {
	b := kawatest.NewBroker(t)
	b.CreateTopic("p4", 1, nil)
	b.CreateTopic("p4.DLT", 1, nil)
	produceN(t, b, "p4", 10, 0)
	bad := errors.New("malformed")
	h := newRecHooks()
	conf := cfg(b, "g-p4", "p4")
	conf.Hooks = h
	attempts := 0
	c, err := delivery.NewAtLeastOnce(conf, func(_ context.Context, r *kgo.Record) error {
		if string(r.Value) == "v4" {
			attempts++
			return fmt.Errorf("decode: %w", bad)
		}
		return nil
	}, delivery.AtLeastOnceOptions{Retry: delivery.RetryPolicy{Attempts: 5, Retryable: func(err error) bool { return !errors.Is(err, bad) }}})
	if err != nil {
		t.Fatal(err)
	}
	stop, _ := runLoop(t, c)
	h.waitDLT(t)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if attempts != 1 || h.retries != 0 {
		t.Errorf("attempts %d retries %d, want 1 and 0", attempts, h.retries)
	}
	dlt := readAll(t, b, "p4.DLT")
	if len(dlt) != 1 || string(dlt[0].Value) != "v4" || header(dlt[0], delivery.HeaderDLTAttempts) != "1" {
		t.Errorf("DLT %v", dlt)
	}
}
