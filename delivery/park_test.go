package delivery_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kawa-broker/kawa/delivery"
	"github.com/kawa-broker/kawa/internal/kawatest"
)

func produceOne(t *testing.T, cl *kgo.Client, topic, key, value string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte(key), Value: []byte(value)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// TestAtLeastOnceKeyParkingSurvivesRestartAndReleasesInOrder is crash point
// C4 with key parking: the poison record of key k2 is dead-lettered, every
// later k2 record is parked while other keys flow, the parked set survives a
// restart of the consumer, and a release replays the parked k2 records in
// their original order before any later k2 record.
func TestAtLeastOnceKeyParkingSurvivesRestartAndReleasesInOrder(t *testing.T) {
	b := kawatest.NewBroker(t)
	for _, tp := range []string{"pk", "pk.DLT", "pk.parked"} {
		b.CreateTopic(tp, 1, nil)
	}
	const n = 50
	produceN(t, b, "pk", n, 5) // vI has key k(I%5); v12 is k2's third record
	s := newSeen(n + 3 - 1)
	h := newRecHooks()
	conf := cfg(b, "g-pk", "pk")
	conf.Hooks = h
	handler := func(_ context.Context, r *kgo.Record) error {
		if string(r.Value) == "v12" {
			panic("poison v12")
		}
		s.add(r)
		return nil
	}
	opts := delivery.AtLeastOnceOptions{Retry: fastRetry, Park: &delivery.ParkOptions{}, KeyConcurrency: 3}
	c, err := delivery.NewAtLeastOnce(conf, handler, opts)
	if err != nil {
		t.Fatal(err)
	}
	parkedK2 := []string{"v17", "v22", "v27", "v32", "v37", "v42", "v47"}
	stop, _ := runLoop(t, c)
	waitChan(t, "other keys applied", s.until(n-1-len(parkedK2)))
	for range parkedK2 {
		waitChan(t, "k2 record parked", h.onPark)
	}
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	assertCommittedAtEnd(t, b, "g-pk", "pk")
	s.mu.Lock()
	for _, v := range append([]string{"v12"}, parkedK2...) {
		if s.count[v] != 0 {
			t.Errorf("%s applied before release", v)
		}
	}
	s.mu.Unlock()

	// Restart: k2 is still parked (v50), other keys flow (v51).
	w := b.Client()
	produceOne(t, w, "pk", "k2", "v50")
	produceOne(t, w, "pk", "k1", "v51")
	c, err = delivery.NewAtLeastOnce(conf, handler, opts)
	if err != nil {
		t.Fatal(err)
	}
	stop, _ = runLoop(t, c)
	waitChan(t, "v51 applied after restart", s.until(n-1-len(parkedK2)+1))
	waitChan(t, "v50 parked after restart", h.onPark)

	// Release k2, then write a later k2 record: the parked ones come first.
	rel := b.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := delivery.ReleaseKey(context.Background(), rel, "pk", 0, []byte("k2"), "g-pk"); err != nil {
		t.Fatal(err)
	}
	produceOne(t, w, "pk", "k2", "v52")
	s.wait(t, 60*time.Second)
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	assertEachOnceExcept(t, s, n+3, "v12")
	s.mu.Lock()
	got := fmt.Sprint(s.order["k2"])
	s.mu.Unlock()
	if want := fmt.Sprint(append(append([]string{"v2", "v7"}, parkedK2...), "v50", "v52")); got != want {
		t.Errorf("k2 applied in order %s, want %s", got, want)
	}
	dlt := readAll(t, b, "pk.DLT")
	if len(dlt) != 1 || string(dlt[0].Value) != "v12" {
		t.Errorf("DLT holds %d records (first %q), want exactly v12", len(dlt), dlt[0].Value)
	}
	var kinds []string
	for _, r := range readAll(t, b, "pk.parked") {
		kinds = append(kinds, header(r, delivery.HeaderPark)+":"+string(r.Value))
	}
	want := "[parked: record:v17 record:v22 record:v27 record:v32 record:v37 record:v42 record:v47 record:v50 released:]"
	if fmt.Sprint(kinds) != want {
		t.Errorf("park topic %v, want %s", kinds, want)
	}
}

// assertEachOnceExcept checks v0..v(n-1) were each handled once, except skip.
func assertEachOnceExcept(t *testing.T, s *seen, n int, skip string) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range n {
		v := fmt.Sprintf("v%d", i)
		want := 1
		if v == skip {
			want = 0
		}
		if s.count[v] != want {
			t.Errorf("%s handled %d times, want %d", v, s.count[v], want)
		}
	}
}

// TestAtLeastOnceReleaseWhoseFirstRecordFailsAgainReparks: releasing k2
// replays its parked records; the first fails again, so it is dead-lettered
// and k2 is parked anew with the rest; a second release applies the rest in
// order, then later records of k2.
func TestAtLeastOnceReleaseWhoseFirstRecordFailsAgainReparks(t *testing.T) {
	b := kawatest.NewBroker(t)
	for _, tp := range []string{"rp", "rp.DLT", "rp.parked"} {
		b.CreateTopic(tp, 1, nil)
	}
	w := b.Client()
	for _, v := range []string{"a1", "b1", "a2", "a3", "b2", "a4"} {
		produceOne(t, w, "rp", v[:1], v)
	}
	h := newRecHooks()
	conf := cfg(b, "g-rp", "rp")
	conf.Hooks = h
	s := newSeen(-1)
	c, err := delivery.NewAtLeastOnce(conf, func(_ context.Context, r *kgo.Record) error {
		if v := string(r.Value); v == "a1" || v == "a2" {
			return fmt.Errorf("%s is poison", v)
		}
		s.add(r)
		return nil
	}, delivery.AtLeastOnceOptions{Retry: fastRetry, Park: &delivery.ParkOptions{}})
	if err != nil {
		t.Fatal(err)
	}
	stop, _ := runLoop(t, c)
	h.waitDLT(t) // a1
	for range 3 {
		waitChan(t, "a2..a4 parked", h.onPark)
	}
	waitChan(t, "b1, b2 applied", s.until(2))
	rel := b.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := delivery.ReleaseKey(context.Background(), rel, "rp", 0, []byte("a"), "g-rp"); err != nil {
		t.Fatal(err)
	}
	h.waitDLT(t) // a2, failing again on replay
	if err := delivery.ReleaseKey(context.Background(), rel, "rp", 0, []byte("a"), "g-rp"); err != nil {
		t.Fatal(err)
	}
	produceOne(t, w, "rp", "a", "a5")
	waitChan(t, "a3, a4, a5 applied", s.until(5))
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	got := fmt.Sprint(s.order["a"], s.order["b"])
	s.mu.Unlock()
	if want := "[a3 a4 a5] [b1 b2]"; got != want {
		t.Errorf("applied %s, want %s", got, want)
	}
	var dlt []string
	for _, r := range readAll(t, b, "rp.DLT") {
		dlt = append(dlt, string(r.Value))
	}
	if fmt.Sprint(dlt) != "[a1 a2]" {
		t.Errorf("DLT %v, want [a1 a2]", dlt)
	}
	var kinds []string
	for _, r := range readAll(t, b, "rp.parked") {
		kinds = append(kinds, header(r, delivery.HeaderPark)+":"+string(r.Value))
	}
	want := "[parked: record:a2 record:a3 record:a4 released: parked: record:a3 record:a4 released:]"
	if fmt.Sprint(kinds) != want {
		t.Errorf("park topic %v, want %s", kinds, want)
	}
}
