package raftnet

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kawa-broker/kawa/internal/replica"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Node is the raft side a Transport delivers to: *replica.Scheduler.
type Node interface {
	// Step takes messages received from a peer (all of one frame, possibly of many groups).
	Step(msgs []replica.Message)
	// ReportUnreachable tells groups that their last messages to node to were lost.
	ReportUnreachable(to uint64, groups []replica.GroupID)
	// ReportSnapshot tells group how the snapshot it sent to node to ended.
	ReportSnapshot(group replica.GroupID, to uint64, status raft.SnapshotStatus)
}

// Config configures a Transport. Sizes are bytes, durations wall time.
type Config struct {
	NodeID uint64 // this node's raft ID, > 0
	// ClusterID names the cluster; a peer with another is refused on connect (both sides log it), so two
	// clusters sharing hosts never exchange raft messages.
	ClusterID string
	// Peers maps every other node's raft ID to the host:port of its raft listener (this node's own entry,
	// if present, is ignored). See ParseVoters for the --peers form.
	Peers  map[uint64]string
	Logger *slog.Logger // default slog.Default()
	// Snapshots streams MsgSnap payloads; nil: a MsgSnap is reported to raft as failed at once and a peer's
	// snapshot stream is refused.
	Snapshots SnapshotStore

	QueueBytes int // per peer: messages queued beyond this are dropped (raft retries); default 8 MiB
	// MaxFrameBytes bounds a frame: one declaring more closes its connection unread. It must exceed the
	// largest raft message (the Scheduler's MaxSizePerMsg, or one entry when a single entry is larger: a
	// Kafka batch up to message.max.bytes), since a message that fits no frame is dropped (logged) and raft
	// would resend it forever; default 16 MiB.
	MaxFrameBytes int
	ChunkBytes    int // snapshot payload bytes per frame; default 256 KiB

	DialTimeout     time.Duration // connect plus handshake; default 5s
	WriteTimeout    time.Duration // one write of queued frames; on expiry the connection is closed; default 10s
	SnapshotTimeout time.Duration // a snapshot stream silent this long fails; default 1m
	DrainTimeout    time.Duration // Close waits this long at most for queued messages to be written; default 1s
	MinBackoff      time.Duration // first redial delay after a failure, doubled up to MaxBackoff; default 50ms
	MaxBackoff      time.Duration // default 5s

	// DisableHeartbeatCoalescing sends heartbeats as full messages (for measuring what coalescing saves).
	DisableHeartbeatCoalescing bool
}

