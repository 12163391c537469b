package delivery_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kawa-broker/kawa/delivery"
	"github.com/kawa-broker/kawa/internal/kawatest"
	"github.com/kawa-broker/kawa/internal/kawatest/wait"
)

func cfg(b *kawatest.Broker, group string, topics ...string) delivery.Config {
	return delivery.Config{Brokers: []string{b.Addr}, Group: group, Topics: topics}
}

// assertEachOnce checks that s holds v0..v(n-1), each exactly once.
func assertEachOnce(t *testing.T, s *seen, n int) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.count) != n {
		t.Errorf("handled %d distinct values, want %d", len(s.count), n)
	}
	for i := range n {
		if c := s.count[fmt.Sprintf("v%d", i)]; c != 1 {
			t.Errorf("v%d handled %d times, want 1", i, c)
		}
	}
}

// assertKeyOrder checks that every key's values were handled in produce order.
func assertKeyOrder(t *testing.T, s *seen) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, vs := range s.order {
		prev := -1
		for _, v := range vs {
			var i int
			fmt.Sscanf(v, "v%d", &i)
			if i <= prev {
				t.Errorf("key %q: %s handled after v%d", k, v, prev)
			}
			prev = i
		}
	}
}

func assertCommittedAtEnd(t *testing.T, b *kawatest.Broker, group, topic string) {
	t.Helper()
	got, want := committed(t, b, group, topic), endOffsets(t, b, topic)
	for p, e := range want {
		if got[p] != e {
			t.Errorf("%s/%d committed %d, want end offset %d", topic, p, got[p], e)
		}
	}
}

func TestAtMostOnceCleanRunHandlesEachOnceAndCommits(t *testing.T) {
	b := kawatest.NewBroker(t)
	b.CreateTopic("amo", 3, nil)
	const n = 300
	produceN(t, b, "amo", n, 20)
	s := newSeen(n)
	c, err := delivery.NewAtMostOnce(cfg(b, "g-amo", "amo"), func(_ context.Context, r *kgo.Record) error {
		s.add(r)
		return nil
	})
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
	assertCommittedAtEnd(t, b, "g-amo", "amo")
}

