package verify

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kawa-broker/kawa/internal/kawatest/wait"
)

// callLog records what the faults did, in order.
type callLog struct {
	mu    sync.Mutex
	calls []string
}

func (c *callLog) add(format string, args ...any) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, fmt.Sprintf(format, args...))
	return nil
}

type fakeBroker struct{ *callLog }

func (b fakeBroker) Addr() string                { return "127.0.0.1:1" }
func (b fakeBroker) Start(context.Context) error { return b.add("start") }
func (b fakeBroker) Kill() error                 { return b.add("kill") }
func (b fakeBroker) Pause() error                { return b.add("pause") }
func (b fakeBroker) Resume() error               { return b.add("resume") }
func (b fakeBroker) Close() error                { return b.add("close") }

type fakeNet struct{ *callLog }

func (n fakeNet) Addr() string             { return "127.0.0.1:2" }
func (n fakeNet) DropResponse(k int16)     { n.add("drop %d", k) }
func (n fakeNet) SetDelay(d time.Duration) { n.add("delay %v", d) }
func (n fakeNet) Close() error             { return nil }

func TestInjectorAppliesAndUndoesFaults(t *testing.T) {
	t.Parallel()
	log := &callLog{}
	h := NewHistory(nil)
	sup := NewSupervisor(&fakeLauncher{}, []WorkerSpec{{Slot: "eos-t0", Role: WorkerTxn}}, nil, stamped(h.Add))
	defer sup.Stop(time.Second)
	wait.Until(t, 5*time.Second, "one running worker", func() bool { return sup.Running() == 1 })
	in := &injector{broker: fakeBroker{log}, net: fakeNet{log}, sup: sup, emit: h.Add, start: time.Now()}
	in.run(context.Background(), []ScheduledFault{
		{At: 0, Kind: FaultKill, Dur: 10 * time.Millisecond},
		{At: 20 * time.Millisecond, Kind: FaultPause, Dur: 10 * time.Millisecond},
		{At: 40 * time.Millisecond, Kind: FaultClientCrash, Target: 5},
		{At: 50 * time.Millisecond, Kind: FaultDrop, Target: 2},
		{At: 60 * time.Millisecond, Kind: FaultSlow, Dur: 10 * time.Millisecond, Delay: 300 * time.Millisecond},
	})
	want := []string{"kill", "start", "pause", "resume", "drop 26", "delay 300ms", "delay 0s"}
	if !reflect.DeepEqual(log.calls, want) {
		t.Errorf("calls %v, want %v", log.calls, want)
	}
	if in.count.Load() != 5 {
		t.Errorf("count %d", in.count.Load())
	}
	var got []string
	for _, e := range h.Events() {
		if e.Kind == KindFault {
			got = append(got, e.Fault+" "+e.W)
			if e.End < e.T {
				t.Errorf("fault window ends before it starts: %+v", e)
			}
			if e.Fault == "kill" && e.End-e.T < int64(10*time.Millisecond) {
				t.Errorf("kill window %v shorter than the down time", time.Duration(e.End-e.T))
			}
		}
	}
	if want := "kill broker,pause broker,client-crash eos-t0.1,drop api 26,slow +300ms"; strings.Join(got, ",") != want {
		t.Errorf("fault events %q, want %q", strings.Join(got, ","), want)
	}
}

func TestInjectorStopsWithContext(t *testing.T) {
	t.Parallel()
	log := &callLog{}
	ctx, cancel := context.WithCancel(context.Background())
	in := &injector{broker: fakeBroker{log}, emit: func(...Event) {}, start: time.Now()}
	done := make(chan struct{})
	go func() {
		in.run(ctx, []ScheduledFault{{At: 0, Kind: FaultPause, Dur: time.Hour}, {At: time.Hour, Kind: FaultKill}})
		close(done)
	}()
	wait.Until(t, 5*time.Second, "one call", func() bool { log.mu.Lock(); defer log.mu.Unlock(); return len(log.calls) == 1 })
	cancel()
	<-done
	// The paused broker is resumed even though the run was cut short.
	if !reflect.DeepEqual(log.calls, []string{"pause", "resume"}) {
		t.Errorf("calls %v", log.calls)
	}
}