func (c Config) withDefaults() (Config, error) {
	if c.NodeID == 0 || c.ClusterID == "" {
		return c, errors.New("raftnet: Config needs NodeID > 0 and a ClusterID")
	}
	for id, addr := range c.Peers {
		if id == 0 || (id != c.NodeID && addr == "") {
			return c, fmt.Errorf("raftnet: peer %d needs an ID > 0 and an address", id)
		}
	}
	defInt := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	defDur := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	defInt(&c.QueueBytes, 8<<20)
	defInt(&c.MaxFrameBytes, 16<<20)
	defInt(&c.ChunkBytes, 256<<10)
	defDur(&c.DialTimeout, 5*time.Second)
	defDur(&c.WriteTimeout, 10*time.Second)
	defDur(&c.SnapshotTimeout, time.Minute)
	defDur(&c.DrainTimeout, time.Second)
	defDur(&c.MinBackoff, 50*time.Millisecond)
	defDur(&c.MaxBackoff, 5*time.Second)
	if c.ChunkBytes+64 > c.MaxFrameBytes {
		return c, fmt.Errorf("raftnet: ChunkBytes %d does not fit MaxFrameBytes %d", c.ChunkBytes, c.MaxFrameBytes)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}

// Stats are a Transport's counters since New.
type Stats struct {
	BytesSent, BytesReceived uint64 // frames on raft and snapshot connections, headers included
	FramesSent               uint64
	MsgsSent                 uint64 // raft messages written, coalesced heartbeats included
	HeartbeatsCoalesced      uint64 // of MsgsSent, those carried in compact form
	MsgsDropped              uint64 // full queue, no connection, unknown peer, too large, or lost with a connection
	SnapshotsSent            uint64 // streams the receiver stored
	SnapshotsFailed          uint64
}

type counters struct {
	bytesSent, bytesReceived, framesSent, msgsSent, hbCoalesced, msgsDropped, snapsSent, snapsFailed atomic.Uint64
}

// Transport is replica.Transport over TCP (see the package doc for the protocol). Goroutines, all owned by
// the Transport and joined by Close: one dialer per peer with a higher node ID; one per listener given to
// Serve; per raft connection a reader (the dialer's or the acceptor's goroutine) and a writer; one per
// snapshot being sent or received. Locks: mu guards the connection and listener sets and the lifecycle; each
// peer's mu guards its queue and current connection. No lock is held while calling the Node.
type Transport struct {
	cfg    Config
	log    *slog.Logger
	peers  map[uint64]*peer
	stats  counters
	stop   chan struct{}
	ctx    context.Context // cancelled by Close: aborts dials
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	node     Node
	conns    map[net.Conn]struct{}
	lns      map[net.Listener]struct{}
	started  bool
	draining bool // Close has begun: Send drops everything
	closed   bool
}

// peer is the state of the connection to one other node.
type peer struct {
	id       uint64
	addr     string
	notify   chan struct{} // poked when the queue becomes non-empty or a connection arrives; capacity 1
	snapBusy atomic.Bool   // a snapshot is being sent to this peer (one at a time)
	snapRecv atomic.Bool   // a snapshot from this peer is being received (one at a time)

	mu      sync.Mutex
	written *sync.Cond // on mu: broadcast when a write ends or the connection goes
	conn    net.Conn   // the raft connection, nil while there is none
	q       []replica.Message
	qBytes  int
	writing bool // the writer holds messages taken from q
}

// New checks cfg and returns a Transport that drops everything until Start.
func New(cfg Config) (*Transport, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	t := &Transport{
		cfg: cfg, log: cfg.Logger, peers: map[uint64]*peer{}, stop: make(chan struct{}), ctx: ctx, cancel: cancel,
		conns: map[net.Conn]struct{}{}, lns: map[net.Listener]struct{}{},
	}
	for id, addr := range cfg.Peers {
		if id != cfg.NodeID {
			p := &peer{id: id, addr: addr, notify: make(chan struct{}, 1)}
			p.written = sync.NewCond(&p.mu)
			t.peers[id] = p
		}
	}
	return t, nil
}

// Start delivers received messages to n and starts dialing the peers whose node ID is higher than this
// node's: of each pair of nodes the lower ID dials, so a pair has one raft connection.
func (t *Transport) Start(n Node) {
	t.mu.Lock()
	if t.started || t.closed {
		t.mu.Unlock()
		return
	}
	t.started, t.node = true, n
	t.mu.Unlock()
	for _, id := range slices.Sorted(maps.Keys(t.peers)) {
		if p := t.peers[id]; id > t.cfg.NodeID {
			t.goOwned(func() { t.dialLoop(p) })
		}
	}
}

// Serve accepts peers' connections on ln in a goroutine the Transport owns, until ln fails or is closed
// (Close closes it). It may be called again with a new listener after one was closed. Start must come first.
func (t *Transport) Serve(ln net.Listener) error {
	t.mu.Lock()
	switch {
	case t.closed:
		t.mu.Unlock()
		ln.Close()
		return net.ErrClosed
	case !t.started:
		t.mu.Unlock()
		return errors.New("raftnet: Serve before Start")
	}
	t.lns[ln] = struct{}{}
	t.mu.Unlock()
	if !t.goOwned(func() { t.acceptLoop(ln) }) {
		ln.Close()
		return net.ErrClosed
	}
	return nil
}

// Close drains and stops: it takes no more messages, waits up to DrainTimeout for the queued ones to be
// written (a leader handing over leadership on shutdown sends MsgTimeoutNow just before), then stops dialing
// and accepting, closes every connection and listener, and waits for every goroutine of the Transport.
// Messages still queued then are dropped (raft resends what it still needs).
func (t *Transport) Close() error {
	t.mu.Lock()
	if t.closed || t.draining {
		t.mu.Unlock()
		return nil
	}
	t.draining = true
	t.mu.Unlock()
	t.drain()
	t.mu.Lock()
	t.closed = true
	for ln := range t.lns {
		ln.Close()
	}
	for c := range t.conns {
		c.Close()
	}
	t.mu.Unlock()
	close(t.stop)
	t.cancel()
	t.wg.Wait()
	return nil
}

// Stats returns the counters.
func (t *Transport) Stats() Stats {
	s := &t.stats
	return Stats{
		BytesSent: s.bytesSent.Load(), BytesReceived: s.bytesReceived.Load(), FramesSent: s.framesSent.Load(),
		MsgsSent: s.msgsSent.Load(), HeartbeatsCoalesced: s.hbCoalesced.Load(), MsgsDropped: s.msgsDropped.Load(),
		SnapshotsSent: s.snapsSent.Load(), SnapshotsFailed: s.snapsFailed.Load(),
	}
}

// goOwned runs f in a goroutine joined by Close, unless the Transport is closed.
func (t *Transport) goOwned(f func()) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		f()
	}()
	return true
}

