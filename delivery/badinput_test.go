package delivery_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kawa-broker/kawa/delivery"
	"github.com/kawa-broker/kawa/internal/kawatest"
)

// waitDone waits for Run to return by itself and gives its error.
func waitDone(t *testing.T, stop func() error, done <-chan struct{}) error {
	t.Helper()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("Run did not stop by itself within 60s")
	}
	return stop()
}

// TestExactlyOnceHandlerErrorForeverStopsWithNothingVisible: a handler that
// always fails aborts its batch each time; after 5 aborts Run returns the
// error, no output is visible to read_committed, and no offset moved.
func TestExactlyOnceHandlerErrorForeverStopsWithNothingVisible(t *testing.T) {
	b := kawatest.NewBroker(t)
	b.CreateTopic("bi-in", 1, nil)
	b.CreateTopic("bi-out", 1, nil)
	produceN(t, b, "bi-in", 20, 0)
	h := newRecHooks()
	conf := cfg(b, "g-bi", "bi-in")
	conf.Hooks = h
	c, err := delivery.NewExactlyOnce(conf, "bi-tx", func(_ context.Context, r *kgo.Record, emit func(*kgo.Record)) error {
		emit(&kgo.Record{Topic: "bi-out", Value: r.Value})
		if string(r.Value) == "v3" {
			return errors.New("cannot transform v3")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	stop, done := runLoop(t, c)
	runErr := waitDone(t, stop, done)
	if runErr == nil || !strings.Contains(runErr.Error(), "cannot transform v3") || !strings.Contains(runErr.Error(), "5 times") {
		t.Fatalf("Run error %v, want the handler error after 5 aborted batches", runErr)
	}
	h.mu.Lock()
	aborted := 0
	for _, e := range h.errs {
		var ab *delivery.BatchAbortedError
		if errors.As(e, &ab) && ab.Err != nil {
			aborted++
		}
	}
	h.mu.Unlock()
	if aborted != 5 {
		t.Errorf("%d BatchAbortedError reported, want 5", aborted)
	}
	if out := readAll(t, b, "bi-out"); len(out) != 0 {
		t.Errorf("read_committed output holds %d records, want 0", len(out))
	}
	if got := committed(t, b, "g-bi", "bi-in"); len(got) != 0 {
		t.Errorf("committed offsets %v, want none", got)
	}
}

// TestAtLeastOnceUnwritableDLTStopsThePartition: the dead-letter topic
// exists but refuses the record (max.message.bytes too small): Run returns
// the write error and the offset never passes the record.
func TestAtLeastOnceUnwritableDLTStopsThePartition(t *testing.T) {
	b := kawatest.NewBroker(t)
	b.CreateTopic("bw", 1, nil)
	tiny := "100"
	b.CreateTopic("bw.DLT", 1, map[string]*string{"max.message.bytes": &tiny})
	produceN(t, b, "bw", 10, 0)
	conf := cfg(b, "g-bw", "bw")
	conf.MaxPollRecords = 2
	c, err := delivery.NewAtLeastOnce(conf, func(_ context.Context, r *kgo.Record) error {
		if string(r.Value) == "v5" {
			return errors.New(strings.Repeat("an error text longer than the topic's record limit ", 4))
		}
		return nil
	}, delivery.AtLeastOnceOptions{Retry: fastRetry})
	if err != nil {
		t.Fatal(err)
	}
	stop, done := runLoop(t, c)
	runErr := waitDone(t, stop, done)
	if runErr == nil || !strings.Contains(runErr.Error(), "bw.DLT") {
		t.Fatalf("Run error %v, want the dead-letter write failure", runErr)
	}
	if got := committed(t, b, "g-bw", "bw")[0]; got != 5 {
		t.Errorf("committed %d, want exactly 5 (the undelivered poison record)", got)
	}
}

// TestAtMostOnceHandlerErrorIsReportedNotRetried: at-most-once hands a failed
// record to the error hook and moves on.
func TestAtMostOnceHandlerErrorIsReportedNotRetried(t *testing.T) {
	b := kawatest.NewBroker(t)
	b.CreateTopic("ae", 1, nil)
	const n = 10
	produceN(t, b, "ae", n, 0)
	h := newRecHooks()
	conf := cfg(b, "g-ae", "ae")
	conf.Hooks = h
	s := newSeen(n - 1)
	calls := 0
	c, err := delivery.NewAtMostOnce(conf, func(_ context.Context, r *kgo.Record) error {
		calls++
		if string(r.Value) == "v4" {
			return errors.New("v4 fails")
		}
		s.add(r)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	stop, _ := runLoop(t, c)
	s.wait(t, 60*time.Second)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if calls != n {
		t.Errorf("handler called %d times, want %d (no retry)", calls, n)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.errs) != 1 || !strings.Contains(h.errs[0].Error(), "v4 fails") || !strings.Contains(h.errs[0].Error(), "ae/0@4") {
		t.Errorf("errors reported %v, want the one v4 failure", h.errs)
	}
	assertCommittedAtEnd(t, b, "g-ae", "ae")
}
