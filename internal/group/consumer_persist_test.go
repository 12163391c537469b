package group

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// restart replaces e's coordinator with one loaded from recs (the whole log unless given), as a
// broker restart does.
func (e *cgEnv) restart(recs ...Record) {
	e.t.Helper()
	e.c.Close()
	if recs == nil {
		recs = e.s.records()
	}
	e.c = New(e.cfg, e.s)
	e.t.Cleanup(e.c.Close)
	if err := e.c.Load(recs); err != nil {
		e.t.Fatalf("Load: %v", err)
	}
}

// snapshot is ConsumerGroupDescribe of g in one line: group and target epochs, then per member its
// epoch, current and target partitions.
func (e *cgEnv) snapshot() string {
	e.t.Helper()
	r := kmsg.NewPtrConsumerGroupDescribeRequest()
	r.Groups = []string{"g"}
	dg := e.c.ConsumerGroupDescribe(context.Background(), r).Groups[0]
	if dg.ErrorCode != 0 {
		return kerr.ErrorForCode(dg.ErrorCode).Error()
	}
	flat := func(a kmsg.Assignment) []int32 {
		var out []int32
		for _, t := range a.TopicPartitions {
			out = append(out, t.Partitions...)
		}
		return out
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s epoch %d target %d", dg.State, dg.Epoch, dg.AssignmentEpoch)
	for _, m := range dg.Members {
		fmt.Fprintf(&b, "; %s@%d %v->%v", m.MemberID, m.MemberEpoch, flat(m.Assignment), flat(m.TargetAssignment))
	}
	return b.String()
}

// compacted is what log compaction would leave of recs: the latest record per key, and no key whose
// latest record is a tombstone.
func compacted(recs []Record) []Record {
	last := map[string]int{}
	for i, r := range recs {
		last[string(r.Key)] = i
	}
	var out []Record
	for i, r := range recs {
		if last[string(r.Key)] == i && r.Value != nil {
			out = append(out, r)
		}
	}
	return out
}

// A restart mid-reconciliation resumes the same group epoch, member epochs, assignments and
// pending revocations, from the whole log and from its compacted form alike: b still gets nothing
// until a reports the revoked partitions released (no double ownership), and both keep heartbeating
// with their epochs, never FENCED_MEMBER_EPOCH.
func TestConsumerGroupSurvivesRestart(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		e := newCGEnv(t)
		e.want(e.hb("a", 0, nil, nil), 0, 1, []int32{0, 1, 2, 3})
		e.want(e.hb("b", 0, nil, nil), 0, 2, []int32{})
		e.want(e.hb("a", 1, []int32{0, 1, 2, 3}, nil), 0, 1, []int32{0, 1}) // revoking 2, 3
		before := e.snapshot()
		const want = "Reconciling epoch 2 target 2; a@1 [0 1]->[0 1]; b@2 []->[2 3]"
		if before != want {
			t.Fatalf("before restart: %s\nwant %s", before, want)
		}
		full := e.s.records()
		for _, recs := range [][]Record{full, compacted(full)} {
			e.restart(recs...)
			if got := e.snapshot(); got != before {
				t.Fatalf("after restart from %d records: %s\nwant %s", len(recs), got, before)
			}
			g := e.c.groups["g"]
			if code := g.validateConsumerCommit("a", 1, []topicPartition{{"t", 2}}); code != 0 {
				t.Errorf("a's commit of a partition it is revoking: %s", kerr.ErrorForCode(code))
			}
			if o := g.cg.owner[topicPartition{"t", 2}]; o != "a" {
				t.Errorf("t/2 held by %q after restart, want a (still revoking)", o)
			}
		}
		// The first heartbeat after a restart carries the assignment again (the client may have
		// missed the last one).
		e.want(e.hb("b", 2, []int32{}, nil), 0, 2, []int32{})         // a has not released 2, 3
		e.want(e.hb("a", 1, []int32{0, 1}, nil), 0, 2, []int32{0, 1}) // released: epoch 2
		e.want(e.hb("b", 2, []int32{}, nil), 0, 2, []int32{2, 3})     // now b gets them
		e.restart()
		if got, want := e.snapshot(), "Stable epoch 2 target 2; a@2 [0 1]->[0 1]; b@2 [2 3]->[2 3]"; got != want {
			t.Fatalf("stable group after restart: %s\nwant %s", got, want)
		}
		e.want(e.hb("a", 2, []int32{0, 1}, nil), 0, 2, []int32{0, 1})
		e.want(e.hb("b", 2, []int32{2, 3}, nil), 0, 2, []int32{2, 3})
		// A leave is tombstoned: after a restart the member is unknown and its partitions moved.
		e.want(e.hb("a", -1, nil, nil), 0, -1, nil)
		e.restart()
		e.want(e.hb("a", 2, nil, nil), kerr.UnknownMemberID.Code, 0, nil)
		e.want(e.hb("b", 2, []int32{2, 3}, nil), 0, 3, []int32{0, 1, 2, 3})
		e.restart(compacted(e.s.records())...)
		if got, want := e.snapshot(), "Stable epoch 3 target 3; b@3 [0 1 2 3]->[0 1 2 3]"; got != want {
			t.Fatalf("after a left and a restart: %s\nwant %s", got, want)
		}
	})
}