// track registers c so Close closes it; false (and c closed) when the Transport is closed.
func (t *Transport) track(c net.Conn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		c.Close()
		return false
	}
	t.conns[c] = struct{}{}
	return true
}

func (t *Transport) untrack(c net.Conn) {
	c.Close()
	t.mu.Lock()
	delete(t.conns, c)
	t.mu.Unlock()
}

// getNode returns the Node, nil before Start and once Close has begun.
func (t *Transport) getNode() Node {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.draining {
		return nil
	}
	return t.node
}

// drain waits until every peer's queue is written, its connection is gone, or DrainTimeout passed.
func (t *Transport) drain() {
	var expired atomic.Bool
	timer := time.AfterFunc(t.cfg.DrainTimeout, func() {
		expired.Store(true)
		for _, p := range t.peers {
			p.mu.Lock() // so no waiter misses the broadcast between its check and its Wait
			p.written.Broadcast()
			p.mu.Unlock()
		}
	})
	defer timer.Stop()
	for _, p := range t.peers {
		p.mu.Lock()
		for p.conn != nil && (len(p.q) > 0 || p.writing) && !expired.Load() {
			p.written.Wait()
		}
		p.mu.Unlock()
	}
}

// msgBytes estimates what m takes in a queue: its entries' data plus a fixed overhead per entry and message.
func msgBytes(m *pb.Message) int {
	n := 64 + len(m.GetSnapshot().GetData()) + len(m.GetContext())
	for _, e := range m.GetEntries() {
		n += 32 + len(e.GetData())
	}
	return n
}

// Send queues msgs for node to and returns without waiting on the network (replica.Transport). Messages
// that do not fit the peer's queue, or find no connection to it, are dropped, and the groups whose
// appends were dropped are told (ReportUnreachable) so their leaders probe that follower instead of
// streaming appends into a void. A MsgSnap goes to its own stream (see SnapshotStore).
func (t *Transport) Send(to uint64, msgs []replica.Message) {
	p := t.peers[to]
	n := t.getNode()
	if p == nil || n == nil {
		t.stats.msgsDropped.Add(uint64(len(msgs)))
		return
	}
	var lost []replica.GroupID
	var snaps []replica.Message
	queued := false
	p.mu.Lock()
	for _, m := range msgs {
		if m.Msg.GetType() == pb.MsgSnap {
			snaps = append(snaps, m)
			continue
		}
		sz := msgBytes(m.Msg)
		if p.conn == nil || p.qBytes+sz > t.cfg.QueueBytes {
			t.stats.msgsDropped.Add(1)
			lost = appendLost(lost, m)
			continue
		}
		p.q = append(p.q, m)
		p.qBytes += sz
		queued = true
	}
	p.mu.Unlock()
	if queued {
		poke(p.notify)
	}
	t.reportLost(n, to, lost)
	for _, m := range snaps {
		t.sendSnapshot(n, p, m)
	}
}

// appendLost adds m's group to lost when m is an append: only appends need ReportUnreachable (a lost
// heartbeat or vote is simply lost; raft's timers cover it).
func appendLost(lost []replica.GroupID, m replica.Message) []replica.GroupID {
	if m.Msg.GetType() == pb.MsgApp {
		lost = append(lost, m.Group)
	}
	return lost
}

// reportLost tells n (nil once Close began: nobody is listening) that lost's appends to node to were lost.
func (t *Transport) reportLost(n Node, to uint64, lost []replica.GroupID) {
	if len(lost) == 0 || n == nil {
		return
	}
	slices.Sort(lost)
	n.ReportUnreachable(to, slices.Compact(lost))
}

