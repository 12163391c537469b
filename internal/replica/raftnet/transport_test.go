package raftnet

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/kawa-broker/kawa/internal/kawatest/wait"
	"github.com/kawa-broker/kawa/internal/replica"
	pb "go.etcd.io/raft/v3/raftpb"
)

var all = []uint64{1, 2, 3}

// TestClusterOverTCP: three Schedulers with 100 groups each over real loopback TCP elect leaders and commit
// on every node; then a node's listener is closed and its connections cut (the others commit without it,
// redialing with backoff), and reopened (it catches up); then a node is stopped and restarted on its data
// (it catches up from its FileLogs and the leaders). Every node ends with the same entries in every group.
func TestClusterOverTCP(t *testing.T) {
	c := newCluster(t, 100, nil)
	c.commitAll("a", all, all, 30*time.Second)
	c.waitAgree(10 * time.Second)
	if s := c.nodes[1].tr.Stats(); s.HeartbeatsCoalesced == 0 || s.FramesSent == 0 {
		t.Fatalf("node 1 stats %+v: no coalesced heartbeats", s)
	}

	// Node 3 (it only accepts: lower IDs dial) goes off the network and comes back on the same address.
	n3 := c.nodes[3]
	n3.ln.Close()
	n3.ln.cut()
	c.commitAll("b", []uint64{1, 2}, []uint64{1, 2}, 30*time.Second)
	ln, err := net.Listen("tcp", c.addrs[3])
	if err != nil {
		t.Fatal(err)
	}
	n3.ln = &cutListener{Listener: ln}
	if err := n3.tr.Serve(n3.ln); err != nil {
		t.Fatal(err)
	}
	c.commitAll("c", all, all, 30*time.Second)
	c.waitAgree(30 * time.Second)

	// Node 3's next 4 accepted connections are cut after 100 KB, inside frames of 64 KiB appends; the
	// lower nodes redial each time and every group still commits on all three.
	n3.ln.mu.Lock()
	n3.ln.tornCuts, n3.ln.tornAfter = 4, 100_000
	n3.ln.mu.Unlock()
	n3.ln.cut()
	for round := 0; n3.ln.torn() > 0; round++ {
		if round == 20 {
			t.Fatalf("after 20 rounds of 64 KiB appends, %d torn connections still to come", n3.ln.torn())
		}
		c.commitAllPadded(fmt.Sprintf("torn%d-", round), 64<<10, all, []uint64{1, 2}, 30*time.Second)
	}
	c.waitAgree(30 * time.Second)
	if logs := c.logs.String(); !strings.Contains(logs, "unexpected EOF") {
		t.Fatalf("no connection ended inside a frame:\n%s", logs)
	}

	// Node 2 restarts on its data: it dials node 3 and is dialed by node 1 again.
	c.stop(2)
	c.commitAll("d", []uint64{1, 3}, []uint64{1, 3}, 30*time.Second)
	c.start(2, nil)
	c.commitAll("e", all, all, 30*time.Second)
	c.waitAgree(30 * time.Second)
	if logs := c.logs.String(); !strings.Contains(logs, "raftnet: connection lost") {
		t.Fatalf("no connection loss logged:\n%s", logs)
	}
	// After all the reconnects each node holds exactly its two raft connections: closed ones are forgotten.
	wait.Until(t, 10*time.Second, "two tracked connections per node", func() bool {
		for _, n := range c.nodes {
			n.tr.mu.Lock()
			open := len(n.tr.conns)
			n.tr.mu.Unlock()
			if open != 2 {
				return false
			}
		}
		return true
	})
}

// TestRefusedHandshake: a node of another cluster, and a node configured with the wrong node ID for an
// address, are refused on connect, with the reason logged on both sides; the cluster itself is unaffected.
func TestRefusedHandshake(t *testing.T) {
	c := newCluster(t, 3, nil)
	c.commitAll("a", all, all, 30*time.Second)
	for _, tc := range []struct {
		name       string
		cfg        Config
		want, dial string
	}{
		{"wrong cluster", Config{NodeID: 1, ClusterID: "other-cluster", Peers: map[uint64]string{2: c.addrs[2]}},
			`cluster ID \"other-cluster\", node 2 is in cluster \"test-cluster\"`, "raftnet: handshake refused"},
		// Node 4 believes node 5 lives at node 2's address.
		{"wrong node ID", Config{NodeID: 4, ClusterID: "test-cluster", Peers: map[uint64]string{5: c.addrs[2]}},
			"addressed to node 5, this is node 2", "raftnet: handshake refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := &syncBuf{}
			tc.cfg.Logger, tc.cfg.MinBackoff = slogTo(logs), 10*time.Millisecond
			tr, err := New(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			tr.Start(&recNode{})
			wait.Until(t, 10*time.Second, "the refusal logged on both nodes", func() bool {
				return strings.Contains(c.logs.String(), tc.want) && strings.Contains(logs.String(), tc.dial) &&
					strings.Contains(logs.String(), "level=ERROR")
			})
		})
	}
	c.commitAll("b", all, all, 30*time.Second)
	c.waitAgree(10 * time.Second)
}

