package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/kawatest"
	"github.com/kawa-broker/kawa/internal/kawatest/wait"
)

// TestGroupDeleteDurable (BL-18): G commits offsets for two partitions
// through two members, both leave, the offsets survive a restart, then
// DeleteGroups succeeds and G stays gone across another restart: not
// listed, described as Dead (or GROUP_ID_NOT_FOUND), OffsetFetch -1 for
// both partitions. (The SIGKILL variant is cmd/kawa's
// TestGroupDeleteSurvivesSIGKILL.)
func TestGroupDeleteDurable(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	const topic, group = "t", "G"
	k.CreateTopic(topic, 2, nil)
	produceValues(t, k, topic, 0, 5)
	produceValues(t, k, topic, 1, 7)
	consumeAndLeave(t, k, group, topic, 12)
	want := map[int32]int64{0: 5, 1: 7}
	if got := fetchCommitted(t, k.Client(), group, topic, 0, 1); !equalOffsets(got, want) {
		t.Fatalf("committed %v, want %v", got, want)
	}

	k = k.Restart()
	if got := fetchCommitted(t, k.Client(), group, topic, 0, 1); !equalOffsets(got, want) {
		t.Fatalf("after restart committed %v, want %v", got, want)
	}
	if g := describeGroup(t, k.Admin(), group); g.State != "Empty" {
		t.Fatalf("after restart G is %q, want Empty", g.State)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := k.Admin().DeleteGroup(ctx, group)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("DeleteGroups: %v", err)
	}
	checkGroupGone(t, k.Client(), group, topic)
	k = k.Restart()
	checkGroupGone(t, k.Client(), group, topic)
}

// consumeAndLeave runs two range members of group until they processed n
// records together, commits what each processed, and closes both (each
// sends LeaveGroup, so the group ends Empty).
func consumeAndLeave(t *testing.T, k *kawatest.Broker, group, topic string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	seen := make(chan int, 2)
	for i := 0; i < 2; i++ {
		cl, err := kgo.NewClient(append(memberOpts(group, topic), kgo.SeedBrokers(k.Addr), kgo.DisableAutoCommit(),
			kgo.Balancers(kgo.RangeBalancer()))...)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			defer cl.Close()
			for ctx.Err() == nil {
				recs := cl.PollRecords(ctx, 100).Records()
				if len(recs) > 0 && cl.CommitRecords(ctx, recs...) == nil {
					select {
					case seen <- len(recs):
					case <-ctx.Done():
					}
				}
			}
		}()
	}
	for total := 0; total < n; {
		select {
		case c := <-seen:
			total += c
		case <-ctx.Done():
			t.Fatalf("members processed %d of %d records", total, n)
		}
	}
	cancel()
	wait.Until(t, 10*time.Second, "both members to leave", func() bool {
		g := describeGroup(t, k.Admin(), group)
		return g.State == "Empty" && len(g.Members) == 0
	})
}

// checkGroupGone asserts BL-18's outcome for group on topic's partitions
// 0 and 1.
func checkGroupGone(t *testing.T, cl *kgo.Client, group, topic string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := kmsg.NewPtrListGroupsRequest().RequestWith(ctx, cl)
	if err != nil || list.ErrorCode != 0 {
		t.Fatalf("ListGroups: %v (code %d)", err, list.ErrorCode)
	}
	for _, g := range list.Groups {
		if g.Group == group {
			t.Errorf("ListGroups still shows %s (%s)", group, g.GroupState)
		}
	}
	dreq := kmsg.NewPtrDescribeGroupsRequest()
	dreq.Groups = []string{group}
	desc, err := dreq.RequestWith(ctx, cl)
	if err != nil || len(desc.Groups) != 1 {
		t.Fatalf("DescribeGroups: %v (%d groups)", err, len(desc.Groups))
	}
	d := desc.Groups[0]
	if !(d.ErrorCode == 0 && d.State == "Dead" || d.ErrorCode == kerr.GroupIDNotFound.Code) || len(d.Members) != 0 {
		t.Errorf("DescribeGroups: state %q, code %d, %d members; want Dead or GROUP_ID_NOT_FOUND", d.State, d.ErrorCode, len(d.Members))
	}
	if got, want := fetchCommitted(t, cl, group, topic, 0, 1), (map[int32]int64{0: -1, 1: -1}); !equalOffsets(got, want) {
		t.Errorf("OffsetFetch after delete: %v, want %v", got, want)
	}
}

func equalOffsets(got, want map[int32]int64) bool {
	if len(got) != len(want) {
		return false
	}
	for p, o := range want {
		if g, ok := got[p]; !ok || g != o {
			return false
		}
	}
	return true
}
