package replica

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kawa-broker/kawa/internal/vfs"
	pb "go.etcd.io/raft/v3/raftpb"
)

// chanTransport delivers straight into the destination scheduler (Step only queues, so no lock is held
// across nodes), unless the destination is cut off.
type chanTransport struct {
	mu    *sync.Mutex
	nodes map[uint64]*Scheduler
	down  map[uint64]bool
	from  uint64
}

func (c chanTransport) Send(to uint64, msgs []Message) {
	c.mu.Lock()
	dst, cut := c.nodes[to], c.down[to] || c.down[c.from]
	c.mu.Unlock()
	if dst != nil && !cut {
		dst.Step(msgs)
	}
}

// recSM records applied data entries and signals each one on applied.
type recSM struct {
	mu      sync.Mutex
	data    []string
	lead    uint64
	applied chan string
}

func (r *recSM) Apply(ents []*pb.Entry) {
	for _, e := range ents {
		if len(e.GetData()) == 0 {
			continue
		}
		r.mu.Lock()
		r.data = append(r.data, string(e.GetData()))
		r.mu.Unlock()
		r.applied <- string(e.GetData())
	}
}

func (r *recSM) LeaderChanged(lead, term uint64) {
	r.mu.Lock()
	r.lead = lead
	r.mu.Unlock()
}

func (r *recSM) leader() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lead
}

// startCluster starts three schedulers (Start) with groups groups each over in-memory file systems and
// chanTransports; t.Cleanup closes them.
func startCluster(t *testing.T, groups, workers int, tick time.Duration) (map[uint64]*Scheduler, map[uint64][]*recSM) {
	var mu sync.Mutex
	nodes := map[uint64]*Scheduler{}
	sms := map[uint64][]*recSM{}
	for id := uint64(1); id <= 3; id++ {
		fs := vfs.NewMem()
		s, err := New(Config{
			NodeID: id, FS: fs, Dir: "/raft", Transport: chanTransport{mu: &mu, nodes: nodes, from: id},
			Workers: workers, TickInterval: tick, Logger: slog.New(slog.DiscardHandler),
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		for g := range GroupID(groups) {
			lg := mustLog(t, fs, "/raft/"+strconv.Itoa(int(g)))
			t.Cleanup(func() { lg.Close() })
			sm := &recSM{applied: make(chan string, 16)}
			must(t, s.AddGroup(g, lg, []uint64{1, 2, 3}, sm))
			sms[id] = append(sms[id], sm)
		}
		mu.Lock()
		nodes[id] = s
		mu.Unlock()
	}
	for _, s := range nodes {
		s.Start()
	}
	return nodes, sms
}

// TestSchedulerStartManyGroups: three schedulers driven by Start (real tickers, on synctest's virtual clock)
// with a pool of workers elect a leader in each of 50 groups and commit a proposal in each on every node.
func TestSchedulerStartManyGroups(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const groups = 50
		nodes, sms := startCluster(t, groups, 3, 10*time.Millisecond)
		for g := range groups {
			var lead uint64
			for lead == 0 {
				time.Sleep(10 * time.Millisecond) // one virtual tick
				lead = sms[1][g].leader()
			}
			want := fmt.Sprintf("g%d", g)
			if err := nodes[lead].Propose(GroupID(g), []byte(want)); err != nil {
				t.Fatal(err)
			}
			for id := uint64(1); id <= 3; id++ {
				select {
				case got := <-sms[id][g].applied:
					if got != want {
						t.Fatalf("node %d group %d applied %q, want %q", id, g, got, want)
					}
				case <-time.After(10 * time.Second):
					t.Fatalf("node %d group %d: %q not applied within 10s (virtual)", id, g, want)
				}
			}
		}
	})
}

