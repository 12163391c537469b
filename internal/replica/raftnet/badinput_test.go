package raftnet

import (
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kawa-broker/kawa/internal/kawatest/wait"
	"github.com/kawa-broker/kawa/internal/replica"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

func slogTo(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// recNode is a Node that records what the Transport hands it, for tests of the Transport alone.
type recNode struct {
	mu          sync.Mutex
	steps       []replica.Message
	unreachable []replica.GroupID
	snaps       []raft.SnapshotStatus
}

func (r *recNode) Step(msgs []replica.Message) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.steps = append(r.steps, msgs...)
}

func (r *recNode) ReportUnreachable(_ uint64, groups []replica.GroupID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.unreachable = append(r.unreachable, groups...)
}

func (r *recNode) ReportSnapshot(_ replica.GroupID, _ uint64, st raft.SnapshotStatus) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.snaps = append(r.snaps, st)
}

func (r *recNode) stepped() []replica.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]replica.Message(nil), r.steps...)
}

// loneNode starts a Transport for node 2 whose peer node 1 is played by the test over raw TCP (node 1 is the
// lower ID, so node 2 only accepts from it and never dials).
func loneNode(t *testing.T, tweak func(*Config)) (*Transport, *recNode, string, *syncBuf) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuf{}
	cfg := Config{NodeID: 2, ClusterID: "c", Peers: map[uint64]string{1: "127.0.0.1:1"}, Logger: slogTo(logs), DialTimeout: time.Second}
	if tweak != nil {
		tweak(&cfg)
	}
	tr, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	n := &recNode{}
	tr.Start(n)
	if err := tr.Serve(ln); err != nil {
		t.Fatal(err)
	}
	return tr, n, ln.Addr().String(), logs
}

// transportPair starts Transports for nodes 1 and 2 on loopback, each with a recNode, tweak adjusting each
// one's config; t.Cleanup closes them.
func transportPair(t *testing.T, tweak func(*Config)) (map[uint64]*Transport, map[uint64]*recNode) {
	addrs := map[uint64]string{}
	lns := map[uint64]net.Listener{}
	for id := uint64(1); id <= 2; id++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[id], addrs[id] = ln, ln.Addr().String()
	}
	nodes := map[uint64]*recNode{}
	trs := map[uint64]*Transport{}
	for id := uint64(1); id <= 2; id++ {
		cfg := Config{NodeID: id, ClusterID: "c", Peers: addrs, Logger: slogTo(io.Discard), MinBackoff: 10 * time.Millisecond}
		tweak(&cfg)
		tr, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		nodes[id], trs[id] = &recNode{}, tr
		tr.Start(nodes[id])
		if err := tr.Serve(lns[id]); err != nil {
			t.Fatal(err)
		}
	}
	return trs, nodes
}

// rawPeer dials addr as node from of cluster "c" and completes the handshake.
func rawPeer(t *testing.T, addr string, from, to uint64) net.Conn {
	t.Helper()
	return rawStream(t, addr, from, to, streamRaft)
}

// rawStream dials addr as node from of cluster "c" for stream and completes the handshake.
func rawStream(t *testing.T, addr string, from, to, stream uint64) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	h := hello{version: protocolVersion, stream: stream, from: from, to: to, cluster: "c"}
	if _, err := c.Write(appendFrame(nil, kindHello, h.encode)); err != nil {
		t.Fatal(err)
	}
	kind, body, _, err := readFrame(c, 4096, nil)
	if err != nil || kind != kindHelloOK {
		t.Fatalf("handshake: kind %d body %q err %v", kind, body, err)
	}
	return c
}

func heartbeatFrame(group replica.GroupID, from, to uint64) []byte {
	m := replica.Message{Group: group, Msg: &pb.Message{Type: pb.MsgHeartbeat.Enum(), From: new(from), To: new(to), Term: new(uint64(3)), Commit: new(uint64(7))}}
	return appendFrame(nil, kindMsgs, func(b []byte) []byte {
		return appendMsgs(b, []replica.Message{m}, []int{protoSizeOf(m)})
	})
}

