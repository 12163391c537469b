package raftnet

import (
	"bytes"
	"testing"

	"github.com/kawa-broker/kawa/internal/replica"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// FuzzDecodeFrame: any bytes on a connection, read as frames and decoded by kind, never panic and never
// allocate beyond the frame limit; what decodes re-encodes to messages that decode the same (the corpus
// under testdata/fuzz holds one valid frame of each kind and damaged ones).
func FuzzDecodeFrame(f *testing.F) {
	for _, b := range seedFrames() {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bytes.NewReader(b)
		var buf []byte
		for {
			kind, body, nb, err := readFrame(r, 1<<16, buf)
			buf = nb
			if err != nil {
				return
			}
			switch kind {
			case kindHello:
				decodeHello(body)
			case kindHelloOK:
				decodeHelloOK(body)
			case kindMsgs:
				if msgs, err := decodeMsgs(body, 1, 2, nil); err == nil {
					checkRoundTrip(t, msgs, false)
				}
			case kindHeartbeats:
				if msgs, err := decodeHeartbeats(body, 1, 2, nil); err == nil {
					checkRoundTrip(t, msgs, true)
				}
			}
		}
	})
}

// checkRoundTrip encodes msgs again (as heartbeats or as messages) and checks they decode equal.
func checkRoundTrip(t *testing.T, msgs []replica.Message, heartbeats bool) {
	var frame []byte
	if heartbeats {
		frame = appendFrame(nil, kindHeartbeats, func(b []byte) []byte { return appendHeartbeats(b, msgs) })
	} else {
		sizes := make([]int, len(msgs))
		for i, m := range msgs {
			sizes[i] = proto.Size(m.Msg)
		}
		frame = appendFrame(nil, kindMsgs, func(b []byte) []byte { return appendMsgs(b, msgs, sizes) })
	}
	kind, body, _, err := readFrame(bytes.NewReader(frame), len(frame), nil)
	if err != nil {
		t.Fatalf("re-encoded frame unreadable: %v", err)
	}
	var again []replica.Message
	if kind == kindHeartbeats {
		again, err = decodeHeartbeats(body, 1, 2, nil)
	} else {
		again, err = decodeMsgs(body, 1, 2, nil)
	}
	if err != nil || len(again) != len(msgs) {
		t.Fatalf("re-encoded %d messages decode to %d: %v", len(msgs), len(again), err)
	}
	for i := range msgs {
		if again[i].Group != msgs[i].Group || !proto.Equal(again[i].Msg, msgs[i].Msg) {
			t.Fatalf("message %d: %v then %v", i, msgs[i], again[i])
		}
	}
}

// seedFrames are the corpus's valid frames: one of each kind between nodes 1 and 2.
func seedFrames() [][]byte {
	hb := replica.Message{Group: 3, Msg: &pb.Message{Type: pb.MsgHeartbeat.Enum(), From: new(uint64(1)), To: new(uint64(2)), Term: new(uint64(4)), Commit: new(uint64(9))}}
	resp := replica.Message{Group: 1 << 33, Msg: &pb.Message{Type: pb.MsgHeartbeatResp.Enum(), From: new(uint64(1)), To: new(uint64(2)), Term: new(uint64(4))}}
	app := replica.Message{Group: 7, Msg: &pb.Message{Type: pb.MsgApp.Enum(), From: new(uint64(1)), To: new(uint64(2)), Term: new(uint64(2)),
		Index: new(uint64(5)), LogTerm: new(uint64(2)), Commit: new(uint64(5)), Entries: []*pb.Entry{{Index: new(uint64(6)), Term: new(uint64(2)), Data: []byte("batch")}}}}
	vote := replica.Message{Group: 7, Msg: &pb.Message{Type: pb.MsgPreVote.Enum(), From: new(uint64(1)), To: new(uint64(2)), Term: new(uint64(3)), Index: new(uint64(6)), LogTerm: new(uint64(2))}}
	msgs := []replica.Message{app, vote}
	sizes := []int{proto.Size(app.Msg), proto.Size(vote.Msg)}
	return [][]byte{
		appendFrame(nil, kindHello, hello{version: protocolVersion, stream: streamRaft, from: 1, to: 2, cluster: "c"}.encode),
		appendFrame(nil, kindHelloOK, helloOK{version: protocolVersion, node: 2, cluster: "c"}.encode),
		appendFrame(nil, kindMsgs, func(b []byte) []byte { return appendMsgs(b, msgs, sizes) }),
		appendFrame(nil, kindHeartbeats, func(b []byte) []byte { return appendHeartbeats(b, []replica.Message{hb, resp}) }),
	}
}