// A member whose join answer was lost in a crash (the records were stored, the broker died before
// the client read the answer) rejoins with epoch 0 under the same member ID after the restart. As
// in Kafka since KAFKA-19233 it keeps its place: the group epoch, its member epoch and the pending
// reconciliation stay as stored, and the answer carries its whole assignment. Before, the rejoin
// removed and re-added the member, bumping the group epoch twice (2 -> 4), which is what
// cmd/kawa's TestConsumerGroupSIGKILLMidReconciliation saw about one run in five.
func TestConsumerGroupRejoinAfterRestartKeepsEpochs(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		e := newCGEnv(t)
		e.want(e.hb("a", 0, nil, nil), 0, 1, []int32{0, 1, 2, 3})
		e.want(e.hb("a", 1, []int32{0, 1, 2, 3}, nil), 0, 1, nil)
		e.want(e.hb("b", 0, []int32{}, nil), 0, 2, []int32{}) // the answer the crash loses
		const reconciling = "Reconciling epoch 2 target 2; a@1 [0 1 2 3]->[0 1]; b@2 []->[2 3]"
		if got := e.snapshot(); got != reconciling {
			t.Fatalf("before the restart: %s\nwant %s", got, reconciling)
		}
		e.restart()
		e.want(e.hb("b", 0, []int32{}, nil), 0, 2, []int32{}) // b's retried join: same epoch, a still holds 2, 3
		if got := e.snapshot(); got != reconciling {
			t.Fatalf("after b's rejoin: %s\nwant %s", got, reconciling)
		}
		e.want(e.hb("a", 1, []int32{0, 1, 2, 3}, nil), 0, 1, []int32{0, 1}) // revoke 2, 3
		e.want(e.hb("a", 1, []int32{0, 1}, nil), 0, 2, nil)                 // released
		e.want(e.hb("b", 2, []int32{}, nil), 0, 2, []int32{2, 3})
		// A Stable member that rejoins (it gave up its partitions) gets them back at its epoch,
		// and so does it after another restart.
		e.want(e.hb("a", 0, []int32{}, nil), 0, 2, []int32{0, 1})
		e.restart()
		e.want(e.hb("a", 0, []int32{}, nil), 0, 2, []int32{0, 1})
		if got, want := e.snapshot(), "Stable epoch 2 target 2; a@2 [0 1]->[0 1]; b@2 [2 3]->[2 3]"; got != want {
			t.Fatalf("after a's rejoins: %s\nwant %s", got, want)
		}
		if code := e.c.groups["g"].validateConsumerCommit("a", 2, []topicPartition{{"t", 0}}); code != 0 {
			t.Errorf("a's commit at its kept epoch: %s", kerr.ErrorForCode(code))
		}
	})
}

// Keep-alive heartbeats that change nothing write nothing.
func TestConsumerGroupKeepAliveWritesNothing(t *testing.T) {
	t.Parallel()
	e := newCGEnv(t)
	e.want(e.hb("a", 0, nil, nil), 0, 1, []int32{0, 1, 2, 3})
	e.want(e.hb("a", 1, []int32{0, 1, 2, 3}, nil), 0, 1, nil)
	n := len(e.s.records())
	for range 5 {
		e.want(e.hb("a", 1, []int32{0, 1, 2, 3}, nil), 0, 1, nil)
	}
	if got := len(e.s.records()); got != n {
		t.Errorf("keep-alive heartbeats wrote %d records", got-n)
	}
}

