package delivery_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kawa-broker/kawa/delivery"
	"github.com/kawa-broker/kawa/internal/kawatest"
)

// finisher runs a clean in-process loop that takes over from a crashed child
// (same static instance ID, so without waiting for the child's session to
// expire) until the group has committed the topic's end, and returns what it
// handled.
type finisher struct {
	mu      sync.Mutex
	handled []po
}

func (f *finisher) handle(_ context.Context, r *kgo.Record) error {
	f.mu.Lock()
	f.handled = append(f.handled, po{r.Partition, r.Offset})
	f.mu.Unlock()
	return nil
}

func finishConf(b *kawatest.Broker, group, topic, instance string) delivery.Config {
	c := cfg(b, group, topic)
	if instance != "" {
		c.KgoOpts = []kgo.Opt{kgo.InstanceID(instance)}
	}
	return c
}

func runUntilCommitted(t *testing.T, b *kawatest.Broker, c *delivery.Consumer, group, topic string) {
	t.Helper()
	stop, _ := runLoop(t, c)
	waitCommitted(t, b, group, topic)
	if err := stop(); err != nil {
		t.Fatalf("finisher Run: %v", err)
	}
}

func counts(xs []po) map[po]int {
	m := map[po]int{}
	for _, x := range xs {
		m[x]++
	}
	return m
}

func sortedPOs(m map[po]int) []po {
	var out []po
	for x := range m {
		out = append(out, x)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].p != out[j].p {
			return out[i].p < out[j].p
		}
		return out[i].off < out[j].off
	})
	return out
}

// TestCrashM1AtMostOnceLosesExactlyTheCommittedBatch: SIGKILL after the
// 5th commit, before its handlers. The records lost are exactly that
// batch; nothing is handled twice.
func TestCrashM1AtMostOnceLosesExactlyTheCommittedBatch(t *testing.T) {
	b := kawatest.NewBroker(t)
	b.CreateTopic("m1", 1, nil)
	const n = 200
	produceN(t, b, "m1", n, 0)
	out := filepath.Join(t.TempDir(), "child.log")
	ch := startChild(t, childSpec{Semantic: "amo", Broker: b.Addr, Group: "g-m1", Topic: "m1", InstanceID: "m1-a",
		Out: out, Point: delivery.CrashAfterCommitBeforeHandler, N: 5, Action: "kill"})
	ch.waitKilled(t)
	h1, commits := parseLog(t, out)
	if len(commits) != 5 {
		t.Fatalf("child logged %d commits, want 5 (it dies right after the 5th)", len(commits))
	}
	last, prev := commits[4].off, commits[3].off
	if got := committed(t, b, "g-m1", "m1")[0]; got != last {
		t.Fatalf("broker has %d committed, child's last commit was %d", got, last)
	}
	var f finisher
	c, err := delivery.NewAtMostOnce(finishConf(b, "g-m1", "m1", "m1-a"), f.handle)
	if err != nil {
		t.Fatal(err)
	}
	runUntilCommitted(t, b, c, "g-m1", "m1")

	all := counts(append(append([]po{}, h1...), f.handled...))
	for x, k := range all {
		if k != 1 {
			t.Errorf("offset %d handled %d times, want at most once", x.off, k)
		}
	}
	var lost []int64
	for off := int64(0); off < n; off++ {
		if all[po{0, off}] == 0 {
			lost = append(lost, off)
		}
	}
	var want []int64
	for off := prev; off < last; off++ {
		want = append(want, off)
	}
	if fmt.Sprint(lost) != fmt.Sprint(want) || len(want) == 0 {
		t.Errorf("lost offsets %v, want exactly the committed-but-unhandled batch %v", lost, want)
	}
}

