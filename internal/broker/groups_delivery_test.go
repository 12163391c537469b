package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kawa-broker/kawa/internal/kawatest"
)

// TestGroupAtMostOnce (issue 4 acceptance): a consumer that commits each
// batch before processing it and crashes mid-batch loses exactly the rest
// of that batch, and its successor repeats nothing.
func TestGroupAtMostOnce(t *testing.T) {
	t.Parallel()
	r := deliveryScenario(t, true)
	if both := offsetIntersect(r.first, r.second); len(both) != 0 {
		t.Errorf("records processed twice: %v", sortedOffsets(both))
	}
	lost := offsetRange(0, deliveryRecords)
	for o := range offsetUnion(r.first, r.second) {
		delete(lost, o)
	}
	if want := offsetRange(r.crashAt, r.batchEnd); !sameOffsetSet(lost, want) {
		t.Errorf("lost %v, want exactly the unprocessed rest of the crashed batch %v", sortedOffsets(lost), sortedOffsets(want))
	}
	if r.resumedAt != r.batchEnd {
		t.Errorf("successor started at %d, want %d (the commit made before the crash)", r.resumedAt, r.batchEnd)
	}
}

// TestGroupAtLeastOnce (issue 4 acceptance): a consumer that commits each
// batch after processing it and crashes mid-batch loses nothing; its
// successor repeats exactly what it processed of the crashed batch.
func TestGroupAtLeastOnce(t *testing.T) {
	t.Parallel()
	r := deliveryScenario(t, false)
	if all := offsetUnion(r.first, r.second); !sameOffsetSet(all, offsetRange(0, deliveryRecords)) {
		t.Errorf("processed %d distinct records, want all %d", len(all), deliveryRecords)
	}
	if both, want := offsetIntersect(r.first, r.second), offsetRange(r.batchStart, r.crashAt); !sameOffsetSet(both, want) {
		t.Errorf("repeated %v, want exactly the processed part of the crashed batch %v", sortedOffsets(both), sortedOffsets(want))
	}
	if r.resumedAt != r.batchStart {
		t.Errorf("successor started at %d, want %d (the last commit before the crash)", r.resumedAt, r.batchStart)
	}
}

const deliveryRecords = 100

// deliveryRun is what two consumers of one partition processed around a
// crash of the first one in the batch [batchStart, batchEnd), at crashAt.
type deliveryRun struct {
	first, second                 map[int64]bool
	batchStart, batchEnd, crashAt int64
	resumedAt                     int64 // the successor's first offset
}

// deliveryScenario runs the first consumer (commit before or after
// processing each poll of ≤10 records) until it processed half of its fifth
// batch, crashes it, then drains the partition with a second consumer of the
// same group using the same strategy. Both carry one group.instance.id: the
// second is the crashed process restarted, and takes over at once instead
// of after the session timeout (TestGroupKilledMember covers that path).
func deliveryScenario(t *testing.T, commitFirst bool) deliveryRun {
	k := kawatest.NewBroker(t)
	const topic, group = "d", "g"
	k.CreateTopic(topic, 1, nil)
	produceValues(t, k, topic, 0, deliveryRecords)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var run deliveryRun
	opts := append(memberOpts(group, topic), kgo.DisableAutoCommit(), kgo.InstanceID("consumer-1"))

	a := newCrashable(t, k.Addr, opts...)
	run.first = map[int64]bool{}
	for batch := 0; run.crashAt == 0; batch++ {
		recs := a.PollRecords(ctx, 10).Records()
		if ctx.Err() != nil {
			t.Fatal("first consumer timed out")
		}
		if commitFirst {
			mustCommitRecords(t, a.Client, recs)
		}
		crashAfter := len(recs) // process all
		if batch >= 4 && len(recs) >= 2 {
			crashAfter = len(recs) / 2
			run.batchStart, run.batchEnd = recs[0].Offset, recs[len(recs)-1].Offset+1
			run.crashAt = recs[crashAfter].Offset
		}
		for _, r := range recs[:crashAfter] {
			run.first[r.Offset] = true
		}
		if run.crashAt != 0 {
			a.Crash() // mid-batch: no further commit, no LeaveGroup
		} else if !commitFirst {
			mustCommitRecords(t, a.Client, recs)
		}
	}

	b := k.Client(opts...)
	run.second = map[int64]bool{}
	run.resumedAt = -1
	for len(run.second) == 0 || !run.second[deliveryRecords-1] {
		recs := b.PollRecords(ctx, 10).Records()
		if ctx.Err() != nil {
			t.Fatalf("second consumer timed out with %d records", len(run.second))
		}
		if run.resumedAt < 0 && len(recs) > 0 {
			run.resumedAt = recs[0].Offset
		}
		for _, r := range recs {
			run.second[r.Offset] = true
		}
		mustCommitRecords(t, b, recs)
	}
	if got := fetchCommitted(t, k.Client(), group, topic, 0)[0]; got != deliveryRecords {
		t.Errorf("final commit %d, want %d", got, deliveryRecords)
	}
	return run
}

func mustCommitRecords(t *testing.T, cl *kgo.Client, recs []*kgo.Record) {
	t.Helper()
	if len(recs) == 0 {
		return
	}
	if err := cl.CommitRecords(context.Background(), recs...); err != nil {
		t.Fatalf("commit: %v", err)
	}
}

func offsetUnion(a, b map[int64]bool) map[int64]bool {
	out := map[int64]bool{}
	for o := range a {
		out[o] = true
	}
	for o := range b {
		out[o] = true
	}
	return out
}

func offsetIntersect(a, b map[int64]bool) map[int64]bool {
	out := map[int64]bool{}
	for o := range a {
		if b[o] {
			out[o] = true
		}
	}
	return out
}

// keys lists a set's offsets in order (for messages).
func sortedOffsets(s map[int64]bool) []int64 {
	var out []int64
	for o := int64(0); o < deliveryRecords; o++ {
		if s[o] {
			out = append(out, o)
		}
	}
	return out
}
