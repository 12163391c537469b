package delivery_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kawa-broker/kawa/delivery"
	"github.com/kawa-broker/kawa/internal/kawatest"
)

// ledger is what the in-process members handled, shared, and the check run
// at every commit they make: nothing below a committed offset may be
// unhandled at the moment of the commit.
type ledger struct {
	mu      sync.Mutex
	handled map[po]int
	n       int
	waits   []waiter
	bad     []string
	commits int
}

func (l *ledger) handle(_ context.Context, r *kgo.Record) error {
	time.Sleep(500 * time.Microsecond) // simulated work, so rebalances land mid-run
	l.mu.Lock()
	defer l.mu.Unlock()
	l.handled[po{r.Partition, r.Offset}]++
	l.n++
	for i := 0; i < len(l.waits); i++ {
		if l.n >= l.waits[i].n {
			close(l.waits[i].ch)
			l.waits = append(l.waits[:i], l.waits[i+1:]...)
			i--
		}
	}
	return nil
}

func (l *ledger) until(n int) <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	ch := make(chan struct{})
	if l.n >= n {
		close(ch)
	} else {
		l.waits = append(l.waits, waiter{n, ch})
	}
	return ch
}

// ledgerHooks checks a member's commits against the ledger. The child's
// handled records are not in it, so the check covers partitions only from
// the offset where the in-process members took them over: from the first
// offset they handled there.
type ledgerHooks struct {
	delivery.NopHooks
	l *ledger
}

func (h ledgerHooks) OnCommit(offs map[string]map[int32]kgo.EpochOffset, _ time.Duration, err error) {
	if err != nil {
		return
	}
	h.l.mu.Lock()
	defer h.l.mu.Unlock()
	h.l.commits++
	for _, ps := range offs {
		for p, eo := range ps {
			from := int64(-1)
			for x := range h.l.handled {
				if x.p == p && (from < 0 || x.off < from) {
					from = x.off
				}
			}
			if from < 0 {
				continue
			}
			for off := from; off < eo.Offset; off++ {
				if h.l.handled[po{p, off}] == 0 {
					h.l.bad = append(h.l.bad, fmt.Sprintf("commit %d/%d while %d was unhandled", p, eo.Offset, off))
					break
				}
			}
		}
	}
}

// TestRebalanceC6AtLeastOnceMembersComeAndGo: a child member is SIGKILLed,
// in-process members join and leave, all while records are handled. Every
// record is handled at least once, no commit passes unhandled work, and the
// group ends committed at the end of every partition.
func TestRebalanceC6AtLeastOnceMembersComeAndGo(t *testing.T) {
	b := kawatest.NewBroker(t)
	b.CreateTopic("c6", 4, nil)
	// The child works at most 200 records/s (5ms each) and lives about 2s,
	// so the in-process members' thresholds below are always reachable.
	const n = 2000
	produceN(t, b, "c6", n, 40)
	out := filepath.Join(t.TempDir(), "child.log")
	k := startChild(t, childSpec{Semantic: "alo", Broker: b.Addr, Group: "g-c6", Topic: "c6", Out: out,
		Session: 6 * time.Second, Work: 5 * time.Millisecond})
	for l := k.next(t); l != "handled"; l = k.next(t) {
	}
	l := &ledger{handled: map[po]int{}}
	member := func() (stop func() error) {
		c := cfg(b, "g-c6", "c6")
		c.Hooks = ledgerHooks{l: l}
		c.MaxPollRecords = 20
		c.KgoOpts = []kgo.Opt{kgo.SessionTimeout(6 * time.Second), kgo.RebalanceTimeout(10 * time.Second)}
		m, err := delivery.NewAtLeastOnce(c, l.handle, delivery.AtLeastOnceOptions{KeyConcurrency: 3})
		if err != nil {
			t.Fatal(err)
		}
		stop, _ = runLoop(t, m)
		return stop
	}
	stopA := member()
	waitChan(t, "A handled 100", l.until(100))
	stopB := member()
	waitChan(t, "A and B handled 250", l.until(250))
	if err := k.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitChan(t, "A and B handled 500", l.until(500))
	if err := stopA(); err != nil {
		t.Fatalf("A: %v", err)
	}
	stopC := member()
	waitCommitted(t, b, "g-c6", "c6")
	for _, stop := range []func() error{stopB, stopC} {
		if err := stop(); err != nil {
			t.Fatalf("member: %v", err)
		}
	}
	childHandled, _ := parseLog(t, out)
	all := counts(childHandled)
	l.mu.Lock()
	defer l.mu.Unlock()
	dups := 0
	for x, c := range l.handled {
		all[x] += c
	}
	for p, e := range endOffsets(t, b, "c6") {
		for off := int64(0); off < e; off++ {
			switch c := all[po{p, off}]; {
			case c == 0:
				t.Errorf("%d/%d never handled", p, off)
			case c > 1:
				dups++
			}
		}
	}
	for _, s := range l.bad {
		t.Error(s)
	}
	if l.commits == 0 || len(childHandled) == 0 {
		t.Errorf("in-process commits %d, child handled %d: the run did not exercise both", l.commits, len(childHandled))
	}
	t.Logf("child handled %d, in-process %d, records handled more than once %d, in-process commits %d",
		len(childHandled), l.n, dups, l.commits)
}