// TestSchedulerFailures: a group whose log fails is failed alone; a failed HardState write fails the node,
// and none of that cycle's messages leave it.
func TestSchedulerFailures(t *testing.T) {
	var failLog, failHS bool
	mem := vfs.NewMem()
	fs := vfs.NewErrorFS(mem, func(op, name string) error {
		if op == vfs.OpWrite && ((failLog && name == "/r/bad") || (failHS && name == "/r/"+HardStateFile)) {
			return errors.New("injected write error")
		}
		return nil
	})
	var sent int
	s, err := New(Config{NodeID: 1, FS: fs, Dir: "/r", Transport: countTransport{&sent}, Workers: 2, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	good, _ := OpenFileLog(fs, "/r/good")
	bad, _ := OpenFileLog(fs, "/r/bad")
	// Single-voter groups elect themselves at once on campaign; 2 and 3 voters need peers that never answer.
	must(t, s.AddGroup(1, good, []uint64{1}, &recSM{applied: make(chan string, 4)}))
	must(t, s.AddGroup(2, bad, []uint64{1}, &recSM{applied: make(chan string, 4)}))
	must(t, s.AddGroup(3, mustLog(t, fs, "/r/peer"), []uint64{1, 2}, &recSM{applied: make(chan string, 4)}))
	for range 30 { // past the election timeout: groups 1 and 2 elect themselves
		s.Tick()
		for s.cycle() {
		}
	}
	if s.GroupErr(1) != nil || s.GroupErr(2) != nil {
		t.Fatalf("groups failed before any fault: %v, %v", s.GroupErr(1), s.GroupErr(2))
	}
	failLog = true
	must(t, s.Propose(2, []byte("x")))
	for s.cycle() {
	}
	if s.GroupErr(2) == nil || s.GroupErr(1) != nil || s.Err() != nil {
		t.Fatalf("after a log write error: group 2 err %v (want one), group 1 err %v, node err %v", s.GroupErr(2), s.GroupErr(1), s.Err())
	}
	if err := s.Propose(2, []byte("y")); err == nil {
		t.Fatal("proposal to a failed group accepted")
	}
	failHS = true
	sent = 0
	// A heartbeat of a leader at a new term: group 3 must make the term durable before it answers.
	s.Step([]Message{{Group: 3, Msg: &pb.Message{Type: pb.MsgHeartbeat.Enum(), From: new(uint64(2)), To: new(uint64(1)), Term: new(uint64(5))}}})
	for s.cycle() {
	}
	if s.Err() == nil {
		t.Fatal("node did not fail on a HardState write error")
	}
	if sent != 0 {
		t.Fatalf("%d messages sent after the HardState write failed", sent)
	}
	// The same heartbeat on a healthy node is answered: the check above is not vacuous.
	failHS = false
	s2, err := New(Config{NodeID: 1, FS: vfs.NewMem(), Dir: "/r", Transport: countTransport{&sent}, Logger: slog.New(slog.DiscardHandler)})
	must(t, err)
	defer s2.Close()
	must(t, s2.AddGroup(3, mustLog(t, vfs.NewMem(), "/peer"), []uint64{1, 2}, &recSM{applied: make(chan string, 4)}))
	s2.Step([]Message{{Group: 3, Msg: &pb.Message{Type: pb.MsgHeartbeat.Enum(), From: new(uint64(2)), To: new(uint64(1)), Term: new(uint64(5))}}})
	for s2.cycle() {
	}
	if sent != 1 {
		t.Fatalf("healthy node sent %d messages for a heartbeat, want 1", sent)
	}
}

type countTransport struct{ n *int }

func (c countTransport) Send(_ uint64, msgs []Message) { *c.n += len(msgs) }

func mustLog(t *testing.T, fs vfs.FS, name string) *FileLog {
	t.Helper()
	l, err := OpenFileLog(fs, name)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// panicSM panics in Apply, as a broken state machine would.
type panicSM struct{ recSM }

func (*panicSM) Apply([]*pb.Entry) { panic("state machine bug") }

// TestSchedulerPanicFailsOneGroup: a panic while processing a group (raft's invariant checks panic) fails that
// group; the node and its other groups go on.
func TestSchedulerPanicFailsOneGroup(t *testing.T) {
	fs := vfs.NewMem()
	s, err := New(Config{NodeID: 1, FS: fs, Dir: "/r", Transport: countTransport{new(int)}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ok := &recSM{applied: make(chan string, 4)}
	must(t, s.AddGroup(1, mustLog(t, fs, "/r/1"), []uint64{1}, ok))
	must(t, s.AddGroup(2, mustLog(t, fs, "/r/2"), []uint64{1}, &panicSM{}))
	for range 30 {
		s.Tick()
		for s.cycle() {
		}
	}
	if s.GroupErr(2) == nil {
		t.Fatal("group 2 did not fail on its state machine's panic")
	}
	must(t, s.Propose(1, []byte("still here")))
	for s.cycle() {
	}
	if got := <-ok.applied; got != "still here" || s.Err() != nil {
		t.Fatalf("group 1 applied %q, node err %v", got, s.Err())
	}
}