func poke(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// dialLoop keeps the raft connection to p (a peer with a higher ID) up: dial, handshake, run it until it
// breaks, then redial after an exponential backoff with jitter. A refusal is logged at Error level (a
// cluster ID or node ID mismatch needs an operator); other failures once per change of error.
func (t *Transport) dialLoop(p *peer) {
	backoff := t.cfg.MinBackoff
	var lastErr string
	for {
		c, err := t.dial(p, streamRaft)
		if err == nil {
			t.log.Info("raftnet: connected", "node", t.cfg.NodeID, "peer", p.id, "addr", p.addr)
			lastErr = ""
			backoff = t.cfg.MinBackoff
			err = t.runRaftConn(p, c)
			t.untrack(c)
			t.log.Info("raftnet: connection lost", "node", t.cfg.NodeID, "peer", p.id, "err", err)
		} else if err.Error() != lastErr && t.ctx.Err() == nil {
			lastErr = err.Error()
			level := slog.LevelWarn
			if errors.Is(err, errRefused) {
				level = slog.LevelError
			}
			t.log.Log(context.Background(), level, "raftnet: cannot connect to peer", "node", t.cfg.NodeID, "peer", p.id, "addr", p.addr, "err", err)
		}
		timer := time.NewTimer(backoff/2 + rand.N(backoff/2+1))
		select {
		case <-t.stop:
			timer.Stop()
			return
		case <-timer.C:
		}
		backoff = min(2*backoff, t.cfg.MaxBackoff)
	}
}

// errRefused marks a handshake the peer refused, or a peer that is not who Peers says.
var errRefused = errors.New("raftnet: handshake refused")

// dial connects to p, sends a hello for stream and checks the answer. The connection is tracked.
func (t *Transport) dial(p *peer, stream uint64) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(t.ctx, t.cfg.DialTimeout)
	defer cancel()
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", p.addr)
	if err != nil {
		return nil, err
	}
	if !t.track(c) {
		return nil, net.ErrClosed
	}
	if err := t.handshake(c, p, stream); err != nil {
		t.untrack(c)
		return nil, err
	}
	return c, nil
}

func (t *Transport) handshake(c net.Conn, p *peer, stream uint64) error {
	c.SetDeadline(time.Now().Add(t.cfg.DialTimeout))
	h := hello{version: protocolVersion, stream: stream, from: t.cfg.NodeID, to: p.id, cluster: t.cfg.ClusterID}
	if _, err := c.Write(appendFrame(nil, kindHello, h.encode)); err != nil {
		return err
	}
	kind, body, _, err := readFrame(c, 4096, nil)
	if err != nil {
		return fmt.Errorf("handshake: %w", err)
	}
	switch kind {
	case kindRefused:
		return fmt.Errorf("%w by %s: %s", errRefused, p.addr, body)
	case kindHelloOK:
	default:
		return fmt.Errorf("handshake: unexpected frame kind %d", kind)
	}
	ok, err := decodeHelloOK(body)
	switch {
	case err != nil:
		return fmt.Errorf("handshake: %w", err)
	case ok.version != protocolVersion:
		return fmt.Errorf("%w: %s answered protocol version %d, this node speaks %d", errRefused, p.addr, ok.version, protocolVersion)
	case ok.node != p.id || ok.cluster != t.cfg.ClusterID:
		return fmt.Errorf("%w: %s is node %d of cluster %q, want node %d of cluster %q", errRefused, p.addr, ok.node, ok.cluster, p.id, t.cfg.ClusterID)
	}
	return c.SetDeadline(time.Time{})
}

func (t *Transport) acceptLoop(ln net.Listener) {
	defer func() {
		t.mu.Lock()
		delete(t.lns, ln)
		t.mu.Unlock()
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				t.log.Error("raftnet: accept failed; listener stopped", "node", t.cfg.NodeID, "addr", ln.Addr(), "err", err)
			}
			return
		}
		if !t.track(c) || !t.goOwned(func() { t.serveConn(c) }) {
			c.Close()
			return
		}
	}
}

// serveConn runs one accepted connection: the hello checked (refused with a reason the dialer logs and this
// node logs too), then the raft stream or one snapshot.
func (t *Transport) serveConn(c net.Conn) {
	defer t.untrack(c)
	c.SetDeadline(time.Now().Add(t.cfg.DialTimeout))
	kind, body, _, err := readFrame(c, 4096, nil)
	if err == nil && kind != kindHello {
		err = fmt.Errorf("first frame is kind %d, not a hello", kind)
	}
	var h hello
	if err == nil {
		h, err = decodeHello(body)
	}
	if err != nil {
		t.log.Warn("raftnet: closed connection before handshake", "node", t.cfg.NodeID, "remote", c.RemoteAddr(), "err", err)
		return
	}
	p, reason := t.checkHello(h)
	if reason != "" {
		t.log.Error("raftnet: refused connection", "node", t.cfg.NodeID, "remote", c.RemoteAddr(), "reason", reason)
		c.Write(appendFrame(nil, kindRefused, func(b []byte) []byte { return append(b, reason...) }))
		return
	}
	ok := helloOK{version: protocolVersion, node: t.cfg.NodeID, cluster: t.cfg.ClusterID}
	if _, err := c.Write(appendFrame(nil, kindHelloOK, ok.encode)); err != nil {
		return
	}
	c.SetDeadline(time.Time{})
	if h.stream == streamRaft {
		err := t.runRaftConn(p, c)
		t.log.Info("raftnet: connection lost", "node", t.cfg.NodeID, "peer", p.id, "err", err)
		return
	}
	t.receiveSnapshot(p, c)
}

