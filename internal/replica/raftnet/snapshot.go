package raftnet

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/kawa-broker/kawa/internal/replica"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// SnapshotStore is the storage side of snapshot streaming, implemented over the partition log (segments plus
// producer and transaction state; issue 16 item 3). raft's MsgSnap carries a Snapshot whose Data is the
// store's own small descriptor (what the payload is: segment names and sizes, state versions); the bulk
// payload never enters raft or a raft frame. The sender's Transport streams it on a connection of its own,
// in frames of ChunkBytes, so a large snapshot never waits in, or holds up, the raft connection's queue;
// TCP's flow control is the back-pressure (the sender reads from OpenSnapshot only as fast as the
// receiver's ReceiveSnapshot reads).
type SnapshotStore interface {
	// OpenSnapshot returns the payload of msg, a MsgSnap of group going to node msg.To. The Transport
	// reads it to io.EOF (or until the stream fails) and closes it.
	OpenSnapshot(group replica.GroupID, msg *pb.Message) (io.ReadCloser, error)
	// ReceiveSnapshot stores the payload of msg, a MsgSnap of group from node msg.From, read from r to
	// io.EOF (r fails with io.ErrUnexpectedEOF or a network error if the stream breaks). nil means the
	// payload is durable: the Transport then steps msg into raft and the sender's raft hears
	// SnapshotFinish. An error (returned to the sender and logged on both nodes) makes it SnapshotFailure.
	ReceiveSnapshot(group replica.GroupID, msg *pb.Message, r io.Reader) error
}

// sendSnapshot starts streaming m (a MsgSnap) to p, one snapshot per peer at a time: a second one while the
// first streams is refused to raft at once (SnapshotFailure), and raft sends it again later.
func (t *Transport) sendSnapshot(n Node, p *peer, m replica.Message) {
	fail := func(err error) {
		t.stats.snapsFailed.Add(1)
		t.log.Warn("raftnet: snapshot not sent", "node", t.cfg.NodeID, "peer", p.id, "group", uint64(m.Group),
			"index", m.Msg.GetSnapshot().GetMetadata().GetIndex(), "err", err)
		n.ReportSnapshot(m.Group, p.id, raft.SnapshotFailure)
	}
	switch {
	case t.cfg.Snapshots == nil:
		fail(errors.New("this node has no snapshot store"))
		return
	case !p.snapBusy.CompareAndSwap(false, true):
		fail(errors.New("another snapshot to this peer is streaming"))
		return
	}
	started := t.goOwned(func() {
		defer p.snapBusy.Store(false)
		if err := t.streamSnapshot(p, m); err != nil {
			fail(err)
			return
		}
		t.stats.snapsSent.Add(1)
		n.ReportSnapshot(m.Group, p.id, raft.SnapshotFinish)
	})
	if !started {
		p.snapBusy.Store(false)
		fail(net.ErrClosed)
	}
}

// streamSnapshot sends one snapshot on a new connection: a header frame (group, the MsgSnap), the payload
// in chunk frames, an end frame; then waits for the receiver's result.
func (t *Transport) streamSnapshot(p *peer, m replica.Message) error {
	c, err := t.dial(p, streamSnapshot)
	if err != nil {
		return err
	}
	defer t.untrack(c)
	src, err := t.cfg.Snapshots.OpenSnapshot(m.Group, m.Msg)
	if err != nil {
		return fmt.Errorf("open snapshot: %w", err)
	}
	defer src.Close()
	write := func(f []byte) error {
		c.SetWriteDeadline(time.Now().Add(t.cfg.SnapshotTimeout))
		n, err := c.Write(f)
		t.stats.bytesSent.Add(uint64(n))
		t.stats.framesSent.Add(1)
		return err
	}
	hdr := appendFrame(nil, kindSnapHeader, func(b []byte) []byte {
		b = binary.AppendUvarint(b, uint64(m.Group))
		b, _ = proto.MarshalOptions{}.MarshalAppend(b, m.Msg)
		return b
	})
	if len(hdr) > t.cfg.MaxFrameBytes {
		return fmt.Errorf("MsgSnap of %d bytes exceeds MaxFrameBytes %d (the payload belongs in the stream, not Snapshot.Data)", len(hdr), t.cfg.MaxFrameBytes)
	}
	if err := write(hdr); err != nil {
		return err
	}
	chunk := make([]byte, t.cfg.ChunkBytes)
	var frame []byte
	for {
		n, rerr := io.ReadFull(src, chunk)
		if n > 0 {
			frame = appendFrame(frame[:0], kindSnapChunk, func(b []byte) []byte { return append(b, chunk[:n]...) })
			if err := write(frame); err != nil {
				return err
			}
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			return fmt.Errorf("read snapshot: %w", rerr)
		}
	}
	if err := write(appendFrame(nil, kindSnapEnd, nil)); err != nil {
		return err
	}
	c.SetReadDeadline(time.Now().Add(t.cfg.SnapshotTimeout))
	kind, body, _, err := readFrame(c, 64<<10, nil)
	switch {
	case err != nil:
		return fmt.Errorf("snapshot result: %w", err)
	case kind != kindSnapResult:
		return fmt.Errorf("snapshot result: unexpected frame kind %d", kind)
	case len(body) > 0:
		return fmt.Errorf("node %d did not store the snapshot: %s", p.id, body)
	}
	return nil
}