// A heartbeat whose records cannot be stored is answered COORDINATOR_NOT_AVAILABLE; the next one
// stores the state again, so a restart sees what the members were told.
func TestConsumerGroupStoreFailure(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		e := newCGEnv(t)
		e.want(e.hb("a", 0, nil, nil), 0, 1, []int32{0, 1, 2, 3})
		e.s.setFail(errDisk)
		e.want(e.hb("b", 0, nil, nil), kerr.CoordinatorNotAvailable.Code, 0, nil)
		e.s.setFail(nil)
		e.want(e.hb("a", 1, []int32{0, 1, 2, 3}, nil), 0, 1, []int32{0, 1})
		before := e.snapshot()
		e.restart()
		if got := e.snapshot(); got != before {
			t.Fatalf("after restart: %s\nwant %s", got, before)
		}
	})
}

// A static member's leave (-2) survives a restart: its instance rejoins and gets its partitions
// back; nobody took them meanwhile.
func TestConsumerGroupStaticLeaveSurvivesRestart(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		e := newCGEnv(t)
		inst := "i-1"
		e.staticPair(&inst)
		e.want(e.hb("a", -2, nil, &inst), 0, -2, nil)
		e.restart()
		e.want(e.hb("b", 2, []int32{2, 3}, nil), 0, 2, []int32{2, 3})
		e.want(e.hb("a2", 0, nil, &inst), 0, 2, []int32{0, 1})
		e.restart()
		got := e.snapshot()
		if want := "Stable epoch 2 target 2; a2@2 [0 1]->[0 1]; b@2 [2 3]->[2 3]"; got != want {
			t.Fatalf("after the rejoin and a restart: %s\nwant %s", got, want)
		}
		if recs := e.s.records(); !slices.ContainsFunc(recs, func(r Record) bool {
			return string(r.Key) == string(cgKey(cgCurrentAssignmentType, "g", "a")) && r.Value == nil
		}) {
			t.Error("no tombstone for the old static member ID")
		}
	})
}

// An empty classic group becomes a consumer group on a KIP-848 join, and an empty consumer group a
// classic one on a JoinGroup (Kafka's conversion); each conversion tombstones the other protocol's
// records, so a restart brings back the protocol the group had last, with its offsets.
func TestGroupConversionSurvivesRestart(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		e := newCGEnv(t)
		cl := newClient(e.c, "g", "classic")
		stableGroup(t, ctx, cl)
		wantCode(t, "classic commit", commitCodes(e.c.OffsetCommit(ctx, commitReq("g", cl.gen, cl.id, "t", map[int32]int64{0: 5})))[topicPartition{"t", 0}], nil)
		e.want(e.hb("a", 0, nil, nil), kerr.GroupIDNotFound.Code, 0, nil) // a live classic group
		leave := kmsg.NewPtrLeaveGroupRequest()
		leave.Version, leave.Group, leave.MemberID = 3, "g", cl.id
		leave.Members = []kmsg.LeaveGroupRequestMember{{MemberID: cl.id}}
		if code := e.c.LeaveGroup(ctx, leave).ErrorCode; code != 0 {
			t.Fatalf("leave: %s", kerr.ErrorForCode(code))
		}
		synctest.Wait()
		e.want(e.hb("a", 0, nil, nil), 0, 1, []int32{0, 1, 2, 3})
		if recs := compacted(e.s.records()); slices.ContainsFunc(recs, func(r Record) bool { return string(r.Key) == string(groupMetadataKey("g")) }) {
			t.Error("the classic group record is not tombstoned after the conversion")
		}
		e.restart()
		if got, want := e.snapshot(), "Stable epoch 1 target 1; a@1 [0 1 2 3]->[0 1 2 3]"; got != want {
			t.Fatalf("converted group after restart: %s\nwant %s", got, want)
		}
		if got, _ := fetch(e.c, "g", "t", false, 0); got[0].offset != 5 {
			t.Errorf("offset after conversion and restart: %+v, want 5", got[0])
		}
		e.want(e.hb("a", -1, nil, nil), 0, -1, nil)
		cl = newClient(e.c, "g", "classic")
		stableGroup(t, ctx, cl)
		e.restart()
		if d := describe(e.c, 5, "g"); d.State != "Stable" || d.ProtocolType != consumerProtocol || len(d.Members) != 1 {
			t.Fatalf("classic again after restart: state %s type %q members %d", d.State, d.ProtocolType, len(d.Members))
		}
		if e.c.groups["g"].cg != nil {
			t.Fatal("the consumer-group records of the converted group came back")
		}
		if got, _ := fetch(e.c, "g", "t", false, 0); got[0].offset != 5 {
			t.Errorf("offset after the second conversion and restart: %+v, want 5", got[0])
		}
	})
}
