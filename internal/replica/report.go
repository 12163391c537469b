package replica

import (
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// ReportUnreachable tells each of groups that its last messages to node to were lost by the transport (a full
// send queue, a broken or missing connection). A leader then stops sending appends optimistically to that
// follower and probes it (raft's StateProbe) until it answers. Taken in the next cycle; unknown or failed
// groups are ignored.
func (s *Scheduler) ReportUnreachable(to uint64, groups []GroupID) {
	s.report(groups, func() *pb.Message { return &pb.Message{Type: pb.MsgUnreachable.Enum(), From: new(to)} })
}

// ReportSnapshot tells group id how the snapshot its raft sent to node to ended: raft.SnapshotFinish when the
// follower stored it, raft.SnapshotFailure when the stream broke or the follower refused it (the leader then
// probes the follower again and sends a new snapshot if it still needs one). Taken in the next cycle.
func (s *Scheduler) ReportSnapshot(id GroupID, to uint64, status raft.SnapshotStatus) {
	s.report([]GroupID{id}, func() *pb.Message {
		return &pb.Message{Type: pb.MsgSnapStatus.Enum(), From: new(to), Reject: new(status == raft.SnapshotFailure)}
	})
}

func (s *Scheduler) report(groups []GroupID, m func() *pb.Message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range groups {
		if g := s.groups[id]; g != nil && g.err == nil {
			g.reports = append(g.reports, m())
			s.enqueueLocked(g)
		}
	}
}

func snapshotStatus(rejected bool) raft.SnapshotStatus {
	if rejected {
		return raft.SnapshotFailure
	}
	return raft.SnapshotFinish
}
