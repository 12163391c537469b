package raftnet

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/kawa-broker/kawa/internal/batch"
	"github.com/kawa-broker/kawa/internal/replica"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Frame layout (big-endian): length uint32 (bytes after the 8-byte header), CRC-32C uint32 of those bytes, then
// kind uint8 and the kind's body. A frame is read whole into memory, so its length is checked against the
// reader's limit before anything is allocated.
const frameHeader = 8

// Frame kinds.
const (
	kindHello      = 1 // dialer → acceptor: magic, version, stream, from, to, cluster ID
	kindHelloOK    = 2 // acceptor → dialer: version, node ID, cluster ID
	kindRefused    = 3 // acceptor → dialer: why, as text; the connection is closed after it
	kindMsgs       = 4 // raft messages: count, then per message group, length, proto bytes (uvarints)
	kindHeartbeats = 5 // coalesced MsgHeartbeat/MsgHeartbeatResp: count, then group, flags, term[, commit]
	kindSnapHeader = 6 // snapshot stream: group, then the MsgSnap's proto bytes
	kindSnapChunk  = 7 // snapshot stream: a piece of the payload
	kindSnapEnd    = 8 // snapshot stream: the payload is complete
	kindSnapResult = 9 // snapshot stream, receiver → sender: empty when stored, else why not
)

// Streams a hello opens.
const (
	streamRaft     = 1 // the one connection of a node pair, both directions, all groups
	streamSnapshot = 2 // one snapshot, sender → receiver, then the receiver's result
)

// helloMagic opens every hello, so a stray client (a Kafka client, an HTTP probe) on the raft port is told
// apart from a peer of another version.
const helloMagic = "KAWARAFT"

// protocolVersion is the one version this build speaks; a hello with another is refused, naming both.
const protocolVersion = 1

// Errors of frame decoding; each closes the connection it came on.
var (
	errFrameTooLarge = errors.New("raftnet: frame larger than the limit")
	errFrameCRC      = errors.New("raftnet: frame CRC mismatch")
	errFrameBody     = errors.New("raftnet: malformed frame body")
)

// appendFrame appends a frame of kind whose body encode appends, and returns the result.
func appendFrame(b []byte, kind byte, encode func([]byte) []byte) []byte {
	start := len(b)
	b = append(b, make([]byte, frameHeader)...)
	b = append(b, kind)
	if encode != nil {
		b = encode(b)
	}
	body := b[start+frameHeader:]
	binary.BigEndian.PutUint32(b[start:], uint32(len(body)))
	binary.BigEndian.PutUint32(b[start+4:], batch.Checksum(body))
	return b
}

// readFrame reads one frame from r and returns its kind and body (the body aliases buf when it fits). A
// frame longer than limit fails with errFrameTooLarge before its body is read; io.EOF means r ended between
// frames, io.ErrUnexpectedEOF inside one.
func readFrame(r io.Reader, limit int, buf []byte) (kind byte, body, newBuf []byte, err error) {
	var h [frameHeader]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, buf, err
	}
	n := binary.BigEndian.Uint32(h[:])
	if n == 0 || uint64(n) > uint64(limit) {
		return 0, nil, buf, fmt.Errorf("%w: %d bytes, limit %d", errFrameTooLarge, n, limit)
	}
	if cap(buf) < int(n) {
		buf = make([]byte, n)
	}
	b := buf[:n]
	if _, err := io.ReadFull(r, b); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, buf, err
	}
	if batch.Checksum(b) != binary.BigEndian.Uint32(h[4:]) {
		return 0, nil, buf, errFrameCRC
	}
	return b[0], b[1:], buf, nil
}

// bodyReader reads a frame body's fields; the first short or bad field makes err sticky.
type bodyReader struct {
	b   []byte
	err error
}