// TestCrashL1AtLeastOnceDuplicatesExactlyTheUncommitted: SIGKILL after the
// 120th finished record, before its commit. Nothing is lost, and the records
// handled twice are exactly those the child finished at or above the
// committed offsets.
func TestCrashL1AtLeastOnceDuplicatesExactlyTheUncommitted(t *testing.T) {
	b := kawatest.NewBroker(t)
	b.CreateTopic("l1", 2, nil)
	const n = 300
	produceN(t, b, "l1", n, 10)
	out := filepath.Join(t.TempDir(), "child.log")
	ch := startChild(t, childSpec{Semantic: "alo", Broker: b.Addr, Group: "g-l1", Topic: "l1", InstanceID: "l1-a",
		Out: out, Point: delivery.CrashAfterHandlerBeforeCommit, N: 120, Action: "kill"})
	ch.waitKilled(t)
	h1, commits := parseLog(t, out)
	// At least 120: with KeyConcurrency 2 another lane may finish a record
	// while the 120th hit kills the process.
	if len(h1) < 120 {
		t.Fatalf("child handled %d records, want at least 120", len(h1))
	}
	lastLogged := map[int32]int64{}
	for _, c := range commits {
		lastLogged[c.p] = c.off
	}
	var f finisher
	c, err := delivery.NewAtLeastOnce(finishConf(b, "g-l1", "l1", "l1-a"), f.handle, delivery.AtLeastOnceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	runUntilCommitted(t, b, c, "g-l1", "l1")

	// The finisher starts at the offsets committed when the child died. They
	// are read from its first records, not from the broker right after the
	// kill: a commit the child sent just before dying may still land.
	c1, c2 := counts(h1), counts(f.handled)
	ends := endOffsets(t, b, "l1")
	comm := map[int32]int64{}
	for p, e := range ends {
		comm[p] = e
	}
	for x := range c2 {
		comm[x.p] = min(comm[x.p], x.off)
	}
	for p, off := range comm {
		if off < lastLogged[p] {
			t.Errorf("partition %d: finisher started at %d, below the child's last acknowledged commit %d", p, off, lastLogged[p])
		}
	}
	wantDup := map[po]int{}
	for x, k := range c1 {
		if k != 1 {
			t.Errorf("child handled %v %d times", x, k)
		}
		if x.off >= comm[x.p] {
			wantDup[x] = 1
		}
	}
	gotDup := map[po]int{}
	for x, k := range c2 {
		if k != 1 {
			t.Errorf("finisher handled %v %d times", x, k)
		}
		if c1[x] > 0 {
			gotDup[x] = 1
		}
	}
	for p, e := range ends {
		for off := int64(0); off < e; off++ {
			x := po{p, off}
			if off < comm[p] && c1[x] == 0 {
				t.Errorf("%v below the commit %d was never handled: the commit passed unfinished work", x, comm[p])
			}
			if off >= comm[p] && c2[x] == 0 {
				t.Errorf("%v at or above the commit %d not handled by the finisher", x, comm[p])
			}
		}
	}
	if fmt.Sprint(sortedPOs(gotDup)) != fmt.Sprint(sortedPOs(wantDup)) || len(wantDup) == 0 {
		t.Errorf("duplicates %v, want exactly the finished-but-uncommitted %v", sortedPOs(gotDup), sortedPOs(wantDup))
	}
	t.Logf("child handled %d, committed %v, duplicated %d", len(h1), comm, len(gotDup))
}

// TestCrashE1ExactlyOnceKilledBeforeEnd: SIGKILL after the 4th batch's
// outputs are produced, before End. read_committed output holds every input
// exactly once, in input order per key; the aborted outputs are in the log.
func TestCrashE1ExactlyOnceKilledBeforeEnd(t *testing.T) {
	b := kawatest.NewBroker(t)
	b.CreateTopic("e1-in", 2, nil)
	b.CreateTopic("e1-out", 2, nil)
	const n = 200
	produceN(t, b, "e1-in", n, 10)
	out := filepath.Join(t.TempDir(), "child.log")
	ch := startChild(t, childSpec{Semantic: "eos", Broker: b.Addr, Group: "g-e1", Topic: "e1-in", OutTopic: "e1-out",
		TxnID: "e1-tx", InstanceID: "e1-a", Out: out, Point: delivery.CrashAfterProduceBeforeEnd, N: 4, Action: "kill"})
	ch.waitKilled(t)
	// The same transactional.id fences the dead child and aborts its open
	// transaction at once.
	c, err := delivery.NewExactlyOnce(finishConf(b, "g-e1", "e1-in", "e1-a"), "e1-tx", copyTo("e1-out"))
	if err != nil {
		t.Fatal(err)
	}
	runUntilCommitted(t, b, c, "g-e1", "e1-in")
	assertOutputsOnce(t, b, "e1-out", n)
	if raw := readAllIso(t, b, "e1-out", kgo.ReadUncommitted()); len(raw) <= n {
		t.Errorf("read_uncommitted sees %d outputs, want more than %d (the killed batch's aborted outputs)", len(raw), n)
	}
}

func copyTo(topic string) delivery.TransformHandler {
	return func(_ context.Context, r *kgo.Record, emit func(*kgo.Record)) error {
		emit(&kgo.Record{Topic: topic, Key: r.Key, Value: r.Value})
		return nil
	}
}

func assertOutputsOnce(t *testing.T, b *kawatest.Broker, topic string, n int) {
	t.Helper()
	s := newSeen(n)
	for _, r := range readAll(t, b, topic) {
		s.add(r)
	}
	assertEachOnce(t, s, n)
	assertKeyOrder(t, s)
}

// TestCrashE2ExactlyOnceZombieIsFenced: worker A stops itself (SIGSTOP) with
// a batch's outputs produced and End not called; B takes the partitions once
// A's session expires and finishes; A, resumed, has its End report no
// commit, and the output holds each input exactly once.
func TestCrashE2ExactlyOnceZombieIsFenced(t *testing.T) {
	b := kawatest.NewBroker(t)
	b.CreateTopic("e2-in", 2, nil)
	b.CreateTopic("e2-out", 2, nil)
	const n = 200
	produceN(t, b, "e2-in", n, 10)
	out := filepath.Join(t.TempDir(), "child.log")
	a := startChild(t, childSpec{Semantic: "eos", Broker: b.Addr, Group: "g-e2", Topic: "e2-in", OutTopic: "e2-out",
		TxnID: "e2-a", Out: out, Point: delivery.CrashAfterProduceBeforeEnd, N: 3, Action: "stop", Session: 6 * time.Second})
	for l := a.next(t); l != "stopped"; l = a.next(t) {
	}
	c, err := delivery.NewExactlyOnce(cfg(b, "g-e2", "e2-in"), "e2-b", copyTo("e2-out"))
	if err != nil {
		t.Fatal(err)
	}
	stop, _ := runLoop(t, c)
	waitCommitted(t, b, "g-e2", "e2-in")
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if l := a.next(t); l != "aborted" {
		t.Errorf("zombie's End after resuming: %q, want aborted (no commit)", l)
	}
	if err := stop(); err != nil {
		t.Fatalf("B's Run: %v", err)
	}
	_ = a.cmd.Process.Kill()
	assertOutputsOnce(t, b, "e2-out", n)
}