// TestCloseDrains: messages queued just before Close are written before the connection closes (a leader
// transferring leadership on shutdown sends MsgTimeoutNow last), and Close returns with every goroutine
// joined.
func TestCloseDrains(t *testing.T) {
	trs, nodes := transportPair(t, func(*Config) {})
	wait.Until(t, 10*time.Second, "node 1 connected to node 2", func() bool {
		p := trs[1].peers[2]
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.conn != nil
	})
	const n = 2000
	data := make([]byte, 1024)
	for i := range n {
		m := &pb.Message{Type: pb.MsgApp.Enum(), From: new(uint64(1)), To: new(uint64(2)), Term: new(uint64(1)),
			Index: new(uint64(i)), Entries: []*pb.Entry{{Index: new(uint64(i + 1)), Term: new(uint64(1)), Data: data}}}
		trs[1].Send(2, []replica.Message{{Group: replica.GroupID(i), Msg: m}})
	}
	trs[1].Close()
	if s := trs[1].Stats(); s.MsgsDropped != 0 || s.MsgsSent != n {
		t.Fatalf("after Close: %+v, want all %d sent", s, n)
	}
	wait.Until(t, 10*time.Second, "node 2 received every message", func() bool { return len(nodes[2].stepped()) == n })
	trs[1].Send(2, []replica.Message{{Group: 1, Msg: &pb.Message{Type: pb.MsgHeartbeat.Enum(), From: new(uint64(1)), To: new(uint64(2))}}})
	if s := trs[1].Stats(); s.MsgsDropped != 1 {
		t.Fatalf("Send after Close: %+v, want it dropped", s)
	}
}

// TestMessageOverFrameLimitDropped: a message no frame can hold is dropped and its group told (the
// connection and the messages around it are unaffected); the receiver would have closed the connection on
// such a frame.
func TestMessageOverFrameLimitDropped(t *testing.T) {
	trs, nodes := transportPair(t, func(c *Config) { c.MaxFrameBytes, c.ChunkBytes = 64<<10, 16<<10 })
	wait.Until(t, 10*time.Second, "node 1 connected to node 2", func() bool {
		p := trs[1].peers[2]
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.conn != nil
	})
	big := &pb.Message{Type: pb.MsgApp.Enum(), From: new(uint64(1)), To: new(uint64(2)), Term: new(uint64(1)),
		Entries: []*pb.Entry{{Index: new(uint64(1)), Term: new(uint64(1)), Data: make([]byte, 100<<10)}}}
	hb := &pb.Message{Type: pb.MsgHeartbeat.Enum(), From: new(uint64(1)), To: new(uint64(2)), Term: new(uint64(1))}
	vote := &pb.Message{Type: pb.MsgVote.Enum(), From: new(uint64(1)), To: new(uint64(2)), Term: new(uint64(2))}
	trs[1].Send(2, []replica.Message{{Group: 8, Msg: big}, {Group: 9, Msg: hb}, {Group: 10, Msg: vote}})
	wait.Until(t, 10*time.Second, "the heartbeat and the vote received", func() bool { return len(nodes[2].stepped()) == 2 })
	wait.Until(t, 10*time.Second, "the drop counted and group 8 told", func() bool {
		nodes[1].mu.Lock()
		defer nodes[1].mu.Unlock()
		return trs[1].Stats().MsgsDropped == 1 && len(nodes[1].unreachable) == 1 && nodes[1].unreachable[0] == 8
	})
	for _, m := range nodes[2].stepped() {
		if m.Group == 8 {
			t.Fatal("the oversize append arrived")
		}
	}
}