// checkHello returns the peer h comes from, or why it is refused.
func (t *Transport) checkHello(h hello) (*peer, string) {
	p := t.peers[h.from]
	switch {
	case h.version != protocolVersion:
		return nil, fmt.Sprintf("protocol version %d, node %d speaks %d", h.version, t.cfg.NodeID, protocolVersion)
	case h.cluster != t.cfg.ClusterID:
		return nil, fmt.Sprintf("cluster ID %q, node %d is in cluster %q", h.cluster, t.cfg.NodeID, t.cfg.ClusterID)
	case h.to != t.cfg.NodeID:
		return nil, fmt.Sprintf("addressed to node %d, this is node %d", h.to, t.cfg.NodeID)
	case p == nil:
		return nil, fmt.Sprintf("node %d is not a peer of node %d (peers %v)", h.from, t.cfg.NodeID, slices.Sorted(maps.Keys(t.peers)))
	case h.stream == streamRaft && h.from > t.cfg.NodeID:
		return nil, fmt.Sprintf("node %d dialed a raft stream to node %d; the lower node ID dials", h.from, t.cfg.NodeID)
	case h.stream != streamRaft && h.stream != streamSnapshot:
		return nil, fmt.Sprintf("unknown stream %d", h.stream)
	}
	return p, ""
}

// runRaftConn makes c p's raft connection (replacing and closing an older one: the dialer redials only
// when it lost the old one) and runs it until either direction fails: the calling goroutine reads, a
// writer goroutine it joins writes. Messages still queued when it ends are dropped and their groups told.
func (t *Transport) runRaftConn(p *peer, c net.Conn) error {
	p.mu.Lock()
	old := p.conn
	p.conn = c
	p.mu.Unlock()
	if old != nil {
		old.Close()
	}
	poke(p.notify)
	done := make(chan struct{})
	var werr error
	var wg sync.WaitGroup
	wg.Go(func() {
		werr = t.writeLoop(p, c, done)
		c.Close()
	})
	rerr := t.readLoop(p, c)
	c.Close()
	close(done)
	wg.Wait()
	p.mu.Lock()
	var dropped []replica.Message
	if p.conn == c {
		dropped, p.conn, p.q, p.qBytes = p.q, nil, nil, 0
		p.written.Broadcast()
	}
	p.mu.Unlock()
	t.dropped(p.id, dropped)
	if werr != nil {
		return werr
	}
	return rerr
}

// dropped counts msgs as lost on the way to node to and reports their groups' appends.
func (t *Transport) dropped(to uint64, msgs []replica.Message) {
	if len(msgs) == 0 {
		return
	}
	t.stats.msgsDropped.Add(uint64(len(msgs)))
	var lost []replica.GroupID
	for _, m := range msgs {
		lost = appendLost(lost, m)
	}
	t.reportLost(t.getNode(), to, lost)
}

// writeLoop writes p's queue to c whenever it fills, all of it at once: the heartbeats as one compact
// frame, the other messages in frames of at most MaxFrameBytes.
func (t *Transport) writeLoop(p *peer, c net.Conn, done <-chan struct{}) error {
	var buf []byte
	for {
		select {
		case <-done:
			return nil
		case <-p.notify:
		}
		p.mu.Lock()
		q := p.q
		p.q, p.qBytes, p.writing = nil, 0, len(q) > 0
		p.mu.Unlock()
		if len(q) == 0 {
			continue
		}
		var frames, msgs, hbs uint64
		var tooBig []replica.Message
		buf, frames, msgs, hbs, tooBig = t.encode(buf[:0], q)
		t.dropped(p.id, tooBig)
		c.SetWriteDeadline(time.Now().Add(t.cfg.WriteTimeout))
		n, err := c.Write(buf)
		t.stats.bytesSent.Add(uint64(n))
		p.mu.Lock()
		p.writing = false
		p.written.Broadcast()
		p.mu.Unlock()
		if err != nil {
			t.dropped(p.id, q)
			return err
		}
		t.stats.framesSent.Add(frames)
		t.stats.msgsSent.Add(msgs)
		t.stats.hbCoalesced.Add(hbs)
		if cap(buf) > 4*t.cfg.MaxFrameBytes {
			buf = nil // a burst's buffer is not kept for the idle connection
		}
	}
}

