package raftnet

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kawa-broker/kawa/internal/kawatest/wait"
	"github.com/kawa-broker/kawa/internal/replica"
	"github.com/kawa-broker/kawa/internal/vfs"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// applySM records one group's applied data entries and its leader as this node sees it.
type applySM struct {
	mu     sync.Mutex
	data   []string
	lead   uint64
	notify chan struct{} // poked on every Apply when set (capacity 1)
}

func (a *applySM) Apply(ents []*pb.Entry) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, e := range ents {
		if e.GetType() == pb.EntryNormal && len(e.GetData()) > 0 {
			a.data = append(a.data, string(e.GetData()))
		}
	}
	if a.notify != nil {
		select {
		case a.notify <- struct{}{}:
		default:
		}
	}
}

func (a *applySM) applied() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.data)
}

func (a *applySM) LeaderChanged(lead, _ uint64) {
	a.mu.Lock()
	a.lead = lead
	a.mu.Unlock()
}

func (a *applySM) state() (lead uint64, data []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.lead, slices.Clone(a.data)
}

// reportNode is the Scheduler as the Transport's Node, counting what the Transport reports to it.
type reportNode struct {
	*replica.Scheduler
	mu          sync.Mutex
	unreachable int
	snaps       []raft.SnapshotStatus
}

func (r *reportNode) ReportUnreachable(to uint64, groups []replica.GroupID) {
	r.mu.Lock()
	r.unreachable += len(groups)
	r.mu.Unlock()
	r.Scheduler.ReportUnreachable(to, groups)
}

func (r *reportNode) ReportSnapshot(g replica.GroupID, to uint64, st raft.SnapshotStatus) {
	r.mu.Lock()
	r.snaps = append(r.snaps, st)
	r.mu.Unlock()
	r.Scheduler.ReportSnapshot(g, to, st)
}

// syncBuf is a log sink tests read while the nodes write.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// cutListener is a real TCP listener that remembers the connections it accepted, so a test can cut them;
// with tornCuts > 0, each of the next tornCuts connections it accepts is closed by its own Read once it
// has read tornAfter bytes, wherever in a frame that falls.
type cutListener struct {
	net.Listener
	mu        sync.Mutex
	conns     []net.Conn
	tornCuts  int
	tornAfter int
}

func (l *cutListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		if l.tornCuts > 0 {
			l.tornCuts--
			c = &tornConn{Conn: c, left: l.tornAfter}
		}
		l.conns = append(l.conns, c)
		l.mu.Unlock()
	}
	return c, err
}

// tornConn closes itself after reading left bytes: the read that crosses the limit returns only the bytes
// up to it, then the stream ends (io.EOF, as when the peer's side went away) wherever it stands.
type tornConn struct {
	net.Conn
	left int
}

func (c *tornConn) Read(b []byte) (int, error) {
	if c.left <= 0 {
		c.Conn.Close()
		return 0, io.EOF
	}
	n, err := c.Conn.Read(b[:min(len(b), c.left)])
	c.left -= n
	return n, err
}

// torn reports how many torn connections are still to come.
func (l *cutListener) torn() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.tornCuts
}

// cut closes every connection accepted so far.
func (l *cutListener) cut() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		c.Close()
	}
	l.conns = nil
}

// tnode is one node of a test cluster: a Scheduler on FileLogs in its own directory, its Transport and
// listener.
type tnode struct {
	id    uint64
	dir   string
	ln    *cutListener
	tr    *Transport
	node  *reportNode
	sms   []*applySM
	logs  []*replica.FileLog
	alive bool
}

type cluster struct {
	t      *testing.T
	groups int
	addrs  map[uint64]string
	nodes  map[uint64]*tnode
	logs   *syncBuf
	tweak  func(*Config)         // adjusts every node's transport config
	sched  func(*replica.Config) // adjusts every node's scheduler config
	notify chan struct{}         // given to every applySM
}

func newCluster(t *testing.T, groups int, tweak func(*Config)) *cluster {
	return newClusterSched(t, groups, tweak, nil)
}

// newClusterSched is newCluster with the schedulers' config adjusted by sched.
func newClusterSched(t *testing.T, groups int, tweak func(*Config), sched func(*replica.Config)) *cluster {
	c := &cluster{t: t, groups: groups, addrs: map[uint64]string{}, nodes: map[uint64]*tnode{}, logs: &syncBuf{}, tweak: tweak, sched: sched, notify: make(chan struct{}, 1)}
	lns := map[uint64]net.Listener{}
	for id := uint64(1); id <= 3; id++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[id], c.addrs[id] = ln, ln.Addr().String()
	}
	for id := uint64(1); id <= 3; id++ {
		c.nodes[id] = &tnode{id: id, dir: filepath.Join(t.TempDir(), "node"+strconv.Itoa(int(id)))}
		c.start(id, lns[id])
	}
	t.Cleanup(func() {
		for id := uint64(1); id <= 3; id++ {
			c.stop(id)
		}
	})
	return c
}

