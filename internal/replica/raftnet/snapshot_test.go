package raftnet

import (
	"crypto/sha256"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kawa-broker/kawa/internal/kawatest/wait"
	"github.com/kawa-broker/kawa/internal/replica"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

const snapGroup = replica.GroupID(9999) // a group no Scheduler holds: the stream is the subject

// snapStore serves a deterministic payload of size bytes for snapGroup and, receiving, pauses at half of
// it until resume is closed, so the test can check that raft traffic flows while a snapshot streams.
type snapStore struct {
	size    int64
	read    atomic.Uint64 // payload bytes the sender's store handed out
	halfway chan struct{}
	resume  chan struct{}

	mu  sync.Mutex
	got [sha256.Size]byte
	n   int64
}

func payload(size int64) io.Reader {
	return io.LimitReader(rand.NewChaCha8([32]byte{7}), size)
}

func (s *snapStore) OpenSnapshot(g replica.GroupID, msg *pb.Message) (io.ReadCloser, error) {
	if g != snapGroup || string(msg.GetSnapshot().GetData()) != "descriptor" {
		return nil, errors.New("no such snapshot")
	}
	return io.NopCloser(countingReader{payload(s.size), &s.read}), nil
}

func (s *snapStore) ReceiveSnapshot(g replica.GroupID, msg *pb.Message, r io.Reader) error {
	h := sha256.New()
	n, err := io.CopyN(h, r, s.size/2)
	if err != nil {
		return err
	}
	close(s.halfway)
	<-s.resume
	m, err := io.Copy(h, r)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	copy(s.got[:], h.Sum(nil))
	s.n = n + m
	return nil
}

// TestSnapshotStreamsBesideRaft: a 32 MiB snapshot (32 times the peers' 1 MiB send queue) goes from node 1
// to node 2 on its own stream while the receiver holds it at half: meanwhile every group still commits
// proposals on all three nodes (heartbeats and appends are not stuck behind it), and the sender has not
// read the payload to its end (back-pressure). Then it completes intact, node 2's transport steps the
// MsgSnap into its Scheduler, and node 1's raft is told SnapshotFinish.
func TestSnapshotStreamsBesideRaft(t *testing.T) {
	const size = 32 << 20
	stores := map[uint64]*snapStore{}
	for id := uint64(1); id <= 3; id++ {
		stores[id] = &snapStore{size: size, halfway: make(chan struct{}), resume: make(chan struct{})}
	}
	c := newCluster(t, 20, func(cfg *Config) {
		cfg.QueueBytes = 1 << 20
		cfg.Snapshots = stores[cfg.NodeID]
	})
	c.commitAll("a", all, all, 30*time.Second)
	snap := &pb.Message{Type: pb.MsgSnap.Enum(), From: new(uint64(1)), To: new(uint64(2)), Term: new(uint64(1)),
		Snapshot: &pb.Snapshot{Data: []byte("descriptor"), Metadata: &pb.SnapshotMetadata{Index: new(uint64(10)), Term: new(uint64(1)),
			ConfState: &pb.ConfState{Voters: []uint64{1, 2, 3}}}}}
	c.nodes[1].tr.Send(2, []replica.Message{{Group: snapGroup, Msg: snap}})
	select {
	case <-stores[2].halfway:
	case <-time.After(30 * time.Second):
		t.Fatal("snapshot did not reach half within 30s")
	}
	c.commitAll("b", all, all, 30*time.Second)
	if r := stores[1].read.Load(); r >= size {
		t.Fatalf("sender read all %d bytes while the receiver was held at half: no back-pressure", r)
	} else {
		t.Logf("receiver held at %d MiB: sender had read %.1f MiB of %d", size>>21, float64(r)/(1<<20), size>>20)
	}
	close(stores[2].resume)
	n1 := c.nodes[1].node
	wait.Until(t, 30*time.Second, "node 1's raft told the snapshot's outcome", func() bool {
		n1.mu.Lock()
		defer n1.mu.Unlock()
		return len(n1.snaps) > 0
	})
	n1.mu.Lock()
	status := n1.snaps[0]
	n1.mu.Unlock()
	if status != raft.SnapshotFinish {
		t.Fatalf("snapshot status %v, want SnapshotFinish", status)
	}
	want := sha256.New()
	io.Copy(want, payload(size))
	st := stores[2]
	st.mu.Lock()
	if st.n != size || string(st.got[:]) != string(want.Sum(nil)) {
		t.Fatalf("receiver stored %d bytes, hash match %v", st.n, string(st.got[:]) == string(want.Sum(nil)))
	}
	st.mu.Unlock()
	if s := c.nodes[1].tr.Stats(); s.SnapshotsSent != 1 || s.SnapshotsFailed != 0 {
		t.Fatalf("node 1 stats %+v", s)
	}
	c.commitAll("c", all, all, 30*time.Second)
	c.waitAgree(10 * time.Second)
}

// refuseStore serves any payload and refuses every snapshot it is sent.
type refuseStore struct{ open chan struct{} }

func (s refuseStore) OpenSnapshot(replica.GroupID, *pb.Message) (io.ReadCloser, error) {
	<-s.open // held until the test has sent a second snapshot
	return io.NopCloser(payload(1 << 20)), nil
}

func (refuseStore) ReceiveSnapshot(_ replica.GroupID, _ *pb.Message, r io.Reader) error {
	io.Copy(io.Discard, r)
	return errors.New("disk full")
}

// TestSnapshotFailures: a snapshot the receiver's store refuses is reported SnapshotFailure to the sender's
// raft (the reason logged on both nodes, nothing stepped into the receiver's raft), and a second snapshot to a
// peer while one streams is refused at once.
func TestSnapshotFailures(t *testing.T) {
	open := make(chan struct{})
	logs := &syncBuf{}
	trs, nodes := transportPair(t, func(c *Config) { c.Logger, c.Snapshots = slogTo(logs), refuseStore{open} })
	snap := func() []replica.Message {
		return []replica.Message{{Group: 3, Msg: &pb.Message{Type: pb.MsgSnap.Enum(), From: new(uint64(2)), To: new(uint64(1)), Term: new(uint64(1)),
			Snapshot: &pb.Snapshot{Metadata: &pb.SnapshotMetadata{Index: new(uint64(4)), Term: new(uint64(1))}}}}}
	}
	statuses := func() []raft.SnapshotStatus {
		n := nodes[2]
		n.mu.Lock()
		defer n.mu.Unlock()
		return append([]raft.SnapshotStatus(nil), n.snaps...)
	}
	trs[2].Send(1, snap()) // node 2 sends to node 1 on a stream it dials, though node 1 dials the raft connection
	trs[2].Send(1, snap()) // while the first waits in OpenSnapshot
	if got := statuses(); len(got) != 1 || got[0] != raft.SnapshotFailure {
		t.Fatalf("second concurrent snapshot: statuses %v, want one SnapshotFailure at once", got)
	}
	close(open)
	wait.Until(t, 10*time.Second, "the refused snapshot reported", func() bool { return len(statuses()) == 2 })
	if got := statuses(); got[1] != raft.SnapshotFailure {
		t.Fatalf("refused snapshot reported %v", got[1])
	}
	if s := trs[2].Stats(); s.SnapshotsFailed != 2 || s.SnapshotsSent != 0 {
		t.Fatalf("sender stats %+v", s)
	}
	if l := logs.String(); !strings.Contains(l, "raftnet: snapshot refused") || !strings.Contains(l, "node 1 did not store the snapshot: disk full") {
		t.Fatalf("logs lack the refusal:\n%s", l)
	}
	for _, m := range nodes[1].stepped() {
		if m.Msg.GetType() == pb.MsgSnap {
			t.Fatal("a refused snapshot was stepped into raft")
		}
	}
}
