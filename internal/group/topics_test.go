package group

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Issue 11 item 3: DeleteTopicOffsets removes a deleted topic's committed and staged offsets from
// every group, also those of commits still queued when it runs, durably (a restart agrees), and
// commits that arrive after the deletion are refused. Other topics keep theirs.
func TestDeleteTopicOffsetsCoversQueuedWrites(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var deleted atomic.Bool
		cfg := testConfig()
		cfg.TopicExists = func(topic string, _ int32) bool { return topic != "t1" || !deleted.Load() }
		c, s := newTestCoordinator(t, cfg)
		ctx := context.Background()
		wantCode(t, "commit t1", commitCodes(c.OffsetCommit(ctx, commitReq("g", -1, "", "t1", map[int32]int64{0: 5})))[topicPartition{"t1", 0}], nil)
		wantCode(t, "commit t2", commitCodes(c.OffsetCommit(ctx, commitReq("g", -1, "", "t2", map[int32]int64{0: 9})))[topicPartition{"t2", 0}], nil)
		wantCode(t, "stage t1/1", txnCode(c, txnCommitReq(newClient(c, "g", "x"), 7, 0, "t1", map[int32]int64{1: 40})), nil)

		gate := make(chan struct{})
		s.gate = gate
		queued := make(chan *kmsg.OffsetCommitResponse, 1)
		go func() { queued <- c.OffsetCommit(ctx, commitReq("g", -1, "", "t1", map[int32]int64{2: 6})) }()
		synctest.Wait() // the commit of t1/2 (no offset stored yet) is queued behind the gate
		deleted.Store(true)
		dropped := make(chan error, 1)
		go func() { dropped <- c.DeleteTopicOffsets(ctx, func(topic string) bool { return topic == "t1" }) }()
		synctest.Wait()
		close(gate)
		wantCode(t, "queued commit", commitCodes(<-queued)[topicPartition{"t1", 2}], nil)
		if err := <-dropped; err != nil {
			t.Fatalf("DeleteTopicOffsets: %v", err)
		}

		check := func(when string, c *Coordinator) {
			t.Helper()
			none := fetched{-1, -1, 0}
			if got, _ := fetch(c, "g", "t1", true, 0, 1, 2); got[0] != none || got[1] != none || got[2] != none {
				t.Fatalf("%s: t1 answers %+v, want -1 and nothing staged", when, got)
			}
			if got, _ := fetch(c, "g", "t2", false, 0); got[0].offset != 9 {
				t.Fatalf("%s: t2/0 is %d, want 9", when, got[0].offset)
			}
		}
		check("after delete", c)
		wantCode(t, "commit to the deleted topic", commitCodes(c.OffsetCommit(ctx, commitReq("g", -1, "", "t1", map[int32]int64{0: 7})))[topicPartition{"t1", 0}], kerr.UnknownTopicOrPartition)
		c.Close()
		check("after restart", restart(t, s))
	})
}