func (c *cluster) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(c.logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// start starts node id on its directory (restoring what it holds) and listener ln (nil: listen again on
// its address).
func (c *cluster) start(id uint64, ln net.Listener) {
	t := c.t
	n := c.nodes[id]
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", c.addrs[id]); err != nil {
			t.Fatal(err)
		}
	}
	n.ln = &cutListener{Listener: ln}
	cfg := Config{NodeID: id, ClusterID: "test-cluster", Peers: c.addrs, Logger: c.logger(), MinBackoff: 10 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}
	if c.tweak != nil {
		c.tweak(&cfg)
	}
	tr, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rc := replica.Config{
		NodeID: id, FS: vfs.OS, Dir: n.dir, Transport: tr, Workers: 2, TickInterval: 20 * time.Millisecond,
		ElectionTicks: 10, HeartbeatTicks: 2, Logger: slog.New(slog.DiscardHandler),
	}
	if c.sched != nil {
		c.sched(&rc)
	}
	s, err := replica.New(rc)
	if err != nil {
		t.Fatal(err)
	}
	n.tr, n.node, n.sms, n.logs = tr, &reportNode{Scheduler: s}, nil, nil
	for g := range c.groups {
		lg, err := replica.OpenFileLog(vfs.OS, filepath.Join(n.dir, fmt.Sprintf("g%d.log", g)))
		if err != nil {
			t.Fatal(err)
		}
		sm := &applySM{notify: c.notify}
		if err := s.AddGroup(replica.GroupID(g), lg, []uint64{1, 2, 3}, sm); err != nil {
			t.Fatal(err)
		}
		n.sms, n.logs = append(n.sms, sm), append(n.logs, lg)
	}
	tr.Start(n.node)
	if err := tr.Serve(n.ln); err != nil {
		t.Fatal(err)
	}
	s.Start()
	n.alive = true
}

// stop stops node id: scheduler first (no more Sends), then the transport, then the logs.
func (c *cluster) stop(id uint64) {
	n := c.nodes[id]
	if !n.alive {
		return
	}
	n.alive = false
	n.node.Close()
	if err := n.tr.Close(); err != nil {
		c.t.Error(err)
	}
	for _, lg := range n.logs {
		lg.Close()
	}
	if err := n.node.Err(); err != nil {
		c.t.Errorf("node %d failed: %v", id, err)
	}
}

// leader returns the leader of group g that a live node in among reports for itself, 0 if none.
func (c *cluster) leader(g int, among []uint64) uint64 {
	for _, id := range among {
		if n := c.nodes[id]; n.alive {
			if lead, _ := n.sms[g].state(); lead == id {
				return id
			}
		}
	}
	return 0
}

// commitAll proposes value prefix+g to every group through a leader among leaders and waits until every
// node in on has applied it; a proposal raft dropped (leadership moved) is proposed again.
func (c *cluster) commitAll(prefix string, leaders, on []uint64, d time.Duration) {
	c.t.Helper()
	c.commitAllPadded(prefix, 0, leaders, on, d)
}

// commitAllPadded is commitAll with values of at least pad bytes.
func (c *cluster) commitAllPadded(prefix string, pad int, leaders, on []uint64, d time.Duration) {
	t := c.t
	t.Helper()
	deadline := time.Now().Add(d)
	pending := map[int]time.Time{} // group → when last proposed
	for g := range c.groups {
		pending[g] = time.Time{}
	}
	wait.Until(t, d, fmt.Sprintf("%q committed in %d groups on nodes %v", prefix, c.groups, on), func() bool {
		for g, at := range pending {
			want := fmt.Sprintf("%s%d", prefix, g)
			if len(want) < pad {
				want += strings.Repeat(".", pad-len(want))
			}
			done := true
			for _, id := range on {
				if _, data := c.nodes[id].sms[g].state(); !slices.Contains(data, want) {
					done = false
					break
				}
			}
			if done {
				delete(pending, g)
				continue
			}
			if time.Since(at) < 2*time.Second {
				continue
			}
			if lead := c.leader(g, leaders); lead != 0 {
				if err := c.nodes[lead].node.Propose(replica.GroupID(g), []byte(want)); err != nil {
					t.Fatalf("propose to group %d on node %d: %v", g, lead, err)
				}
				pending[g] = time.Now()
			}
		}
		return len(pending) == 0 || time.Now().After(deadline)
	})
	if len(pending) > 0 {
		t.Fatalf("%d groups did not commit %q on %v within %v", len(pending), prefix, on, d)
	}
}

// checkAgree fails unless every node applied the same sequence in every group. (A value may appear twice:
// commitAll proposes again what it does not see applied in time.)
func (c *cluster) checkAgree() {
	t := c.t
	t.Helper()
	for g := range c.groups {
		_, want := c.nodes[1].sms[g].state()
		for id := uint64(2); id <= 3; id++ {
			if _, got := c.nodes[id].sms[g].state(); !slices.Equal(got, want) {
				t.Fatalf("group %d: node %d applied %q, node 1 %q", g, id, got, want)
			}
		}
	}
}

// waitAgree waits until every node applied the same sequence in every group.
func (c *cluster) waitAgree(d time.Duration) {
	c.t.Helper()
	wait.Until(c.t, d, "all nodes applied the same entries in every group", func() bool {
		for g := range c.groups {
			_, want := c.nodes[1].sms[g].state()
			for id := uint64(2); id <= 3; id++ {
				if _, got := c.nodes[id].sms[g].state(); !slices.Equal(got, want) {
					return false
				}
			}
		}
		return true
	})
	c.checkAgree()
}