func (r *bodyReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errFrameBody
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *bodyReader) bytes(n uint64) []byte {
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.err = errFrameBody
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *bodyReader) end() error {
	if r.err == nil && len(r.b) != 0 {
		r.err = errFrameBody
	}
	return r.err
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// hello is the first frame on every connection.
type hello struct {
	version  uint64
	stream   uint64
	from, to uint64
	cluster  string
}

func (h hello) encode(b []byte) []byte {
	b = append(b, helloMagic...)
	b = binary.AppendUvarint(b, h.version)
	b = binary.AppendUvarint(b, h.stream)
	b = binary.AppendUvarint(b, h.from)
	b = binary.AppendUvarint(b, h.to)
	return appendString(b, h.cluster)
}

func decodeHello(body []byte) (hello, error) {
	r := bodyReader{b: body}
	if string(r.bytes(uint64(len(helloMagic)))) != helloMagic {
		return hello{}, errors.New("raftnet: not a Kawa raft peer (no hello magic)")
	}
	h := hello{version: r.uvarint(), stream: r.uvarint(), from: r.uvarint(), to: r.uvarint()}
	h.cluster = string(r.bytes(r.uvarint()))
	return h, r.end()
}

// helloOK answers an accepted hello.
type helloOK struct {
	version uint64
	node    uint64
	cluster string
}

func (h helloOK) encode(b []byte) []byte {
	b = binary.AppendUvarint(b, h.version)
	b = binary.AppendUvarint(b, h.node)
	return appendString(b, h.cluster)
}

func decodeHelloOK(body []byte) (helloOK, error) {
	r := bodyReader{b: body}
	h := helloOK{version: r.uvarint(), node: r.uvarint()}
	h.cluster = string(r.bytes(r.uvarint()))
	return h, r.end()
}

// coalescible reports whether m is a heartbeat or heartbeat response whose every field the compact form
// carries: a ReadIndex context, or any field raft may add later, sends it as a full message instead.
func coalescible(m *pb.Message) bool {
	switch m.GetType() {
	case pb.MsgHeartbeat, pb.MsgHeartbeatResp:
	default:
		return false
	}
	return len(m.GetContext()) == 0 && len(m.GetEntries()) == 0 && m.GetIndex() == 0 && m.GetLogTerm() == 0 &&
		m.GetVote() == 0 && !m.GetReject() && m.GetRejectHint() == 0 && m.Snapshot == nil &&
		len(m.GetResponses()) == 0 && (m.GetType() == pb.MsgHeartbeat || m.GetCommit() == 0) &&
		len(m.ProtoReflect().GetUnknown()) == 0
}

const hbResp = 1 // heartbeat flags: a MsgHeartbeatResp (no commit follows)

// appendHeartbeats encodes coalescible messages (all between the connection's two nodes) as one
// kindHeartbeats body: per heartbeat about 4-8 bytes instead of a framed protobuf message.
func appendHeartbeats(b []byte, hbs []replica.Message) []byte {
	b = binary.AppendUvarint(b, uint64(len(hbs)))
	for _, m := range hbs {
		b = binary.AppendUvarint(b, uint64(m.Group))
		if m.Msg.GetType() == pb.MsgHeartbeatResp {
			b = append(b, hbResp)
			b = binary.AppendUvarint(b, m.Msg.GetTerm())
			continue
		}
		b = append(b, 0)
		b = binary.AppendUvarint(b, m.Msg.GetTerm())
		b = binary.AppendUvarint(b, m.Msg.GetCommit())
	}
	return b
}

// decodeHeartbeats expands a kindHeartbeats body into raft messages from node from to node to, appended to
// out.
func decodeHeartbeats(body []byte, from, to uint64, out []replica.Message) ([]replica.Message, error) {
	r := bodyReader{b: body}
	n := r.uvarint()
	if n > uint64(len(body)) { // every heartbeat takes at least 3 bytes: no count beyond the body's size
		return out, errFrameBody
	}
	for range n {
		g := replica.GroupID(r.uvarint())
		flags := r.bytes(1)
		if r.err != nil {
			break
		}
		m := &pb.Message{From: new(from), To: new(to), Term: new(r.uvarint())}
		switch flags[0] {
		case 0:
			m.Type, m.Commit = pb.MsgHeartbeat.Enum(), new(r.uvarint())
		case hbResp:
			m.Type = pb.MsgHeartbeatResp.Enum()
		default:
			r.err = errFrameBody
		}
		out = append(out, replica.Message{Group: g, Msg: m})
	}
	return out, r.end()
}

// appendMsgs encodes msgs as a kindMsgs body; sizes[i] is proto.Size(msgs[i].Msg).
func appendMsgs(b []byte, msgs []replica.Message, sizes []int) []byte {
	b = binary.AppendUvarint(b, uint64(len(msgs)))
	for i, m := range msgs {
		b = binary.AppendUvarint(b, uint64(m.Group))
		b = binary.AppendUvarint(b, uint64(sizes[i]))
		// UseCachedSize: proto.Size just computed it. Marshalling a message of raft's types cannot fail.
		b, _ = proto.MarshalOptions{UseCachedSize: true}.MarshalAppend(b, m.Msg)
	}
	return b
}

// decodeMsgs decodes a kindMsgs body whose messages must all come from node from to node to, appended to
// out. A message of a type raft keeps local (MsgHup, MsgUnreachable, MsgSnapStatus, ...), of another node
// pair, or a MsgSnap (snapshots come on their own stream) is an error: a peer speaks only for itself.
func decodeMsgs(body []byte, from, to uint64, out []replica.Message) ([]replica.Message, error) {
	r := bodyReader{b: body}
	n := r.uvarint()
	if n > uint64(len(body)) {
		return out, errFrameBody
	}
	for range n {
		g := replica.GroupID(r.uvarint())
		b := r.bytes(r.uvarint())
		if r.err != nil {
			break
		}
		m := &pb.Message{}
		if err := proto.Unmarshal(b, m); err != nil {
			return out, fmt.Errorf("%w: group %d: %v", errFrameBody, g, err)
		}
		if err := checkPeerMsg(m, from, to); err != nil {
			return out, fmt.Errorf("group %d: %w", g, err)
		}
		if m.GetType() == pb.MsgSnap {
			return out, fmt.Errorf("%w: group %d: MsgSnap outside a snapshot stream", errFrameBody, g)
		}
		out = append(out, replica.Message{Group: g, Msg: m})
	}
	return out, r.end()
}

// checkPeerMsg refuses a message a peer may not send: raft's local types, or one between other nodes.
func checkPeerMsg(m *pb.Message, from, to uint64) error {
	if raft.IsLocalMsg(m.GetType()) {
		return fmt.Errorf("%w: local message type %v from the network", errFrameBody, m.GetType())
	}
	if m.GetFrom() != from || m.GetTo() != to {
		return fmt.Errorf("%w: message %d→%d on the connection %d→%d", errFrameBody, m.GetFrom(), m.GetTo(), from, to)
	}
	return nil
}