// waitClosed fails unless the transport closes c (a read ends with EOF or a reset) within 10 s.
func waitClosed(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 4096)
	for {
		_, err := c.Read(buf)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("connection not closed by the transport within 10s")
		}
		if err != nil {
			return
		}
	}
}

// TestBadInputClosesOnlyThatConnection: garbage, a bad CRC, an oversize frame, an unknown kind, a malformed
// message, a message forged for another node pair, a local raft message type, and a connection cut in the
// middle of a frame each close that connection only (logged); a new connection works, and a message for a
// group the node does not hold is handed on (Scheduler.Step drops it) without closing anything.
func TestBadInputClosesOnlyThatConnection(t *testing.T) {
	tr, n, addr, logs := loneNode(t, func(c *Config) { c.MaxFrameBytes = 1 << 20 })
	good := heartbeatFrame(5, 1, 2)
	crc := append([]byte(nil), good...)
	crc[len(crc)-1] ^= 0xff
	oversize := binary.BigEndian.AppendUint32(nil, 1<<20+1)
	oversize = append(oversize, 0, 0, 0, 0)
	forged := heartbeatFrame(5, 3, 2) // claims to come from node 3
	local := appendFrame(nil, kindMsgs, func(b []byte) []byte {
		m := replica.Message{Group: 5, Msg: &pb.Message{Type: pb.MsgUnreachable.Enum(), From: new(uint64(1)), To: new(uint64(2))}}
		return appendMsgs(b, []replica.Message{m}, []int{protoSizeOf(m)})
	})
	malformed := appendFrame(nil, kindMsgs, func(b []byte) []byte { return append(b, 1, 5, 3, 0xff, 0xff, 0xff) })
	for _, tc := range []struct {
		name  string
		input []byte
		log   string
	}{
		{"crc", crc, "CRC mismatch"},
		{"oversize", oversize, "frame larger than the limit"},
		{"unknown kind", appendFrame(nil, 42, nil), "frame kind 42"},
		{"forged pair", forged, "message 3→2 on the connection 1→2"},
		{"local type", local, "local message type MsgUnreachable"},
		{"malformed", malformed, "malformed frame body"},
		{"garbage", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := rawPeer(t, addr, 1, 2)
			if _, err := c.Write(tc.input); err != nil {
				t.Fatal(err)
			}
			waitClosed(t, c)
			if tc.log != "" && !strings.Contains(logs.String(), tc.log) {
				t.Fatalf("log lacks %q:\n%s", tc.log, logs.String())
			}
		})
	}
	// A stray client that never completes a hello is closed after DialTimeout.
	stray, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer stray.Close()
	stray.Write([]byte("\x00\x00\x00\x10garbage-garbage!"))
	waitClosed(t, stray)

	// Cut mid-frame: half of a valid frame, then the connection closes.
	half := rawPeer(t, addr, 1, 2)
	half.Write(good[:len(good)/2])
	half.Close()

	if got := n.stepped(); len(got) != 0 {
		t.Fatalf("bad input stepped %d messages into raft: %v", len(got), got)
	}
	// The transport still works: a new connection's heartbeats, for a group no node holds among them.
	c := rawPeer(t, addr, 1, 2)
	if _, err := c.Write(append(good, heartbeatFrame(1<<40, 1, 2)...)); err != nil {
		t.Fatal(err)
	}
	wait.Until(t, 10*time.Second, "two heartbeats stepped", func() bool { return len(n.stepped()) == 2 })
	got := n.stepped()
	if got[0].Group != 5 || got[1].Group != 1<<40 || got[0].Msg.GetCommit() != 7 || got[0].Msg.GetFrom() != 1 {
		t.Fatalf("stepped %v", got)
	}
	if s := tr.Stats(); s.BytesReceived == 0 {
		t.Fatalf("stats %+v", s)
	}
}

