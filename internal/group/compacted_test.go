package group

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestCompactedLogReplaysTheSameState: plain commits, transactional offsets committed, aborted, beaten by a
// later plain commit and still open, and a deleted group; a coordinator loaded from the compacted log has
// exactly the state of one loaded from the whole log (committed offsets, the open transaction's staged offset
// unstable, the deleted group gone), and the compacted log is smaller. Before the completion records, the
// cleaner's latest staged record of a producer outlived its transaction's marker and the next marker
// decided it: committed offsets were lost or came back.
func TestCompactedLogReplaysTheSameState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, s := newTestCoordinator(t, bubbleConfig())
		ctx := context.Background()
		m := newClient(c, "G", "m")
		stableGroup(t, ctx, m)
		for i := range int64(5) {
			c.OffsetCommit(ctx, commitReq("G", m.gen, m.id, "t", map[int32]int64{0: i, 1: i, 2: i, 3: i}))
		}
		c.OffsetCommit(ctx, commitReq("H", -1, "", "t", map[int32]int64{0: 9}))
		stage := func(pid int64, offsets map[int32]int64) {
			t.Helper()
			wantCode(t, "stage", txnCode(c, txnCommitReq(m, pid, 0, "t", offsets)), nil)
		}
		end := func(pid int64, commit bool) {
			t.Helper()
			if err := c.CompleteTxn(ctx, "G", pid, commit); err != nil {
				t.Fatal(err)
			}
		}
		stage(7, map[int32]int64{0: 100, 1: 101})
		end(7, true)
		stage(7, map[int32]int64{0: 200})
		end(7, false)
		stage(9, map[int32]int64{2: 300})
		c.OffsetCommit(ctx, commitReq("G", m.gen, m.id, "t", map[int32]int64{2: 55})) // after the staging: it wins
		end(9, true)
		stage(8, map[int32]int64{3: 400}) // open at the restart
		del := kmsg.NewPtrDeleteGroupsRequest()
		del.Version = 2
		del.Groups = []string{"H"}
		wantCode(t, "delete H", c.DeleteGroups(ctx, del).Groups[0].ErrorCode, nil)
		c.Close()

		full := s.records()
		small := compacted(full)
		if len(small) >= len(full) {
			t.Fatalf("compaction kept %d of %d records", len(small), len(full))
		}
		want := map[int32]fetched{0: {100, -1, 0}, 1: {101, -1, 0}, 2: {55, 3, 0}, 3: {4, 3, 0}} // commitReq's leader epoch is 3
		for name, recs := range map[string][]Record{"whole log": full, "compacted log": small} {
			c2 := New(testConfig(), &memStore{})
			t.Cleanup(c2.Close)
			if err := c2.Load(recs); err != nil {
				t.Fatalf("%s: Load: %v", name, err)
			}
			got, top := fetch(c2, "G", "t", false, 0, 1, 2, 3)
			wantCode(t, name+": fetch", top, nil)
			for p, w := range want {
				if got[p] != w {
					t.Fatalf("%s: partition %d = %+v, want %+v", name, p, got[p], w)
				}
			}
			if got, _ := fetch(c2, "G", "t", true, 3); got[3].code != kerr.UnstableOffsetCommit.Code {
				t.Fatalf("%s: require_stable fetch of the open transaction's partition = %+v, want UNSTABLE_OFFSET_COMMIT", name, got[3])
			}
			if g := c2.groups["H"]; g != nil {
				t.Fatalf("%s: deleted group H is back with %d offsets", name, len(g.offsets))
			}
			if err := c2.CompleteTxn(ctx, "G", 8, true); err != nil {
				t.Fatal(err)
			}
			if got, _ := fetch(c2, "G", "t", true, 3); got[3] != (fetched{400, -1, 0}) {
				t.Fatalf("%s: after the open transaction commits, partition 3 = %+v, want 400", name, got[3])
			}
		}
	})
}
