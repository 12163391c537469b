package raftnet

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/kawa-broker/kawa/internal/kawatest/wait"
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

	// Node 2 restarts on its data: it dials node 3 and is dialed by node 1 again.
	c.stop(2)
	c.commitAll("d", []uint64{1, 3}, []uint64{1, 3}, 30*time.Second)
	c.start(2, nil)
	c.commitAll("e", all, all, 30*time.Second)
	c.waitAgree(30 * time.Second)
	if logs := c.logs.String(); !strings.Contains(logs, "raftnet: connection lost") {
		t.Fatalf("no connection loss logged:\n%s", logs)
	}
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