// TestSendQueueBounded: a peer that stops reading makes the kernel buffers and then the peer's queue fill;
// Send keeps returning, drops what does not fit, and reports the groups whose appends it dropped.
func TestSendQueueBounded(t *testing.T) {
	tr, n, addr, _ := loneNode(t, func(c *Config) { c.QueueBytes = 1 << 20; c.WriteTimeout = time.Minute })
	c := rawPeer(t, addr, 1, 2) // never reads again
	_ = c
	wait.Until(t, 10*time.Second, "node 2 holds the connection", func() bool {
		p := tr.peers[1]
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.conn != nil
	})
	data := make([]byte, 256<<10)
	const sends = 400 // 100 MiB: more than loopback's socket buffers and the queue together
	for i := range sends {
		m := &pb.Message{Type: pb.MsgApp.Enum(), From: new(uint64(2)), To: new(uint64(1)), Term: new(uint64(1)),
			Index: new(uint64(i)), Entries: []*pb.Entry{{Index: new(uint64(i + 1)), Term: new(uint64(1)), Data: data}}}
		tr.Send(1, []replica.Message{{Group: replica.GroupID(i % 7), Msg: m}})
		p := tr.peers[1]
		p.mu.Lock()
		qb := p.qBytes
		p.mu.Unlock()
		if qb > 1<<20 {
			t.Fatalf("queue holds %d bytes, bound 1 MiB", qb)
		}
	}
	s := tr.Stats()
	if s.MsgsDropped == 0 {
		t.Fatalf("nothing dropped after %d MiB to a peer that does not read: %+v", sends/4, s)
	}
	n.mu.Lock()
	unreachable := len(n.unreachable)
	n.mu.Unlock()
	if unreachable == 0 {
		t.Fatal("dropped appends not reported unreachable")
	}
	t.Logf("sent %d of %d appends, dropped %d, %d unreachable reports", s.MsgsSent, sends, s.MsgsDropped, unreachable)
}

func protoSizeOf(m replica.Message) int { return proto.Size(m.Msg) }

// holdStore takes snapshots until release is closed.
type holdStore struct{ entered, release chan struct{} }

func (holdStore) OpenSnapshot(replica.GroupID, *pb.Message) (io.ReadCloser, error) {
	return nil, errors.New("not a sender")
}

func (h holdStore) ReceiveSnapshot(_ replica.GroupID, _ *pb.Message, r io.Reader) error {
	h.entered <- struct{}{}
	<-h.release
	_, err := io.Copy(io.Discard, r)
	return err
}

// TestSecondSnapshotStreamRefused: while a peer's snapshot streams in, a second stream from the same peer
// is answered with a refusal and closed.
func TestSecondSnapshotStreamRefused(t *testing.T) {
	entered, release := make(chan struct{}, 1), make(chan struct{})
	_, _, addr, _ := loneNode(t, func(c *Config) { c.Snapshots = holdStore{entered, release} })
	defer close(release)
	header := appendFrame(nil, kindSnapHeader, func(b []byte) []byte {
		b = binary.AppendUvarint(b, 3)
		m := &pb.Message{Type: pb.MsgSnap.Enum(), From: new(uint64(1)), To: new(uint64(2)), Term: new(uint64(1)), Snapshot: &pb.Snapshot{}}
		b, _ = proto.MarshalOptions{}.MarshalAppend(b, m)
		return b
	})
	first := rawStream(t, addr, 1, 2, streamSnapshot)
	if _, err := first.Write(header); err != nil {
		t.Fatal(err)
	}
	<-entered
	second := rawStream(t, addr, 1, 2, streamSnapshot)
	second.SetReadDeadline(time.Now().Add(10 * time.Second))
	kind, body, _, err := readFrame(second, 4096, nil)
	if err != nil || kind != kindSnapResult || !strings.Contains(string(body), "another snapshot from this node is streaming") {
		t.Fatalf("second stream got kind %d %q, err %v", kind, body, err)
	}
	waitClosed(t, second)
}