// receiveSnapshot reads one snapshot stream from p on c into the SnapshotStore, steps the MsgSnap into the
// node when the store has it, and answers the result.
func (t *Transport) receiveSnapshot(p *peer, c net.Conn) {
	// One inbound snapshot per peer at a time, as the sender sends them: a second stream is a confused or
	// hostile peer and must not tie up more of this node's memory and disk bandwidth.
	if !p.snapRecv.CompareAndSwap(false, true) {
		t.log.Warn("raftnet: second snapshot stream from one peer refused", "node", t.cfg.NodeID, "peer", p.id)
		c.Write(appendFrame(nil, kindSnapResult, func(b []byte) []byte { return append(b, "another snapshot from this node is streaming"...) }))
		return
	}
	defer p.snapRecv.Store(false)
	cr := &chunkReader{t: t, c: c, r: bufio.NewReaderSize(countingReader{c, &t.stats.bytesReceived}, 64<<10)}
	g, msg, err := cr.header(p)
	if err == nil && t.cfg.Snapshots == nil {
		err = fmt.Errorf("node %d has no snapshot store", t.cfg.NodeID)
	}
	if err == nil {
		err = t.cfg.Snapshots.ReceiveSnapshot(g, msg, cr)
		if err == nil && !cr.done {
			err = errors.New("the snapshot store returned before the end of the payload")
		}
	}
	if cr.err != nil && !cr.done { // the stream itself broke: nobody to answer
		t.log.Warn("raftnet: snapshot stream broken", "node", t.cfg.NodeID, "peer", p.id, "group", uint64(g), "err", cr.err)
		return
	}
	reason := ""
	if err != nil {
		reason = err.Error()
		t.log.Warn("raftnet: snapshot refused", "node", t.cfg.NodeID, "peer", p.id, "group", uint64(g), "err", err)
	} else {
		t.getNode().Step([]replica.Message{{Group: g, Msg: msg}})
	}
	c.SetWriteDeadline(time.Now().Add(t.cfg.WriteTimeout))
	c.Write(appendFrame(nil, kindSnapResult, func(b []byte) []byte { return append(b, reason...) }))
}

// chunkReader is the payload of one snapshot stream as an io.Reader: chunk frames up to the end frame.
type chunkReader struct {
	t    *Transport
	c    net.Conn
	r    *bufio.Reader
	buf  []byte
	cur  []byte // unread part of the current chunk (aliases buf)
	done bool   // the end frame was read
	err  error  // sticky
}

func (cr *chunkReader) frame(limit int) (byte, []byte, error) {
	cr.c.SetReadDeadline(time.Now().Add(cr.t.cfg.SnapshotTimeout))
	kind, body, nb, err := readFrame(cr.r, limit, cr.buf)
	cr.buf = nb
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return kind, body, err
}

// header reads the stream's first frame: the group and its MsgSnap, which must come from p to this node.
func (cr *chunkReader) header(p *peer) (replica.GroupID, *pb.Message, error) {
	kind, body, err := cr.frame(cr.t.cfg.MaxFrameBytes)
	if err == nil && kind != kindSnapHeader {
		err = fmt.Errorf("%w: frame kind %d, want a snapshot header", errFrameBody, kind)
	}
	if err != nil {
		cr.err = err
		return 0, nil, err
	}
	r := bodyReader{b: body}
	g := replica.GroupID(r.uvarint())
	msg := &pb.Message{}
	if r.err != nil || proto.Unmarshal(r.b, msg) != nil {
		cr.err = fmt.Errorf("%w: snapshot header", errFrameBody)
		return g, nil, cr.err
	}
	if err := checkPeerMsg(msg, p.id, cr.t.cfg.NodeID); err != nil || msg.GetType() != pb.MsgSnap {
		cr.err = fmt.Errorf("%w: snapshot header holds %v %d→%d", errFrameBody, msg.GetType(), msg.GetFrom(), msg.GetTo())
		return g, nil, cr.err
	}
	return g, msg, nil
}

func (cr *chunkReader) Read(b []byte) (int, error) {
	for len(cr.cur) == 0 {
		if cr.done {
			return 0, io.EOF
		}
		if cr.err != nil {
			return 0, cr.err
		}
		kind, body, err := cr.frame(cr.t.cfg.ChunkBytes + 16)
		switch {
		case err != nil:
			cr.err = err
		case kind == kindSnapChunk:
			cr.cur = body
		case kind == kindSnapEnd:
			cr.done = true
		default:
			cr.err = fmt.Errorf("%w: frame kind %d in a snapshot stream", errFrameBody, kind)
		}
	}
	n := copy(b, cr.cur)
	cr.cur = cr.cur[n:]
	return n, nil
}
