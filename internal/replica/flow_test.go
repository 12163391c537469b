package replica

import (
	"bytes"
	"log/slog"
	"strconv"
	"sync"
	"testing"

	"github.com/kawa-broker/kawa/internal/vfs"
	pb "go.etcd.io/raft/v3/raftpb"
)

// flowNet delivers messages between schedulers driven by hand (cycle), dropping those to silenced nodes and
// counting the MsgApp messages with entries addressed to each node.
type flowNet struct {
	mu     sync.Mutex
	nodes  map[uint64]*Scheduler
	silent map[uint64]bool
	apps   map[uint64]int
}

type flowTransport struct {
	n    *flowNet
	from uint64
}

func (t flowTransport) Send(to uint64, msgs []Message) {
	t.n.mu.Lock()
	for _, m := range msgs {
		if m.Msg.GetType() == pb.MsgApp && len(m.Msg.GetEntries()) > 0 { // empty ones carry only the commit index
			t.n.apps[to]++
		}
	}
	dst, silent := t.n.nodes[to], t.n.silent[to] || t.n.silent[t.from]
	t.n.mu.Unlock()
	if !silent {
		dst.Step(msgs)
	}
}

// flowCluster is three nodes with one group, stepped by hand until node 1 leads.
func flowCluster(t *testing.T, cfg Config) (*flowNet, map[uint64]*FileLog) {
	net := &flowNet{nodes: map[uint64]*Scheduler{}, silent: map[uint64]bool{}, apps: map[uint64]int{}}
	logs := map[uint64]*FileLog{}
	for id := uint64(1); id <= 3; id++ {
		fs := vfs.NewMem()
		c := cfg
		c.NodeID, c.FS, c.Dir, c.Transport, c.Workers = id, fs, "/r", flowTransport{net, id}, 1
		c.Logger = slog.New(slog.DiscardHandler)
		s, err := New(c)
		must(t, err)
		t.Cleanup(s.Close)
		lg := mustLog(t, fs, "/r/g"+strconv.Itoa(int(id)))
		t.Cleanup(func() { lg.Close() })
		must(t, s.AddGroup(1, lg, []uint64{1, 2, 3}, &recSM{applied: make(chan string, 1024)}))
		net.nodes[id], logs[id] = s, lg
	}
	// Only node 1 ticks, so it is the one to campaign.
	for i := 0; net.nodes[1].groups[1].lead != 1; i++ {
		if i > 100 {
			t.Fatal("node 1 did not become leader in 100 ticks")
		}
		net.nodes[1].Tick()
		net.settle()
	}
	return net, logs
}

// settle runs cycles on every node until none has work.
func (n *flowNet) settle() {
	for busy := true; busy; {
		busy = false
		for id := uint64(1); id <= 3; id++ {
			for n.nodes[id].cycle() {
				busy = true
			}
		}
	}
}

// TestMaxUncommittedEntriesSize: a leader cut off from its followers takes proposals only up to
// MaxUncommittedEntriesSize bytes of uncommitted entries and drops the rest (they would otherwise pile up in
// its log and memory while it cannot commit).
func TestMaxUncommittedEntriesSize(t *testing.T) {
	net, logs := flowCluster(t, Config{MaxUncommittedEntriesSize: 8 << 10})
	before, _ := logs[1].LastIndex()
	net.silent[1] = true
	data := bytes.Repeat([]byte("x"), 1<<10)
	for range 50 {
		must(t, net.nodes[1].Propose(1, data))
	}
	net.settle()
	after, _ := logs[1].LastIndex()
	if n := after - before; n < 7 || n > 9 {
		t.Fatalf("the isolated leader appended %d entries of 1 KiB with an 8 KiB uncommitted limit, want about 8", n)
	}
}

// TestMaxInflightMsgs: a leader sends a follower that stops answering at most MaxInflightMsgs append messages,
// while the other follower keeps receiving every entry.
func TestMaxInflightMsgs(t *testing.T) {
	net, logs := flowCluster(t, Config{MaxInflightMsgs: 4, MaxSizePerMsg: 1 << 10})
	data := bytes.Repeat([]byte("y"), 1<<10)
	must(t, net.nodes[1].Propose(1, data)) // both followers reach the replicate state
	net.settle()
	net.silent[2] = true
	net.apps[2] = 0
	for range 20 {
		must(t, net.nodes[1].Propose(1, data))
		net.settle()
	}
	last1, _ := logs[1].LastIndex()
	last3, _ := logs[3].LastIndex()
	if got := net.apps[2]; got < 1 || got > 4 {
		t.Fatalf("%d append messages went to the silent follower, want 1..4 (MaxInflightMsgs)", got)
	}
	if last3 != last1 {
		t.Fatalf("the answering follower is at index %d, the leader at %d", last3, last1)
	}
}