func TestAtLeastOnceKeyConcurrencyHandlesEachOnceInKeyOrder(t *testing.T) {
	b := kawatest.NewBroker(t)
	b.CreateTopic("alo", 3, nil)
	const n = 400
	produceN(t, b, "alo", n, 17)
	// Some nil keys too: they share one serial lane per partition.
	cl := b.Client()
	for i := n; i < n+20; i++ {
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: "alo", Value: fmt.Appendf(nil, "v%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	s := newSeen(n + 20)
	h := newRecHooks()
	conf := cfg(b, "g-alo", "alo")
	conf.Hooks = h
	c, err := delivery.NewAtLeastOnce(conf, func(_ context.Context, r *kgo.Record) error {
		s.add(r)
		return nil
	}, delivery.AtLeastOnceOptions{KeyConcurrency: 4})
	if err != nil {
		t.Fatal(err)
	}
	stop, _ := runLoop(t, c)
	s.wait(t, 60*time.Second)
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	assertEachOnce(t, s, n+20)
	assertKeyOrder(t, s)
	assertCommittedAtEnd(t, b, "g-alo", "alo")
	if h.inFlight != 0 {
		t.Errorf("in-flight gauge ends at %d, want 0", h.inFlight)
	}
}

func TestExactlyOnceCleanRunOutputsEachOnce(t *testing.T) {
	b := kawatest.NewBroker(t)
	b.CreateTopic("eos-in", 2, nil)
	b.CreateTopic("eos-out", 2, nil)
	const n = 200
	produceN(t, b, "eos-in", n, 10)
	s := newSeen(n)
	c, err := delivery.NewExactlyOnce(cfg(b, "g-eos", "eos-in"), "eos-1",
		func(_ context.Context, r *kgo.Record, emit func(*kgo.Record)) error {
			emit(&kgo.Record{Topic: "eos-out", Key: r.Key, Value: r.Value})
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	stop, _ := runLoop(t, c)
	// Wait on the committed offsets reaching the end: read_committed
	// outputs are then final.
	waitCommitted(t, b, "g-eos", "eos-in")
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	for _, r := range readAll(t, b, "eos-out") {
		s.add(r)
	}
	assertEachOnce(t, s, n)
	assertKeyOrder(t, s)
}

// waitCommitted polls the group's committed offsets until they reach the
// topic's end offsets. The poll is of broker state the test cannot be
// notified of from outside the loop's process; each round trip is the wait.
func waitCommitted(t *testing.T, b *kawatest.Broker, group, topic string) {
	t.Helper()
	want := endOffsets(t, b, topic)
	wait.Until(t, 60*time.Second, fmt.Sprintf("group %s's committed offsets to reach the end offsets %v", group, want), func() bool {
		got := committed(t, b, group, topic)
		for p, e := range want {
			if got[p] != e {
				return false
			}
		}
		return true
	})
}

func TestConstructorsRefuseContradictingOptions(t *testing.T) {
	base := delivery.Config{Brokers: []string{"127.0.0.1:1"}, Group: "g", Topics: []string{"t"}}
	h := func(context.Context, *kgo.Record) error { return nil }
	cases := []struct {
		name string
		opts []kgo.Opt
	}{
		{"autocommit marks", []kgo.Opt{kgo.AutoCommitMarks()}},
		{"greedy autocommit", []kgo.Opt{kgo.GreedyAutoCommit()}},
		{"own group", []kgo.Opt{kgo.ConsumerGroup("other")}},
		{"own topics", []kgo.Opt{kgo.ConsumeTopics("x")}},
		{"transactional id", []kgo.Opt{kgo.TransactionalID("x")}},
		{"non-idempotent writes", []kgo.Opt{kgo.DisableIdempotentWrite()}},
		{"acks=1", []kgo.Opt{kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite()}},
	}
	for _, tc := range cases {
		c := base
		c.KgoOpts = tc.opts
		if _, err := delivery.NewAtLeastOnce(c, h, delivery.AtLeastOnceOptions{}); !errors.Is(err, delivery.ErrContradictingOption) {
			t.Errorf("at-least-once with %s: err %v, want ErrContradictingOption", tc.name, err)
		}
	}
	c := base
	c.KgoOpts = []kgo.Opt{kgo.AutoCommitMarks()}
	if _, err := delivery.NewAtMostOnce(c, h); !errors.Is(err, delivery.ErrContradictingOption) {
		t.Errorf("at-most-once with autocommit: err %v", err)
	}
	if _, err := delivery.NewExactlyOnce(c, "tx", func(context.Context, *kgo.Record, func(*kgo.Record)) error { return nil }); !errors.Is(err, delivery.ErrContradictingOption) {
		t.Errorf("exactly-once with autocommit: err %v", err)
	}
	c = base
	c.KgoOpts = []kgo.Opt{kgo.RebalanceTimeout(10 * time.Second)}
	_, err := delivery.NewAtLeastOnce(c, h, delivery.AtLeastOnceOptions{Retry: delivery.RetryPolicy{Budget: 10 * time.Second}})
	if !errors.Is(err, delivery.ErrContradictingOption) || !strings.Contains(err.Error(), "rebalance timeout") {
		t.Errorf("retry budget = rebalance timeout: err %v", err)
	}
	if _, err := delivery.NewAtLeastOnce(delivery.Config{Brokers: base.Brokers, Topics: base.Topics}, h, delivery.AtLeastOnceOptions{}); err == nil {
		t.Error("missing group accepted")
	}
	ok, err := delivery.NewAtLeastOnce(base, h, delivery.AtLeastOnceOptions{})
	if err != nil {
		t.Fatalf("plain config refused: %v", err)
	}
	ok.Close()
}