// encode appends q's frames to b and returns them, the counts of frames, messages and coalesced heartbeats,
// and the messages too large for any frame (dropped).
func (t *Transport) encode(b []byte, q []replica.Message) (out []byte, frames, msgs, hbs uint64, tooBig []replica.Message) {
	var beats, rest []replica.Message
	for _, m := range q {
		if !t.cfg.DisableHeartbeatCoalescing && coalescible(m.Msg) {
			beats = append(beats, m)
		} else {
			rest = append(rest, m)
		}
	}
	// Messages first, then the heartbeats: a heartbeat's commit index may cover entries just sent.
	limit := t.cfg.MaxFrameBytes - 32
	sizes := make([]int, len(rest))
	for i, m := range rest {
		sizes[i] = proto.Size(m.Msg)
	}
	for len(rest) > 0 {
		size, n := 0, 0
		for n < len(rest) && size+sizes[n]+20 <= limit {
			size += sizes[n] + 20
			n++
		}
		if n == 0 { // rest[0] alone exceeds a frame
			tooBig = append(tooBig, rest[0])
			t.log.Warn("raftnet: message larger than a frame dropped", "node", t.cfg.NodeID, "group", uint64(rest[0].Group),
				"type", rest[0].Msg.GetType().String(), "bytes", sizes[0], "max_frame_bytes", t.cfg.MaxFrameBytes)
			rest, sizes = rest[1:], sizes[1:]
			continue
		}
		chunk, chunkSizes := rest[:n], sizes[:n]
		b = appendFrame(b, kindMsgs, func(b []byte) []byte { return appendMsgs(b, chunk, chunkSizes) })
		frames++
		msgs += uint64(n)
		rest, sizes = rest[n:], sizes[n:]
	}
	// A heartbeat takes at most 1+10+1+10+10 bytes.
	for per := limit / 32; len(beats) > 0; {
		chunk := beats[:min(per, len(beats))]
		b = appendFrame(b, kindHeartbeats, func(b []byte) []byte { return appendHeartbeats(b, chunk) })
		frames++
		msgs += uint64(len(chunk))
		hbs += uint64(len(chunk))
		beats = beats[len(chunk):]
	}
	return b, frames, msgs, hbs, tooBig
}

// readLoop reads p's frames from c and steps their messages into the node until c fails or a frame is bad
// (the error says which; only this connection is closed).
func (t *Transport) readLoop(p *peer, c net.Conn) error {
	n := t.getNode()
	r := bufio.NewReaderSize(countingReader{c, &t.stats.bytesReceived}, 64<<10)
	var buf []byte
	var out []replica.Message
	for {
		kind, body, nb, err := readFrame(r, t.cfg.MaxFrameBytes, buf)
		buf = nb
		if errors.Is(err, errFrameTooLarge) || errors.Is(err, errFrameCRC) {
			t.log.Warn("raftnet: bad frame; connection closed", "node", t.cfg.NodeID, "peer", p.id, "err", err)
		}
		if err != nil {
			return err
		}
		switch kind {
		case kindMsgs:
			out, err = decodeMsgs(body, p.id, t.cfg.NodeID, out[:0])
		case kindHeartbeats:
			out, err = decodeHeartbeats(body, p.id, t.cfg.NodeID, out[:0])
		default:
			err = fmt.Errorf("%w: frame kind %d on a raft stream", errFrameBody, kind)
		}
		if err != nil {
			t.log.Warn("raftnet: bad frame; connection closed", "node", t.cfg.NodeID, "peer", p.id, "err", err)
			return err
		}
		n.Step(out)
		clear(out) // Step keeps the messages, not the slice: drop the references
		if cap(buf) > 1<<20 {
			buf = nil
		}
	}
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n *atomic.Uint64
}

func (r countingReader) Read(b []byte) (int, error) {
	n, err := r.r.Read(b)
	r.n.Add(uint64(n))
	return n, err
}
