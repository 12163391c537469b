package replica

import (
	"testing"
	"testing/synctest"
	"time"

	"go.etcd.io/raft/v3/tracker"
)

// TestReportUnreachable: a transport's report that a follower missed its appends moves the leader's view of
// that follower from pipelining appends (StateReplicate) to probing it (StateProbe), in the next cycle;
// reports for unknown groups are ignored.
func TestReportUnreachable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nodes, sms := startCluster(t, 1, 1, 10*time.Millisecond)
		var lead uint64
		for lead == 0 {
			time.Sleep(10 * time.Millisecond)
			lead = sms[1][0].leader()
		}
		must(t, nodes[lead].Propose(0, []byte("x")))
		for id := uint64(1); id <= 3; id++ {
			<-sms[id][0].applied
		}
		follower := lead%3 + 1
		state := func() tracker.StateType {
			s := nodes[lead]
			s.cycleMu.Lock()
			defer s.cycleMu.Unlock()
			return s.groups[0].rn.Status().Progress[follower].State
		}
		synctest.Wait()
		if st := state(); st != tracker.StateReplicate {
			t.Fatalf("follower %d in %v before the report, want StateReplicate", follower, st)
		}
		nodes[lead].ReportUnreachable(follower, []GroupID{0, 42})
		synctest.Wait()
		if st := state(); st != tracker.StateProbe {
			t.Fatalf("follower %d in %v after ReportUnreachable, want StateProbe", follower, st)
		}
	})
}
