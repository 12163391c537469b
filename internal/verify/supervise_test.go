package verify

import (
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kawa-broker/kawa/internal/kawatest/wait"
)

// fakeLauncher starts fakeWorkers that run until stopped or killed, or exit
// at once with failWith.
type fakeLauncher struct {
	mu       sync.Mutex
	launched []string
	failWith error
}

func (l *fakeLauncher) Launch(spec WorkerSpec, emit Emit) (Worker, error) {
	l.mu.Lock()
	l.launched = append(l.launched, spec.Name)
	fail := l.failWith
	l.mu.Unlock()
	w := &fakeWorker{done: make(chan struct{}), stop: make(chan struct{}), kill: make(chan struct{})}
	go func() {
		defer close(w.done)
		if fail != nil {
			w.err = fail
			return
		}
		select {
		case <-w.stop:
		case <-w.kill:
			w.err = ErrKilled
		}
	}()
	return w, nil
}

func (l *fakeLauncher) names() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.launched...)
}

type fakeWorker struct {
	stop, kill, done chan struct{}
	stopOnce, once   sync.Once
	err              error
}

func (w *fakeWorker) Stop()                 { w.stopOnce.Do(func() { close(w.stop) }) }
func (w *fakeWorker) Kill()                 { w.once.Do(func() { close(w.kill) }) }
func (w *fakeWorker) Done() <-chan struct{} { return w.done }
func (w *fakeWorker) Err() error            { <-w.done; return w.err }

func TestSupervisorRestartsCrashedWorker(t *testing.T) {
	t.Parallel()
	l := &fakeLauncher{}
	h := NewHistory(nil)
	specs := []WorkerSpec{{Slot: "alo-c0", Role: WorkerConsumer}, {Slot: "eos-rrc", Role: WorkerReader}}
	s := NewSupervisor(l, specs, []string{"b:1"}, stamped(h.Add))
	wait.Until(t, 5*time.Second, "two running workers", func() bool { return s.Running() == 2 })
	if got := s.CrashTargets(); len(got) != 1 || got[0] != 0 {
		t.Fatalf("crash targets %v, want [0] (readers are not crashed)", got)
	}
	if name := s.Crash(0); name != "alo-c0.1" {
		t.Fatalf("crashed %q", name)
	}
	wait.Until(t, 5*time.Second, "the crashed worker relaunched", func() bool { return len(l.names()) == 3 })
	s.Stop(time.Second)
	if got := l.names(); got[2] != "alo-c0.2" {
		t.Errorf("launched %v, want alo-c0.2 after the crash", got)
	}
	st := s.Status()
	if st[0].Restarts != 1 || st[0].LastErr != "" || st[1].Restarts != 0 {
		t.Errorf("status %+v", st)
	}
	exits := 0
	for _, e := range h.Events() {
		if e.Kind == KindExit {
			exits++
			if e.W == "alo-c0.1" && e.Err != "killed" {
				t.Errorf("exit of the crashed worker: %+v", e)
			}
		}
	}
	if exits != 3 {
		t.Errorf("%d exit events, want 3", exits)
	}
}

func TestSupervisorBacksOffFailingWorker(t *testing.T) {
	t.Parallel()
	// Virtual time (synctest): the 700ms pass in an instant, and exactly as
	// far as the supervisor's backoff timers are concerned.
	synctest.Test(t, func(t *testing.T) {
		l := &fakeLauncher{failWith: errors.New("TRANSACTIONAL_ID_AUTHORIZATION_FAILED")}
		s := NewSupervisor(l, []WorkerSpec{{Slot: "eos-t0", Role: WorkerTxn}}, nil, func(...Event) {})
		time.Sleep(700 * time.Millisecond)
		s.Stop(time.Second)
		// 100ms, 200ms, 400ms, ... between attempts: a handful, not hundreds.
		if n := len(l.names()); n < 2 || n > 5 {
			t.Errorf("%d launches in 700ms", n)
		}
		if st := s.Status(); st[0].LastErr != "TRANSACTIONAL_ID_AUTHORIZATION_FAILED" {
			t.Errorf("status %+v", st)
		}
	})
}

func TestSupervisorCrashRoles(t *testing.T) {
	t.Parallel()
	s := NewSupervisor(&fakeLauncher{}, []WorkerSpec{{Slot: "a", Role: WorkerConsumer}, {Slot: "b", Role: WorkerTxn}}, nil, func(...Event) {})
	defer s.Stop(time.Second)
	s.CrashRoles = []string{WorkerTxn}
	if got := s.CrashTargets(); len(got) != 1 || got[0] != 1 {
		t.Errorf("targets %v, want [1]", got)
	}
}
