package replica

import (
	"log/slog"
	"testing"

	"github.com/kawa-broker/kawa/internal/vfs"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// FuzzStep: any bytes a peer sends, decoded as a raft message and stepped into a group, never crash the node:
// raft refuses the message, or panics on it and the scheduler fails that group alone.
func FuzzStep(f *testing.F) {
	seeds := []*pb.Message{
		{Type: pb.MsgHeartbeat.Enum(), From: new(uint64(2)), To: new(uint64(1)), Term: new(uint64(3)), Commit: new(uint64(9))},
		{Type: pb.MsgApp.Enum(), From: new(uint64(2)), To: new(uint64(1)), Term: new(uint64(2)), Index: new(uint64(0)), LogTerm: new(uint64(0)),
			Entries: []*pb.Entry{{Index: new(uint64(1)), Term: new(uint64(2)), Data: []byte("x")}}, Commit: new(uint64(1))},
		{Type: pb.MsgVote.Enum(), From: new(uint64(3)), To: new(uint64(1)), Term: new(uint64(4)), Index: new(uint64(7)), LogTerm: new(uint64(4))},
		{Type: pb.MsgSnap.Enum(), From: new(uint64(2)), To: new(uint64(1)), Term: new(uint64(2)), Snapshot: &pb.Snapshot{Metadata: &pb.SnapshotMetadata{Index: new(uint64(5)), Term: new(uint64(1))}}},
	}
	for _, m := range seeds {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var m pb.Message
		if proto.Unmarshal(b, &m) != nil {
			return
		}
		fs := vfs.NewMem()
		s, err := New(Config{NodeID: 1, FS: fs, Dir: "/r", Transport: countTransport{new(int)}, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		lg, err := OpenFileLog(fs, "/r/g")
		if err != nil {
			t.Fatal(err)
		}
		defer lg.Close()
		if err := s.AddGroup(1, lg, []uint64{1, 2, 3}, &recSM{applied: make(chan string, 64)}); err != nil {
			t.Fatal(err)
		}
		s.Step([]Message{{Group: 1, Msg: &m}})
		for s.cycle() {
		}
		if s.Err() != nil {
			t.Fatalf("node failed: %v", s.Err())
		}
		if gerr := s.GroupErr(1); (gerr != nil) != (s.Propose(1, []byte("p")) != nil) {
			t.Fatalf("group error %v but Propose disagrees", gerr)
		}
	})
}
