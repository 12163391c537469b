package verify

import (
	"fmt"
	"slices"
	"sync"
	"time"
)

// Supervisor keeps one worker running per slot: when a worker dies (crash
// fault, or an error it cannot recover from) it starts the next incarnation,
// "<slot>.<n>", until the slot is stopped. Quick successive failures back
// off up to two seconds so a broker that refuses a workload (say, one
// without transactions) is not hammered.
type Supervisor struct {
	launcher Launcher
	emit     Emit
	slots    []*slot
	// CrashRoles, when set, limits the client-crash fault to these worker
	// roles.
	CrashRoles []string
}

type slot struct {
	spec WorkerSpec
	done chan struct{} // closed when the slot's loop has ended

	mu          sync.Mutex
	cur         Worker
	curName     string
	incarnation int
	stopping    bool
	wake        chan struct{} // closed by stop to end a backoff
	restarts    int
	lastErr     string
}

// SlotStatus is a slot's summary for the report.
type SlotStatus struct {
	Slot     string `json:"slot"`
	Role     string `json:"role"`
	Restarts int    `json:"restarts"`
	LastErr  string `json:"last_error,omitempty"`
}

// NewSupervisor starts every spec's first worker. brokers is set on each
// spec.
func NewSupervisor(l Launcher, specs []WorkerSpec, brokers []string, emit Emit) *Supervisor {
	s := &Supervisor{launcher: l, emit: emit}
	for _, sp := range specs {
		sp.Brokers = brokers
		sl := &slot{spec: sp, done: make(chan struct{}), wake: make(chan struct{})}
		s.slots = append(s.slots, sl)
		go s.run(sl)
	}
	return s
}

func (s *Supervisor) run(sl *slot) {
	defer close(sl.done)
	backoff := 100 * time.Millisecond
	for {
		sl.mu.Lock()
		if sl.stopping {
			sl.mu.Unlock()
			return
		}
		sl.incarnation++
		spec := sl.spec
		spec.Name = fmt.Sprintf("%s.%d", spec.Slot, sl.incarnation)
		sl.mu.Unlock()

		began := time.Now()
		w, err := s.launcher.Launch(spec, s.emit)
		if err == nil {
			sl.mu.Lock()
			sl.cur, sl.curName = w, spec.Name
			stopping := sl.stopping
			sl.mu.Unlock()
			if stopping {
				w.Stop()
			}
			<-w.Done()
			err = w.Err()
		}
		s.emit(Event{Kind: KindExit, W: spec.Name, Err: errString(err)})
		sl.mu.Lock()
		sl.cur, sl.curName = nil, ""
		if err != nil && err != ErrKilled {
			sl.lastErr = err.Error()
		}
		stopping := sl.stopping
		if !stopping {
			sl.restarts++
		}
		wake := sl.wake
		sl.mu.Unlock()
		if stopping {
			return
		}
		if time.Since(began) < time.Second && err != ErrKilled {
			backoff = min(2*backoff, 2*time.Second)
		} else {
			backoff = 100 * time.Millisecond
		}
		select {
		case <-time.After(backoff):
		case <-wake:
		}
	}
}

// CrashTargets returns the indexes of the slots the client-crash fault may
// pick, in plan order.
func (s *Supervisor) CrashTargets() []int {
	var out []int
	for i, sl := range s.slots {
		if sl.spec.crashable() && (len(s.CrashRoles) == 0 || slices.Contains(s.CrashRoles, sl.spec.Role)) {
			out = append(out, i)
		}
	}
	return out
}

// Crash kills slot i's current worker and returns its instance name, or ""
// if none was running (it was between incarnations).
func (s *Supervisor) Crash(i int) string {
	sl := s.slots[i]
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if sl.cur == nil {
		return ""
	}
	sl.cur.Kill()
	return sl.curName
}

// Stop stops the slots whose role is in roles (all when roles is empty):
// each worker is asked to stop and, if still running after grace, killed.
// It returns when those slots' loops have ended, or abandons the ones whose
// killed worker has not exited after killWait more (an in-process worker
// stuck in its client's Close cannot be forced).
func (s *Supervisor) Stop(grace time.Duration, roles ...string) {
	var wait []*slot
	for _, sl := range s.slots {
		if len(roles) > 0 && !slices.Contains(roles, sl.spec.Role) {
			continue
		}
		sl.mu.Lock()
		if !sl.stopping {
			sl.stopping = true
			close(sl.wake)
		}
		if sl.cur != nil {
			sl.cur.Stop()
		}
		sl.mu.Unlock()
		wait = append(wait, sl)
	}
	if waitSlots(wait, grace) {
		return
	}
	for _, sl := range wait {
		sl.mu.Lock()
		if sl.cur != nil {
			sl.cur.Kill()
		}
		sl.mu.Unlock()
	}
	waitSlots(wait, killWait)
}

// killWait bounds the wait for a killed worker to exit.
const killWait = 10 * time.Second

// waitSlots waits up to d for every slot's loop to end.
func waitSlots(slots []*slot, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for _, sl := range slots {
		select {
		case <-sl.done:
		case <-t.C:
			return false
		}
	}
	return true
}

// Status returns every slot's restarts and last error.
func (s *Supervisor) Status() []SlotStatus {
	out := make([]SlotStatus, 0, len(s.slots))
	for _, sl := range s.slots {
		sl.mu.Lock()
		out = append(out, SlotStatus{Slot: sl.spec.Slot, Role: sl.spec.Role, Restarts: sl.restarts, LastErr: sl.lastErr})
		sl.mu.Unlock()
	}
	return out
}

// Running is the number of slots with a live worker.
func (s *Supervisor) Running() int {
	n := 0
	for _, sl := range s.slots {
		sl.mu.Lock()
		if sl.cur != nil {
			n++
		}
		sl.mu.Unlock()
	}
	return n
}
