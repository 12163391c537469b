package broker_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kawa-broker/kawa/internal/config"
	"github.com/kawa-broker/kawa/internal/kawatest"
	"github.com/kawa-broker/kawa/internal/kawatest/wait"
)

// consumerProtocol is a broker whose KIP-848 members heartbeat every
// groupHeartbeat and are fenced after groupSession of silence, like the
// classic group tests' members.
func consumerProtocol(c *config.Broker) {
	c.ConsumerHeartbeatInterval = groupHeartbeat
	c.ConsumerSessionTimeout = groupSession
}

// TestConsumerGroupKilledMember is TestGroupKilledMember over KIP-848 with
// franz-go's kgo.ServerSideBalancer() (sticky -> "uniform", range ->
// "range"): three members, one cut off without leaving; never two owners of
// a partition, every acknowledged record processed exactly once, each new
// owner resuming at the last acknowledged commit, and the victim's
// partitions moved only after the broker's session timeout.
func TestConsumerGroupKilledMember(t *testing.T) {
	t.Parallel()
	ssb := []kgo.Opt{kgo.ServerSideBalancer()}
	scs := []*killScenario{
		startKillScenario(t, "848 uniform", kgo.StickyBalancer(), ssb, consumerProtocol),
		startKillScenario(t, "848 range", kgo.RangeBalancer(), ssb, consumerProtocol),
	}
	runKillScenarios(t, scs)
}

// Members join one by one and leave one by one (LeaveGroup is a heartbeat
// with epoch -1): ownership never overlaps, every record is processed once,
// and ListGroups shows a "consumer" group beside a classic one.
func TestConsumerGroupJoinsAndLeaves(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t, consumerProtocol)
	const topic, group = "orders", "g848"
	k.CreateTopic(topic, killTopicPartitions, nil)
	led := newGroupLedger()
	prod := startBgProducer(t, k, topic, killTopicPartitions)
	ssb := kgo.ServerSideBalancer()
	var ms []*loopMember
	for i := range 3 {
		ms = append(ms, startMember(t, k, i, group, topic, kgo.StickyBalancer(), led, ssb))
		wait.Until(t, 20*time.Second, "members to share all partitions", func() bool { return led.balanced(i + 1) })
	}
	classic := k.Client(memberOpts("classic", topic)...)
	wait.Until(t, 20*time.Second, "the classic group to consume", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		return len(classic.PollFetches(ctx).Records()) > 0
	})
	adm := kadm.NewClient(k.Client())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var d kadm.DescribedConsumerGroup
	wait.Until(t, 20*time.Second, "ConsumerGroupDescribe to show a Stable group", func() bool {
		ds, err := adm.DescribeConsumerGroups(ctx, group)
		if err != nil {
			t.Fatal(err)
		}
		d = ds[group]
		return d.Err == nil && d.State == "Stable"
	})
	// Balanced partitions can still be Reconciling: a member that neither gives nor gets a
	// partition moves to the new epoch only at its next heartbeat. Hence after the wait.
	ls, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if g := ls[group]; g.GroupType != "consumer" || g.ProtocolType != "consumer" || g.State != "Stable" {
		t.Errorf("ListGroups %s: %+v", group, g)
	}
	if g := ls["classic"]; g.GroupType != "classic" || g.ProtocolType != "consumer" || g.State != "Stable" {
		t.Errorf("ListGroups classic: %+v", g)
	}
	owners := map[int32]string{}
	for _, m := range d.Members {
		if m.MemberEpoch != d.Epoch || m.MemberType != 1 || !slices.Equal(m.SubscribedTopics, []string{topic}) {
			t.Errorf("member %s: epoch %d (group %d), type %d, subscribed %v", m.MemberID, m.MemberEpoch, d.Epoch, m.MemberType, m.SubscribedTopics)
		}
		if !maps.EqualFunc(m.Assignment, m.TargetAssignment, maps.Equal) {
			t.Errorf("member %s: current %v, target %v in a Stable group", m.MemberID, m.Assignment, m.TargetAssignment)
		}
		for _, p := range m.Assignment.Sorted() {
			for _, part := range p.Partitions {
				if o, ok := owners[part]; ok {
					t.Errorf("partition %d assigned to %s and %s", part, o, m.MemberID)
				}
				owners[part] = m.MemberID
			}
		}
	}
	if len(d.Members) != 3 || len(owners) != killTopicPartitions || d.AssignmentEpoch != d.Epoch || d.AssignorName != "uniform" {
		t.Errorf("described %d members owning %d partitions, epochs %d/%d, assignor %q", len(d.Members), len(owners), d.Epoch, d.AssignmentEpoch, d.AssignorName)
	}
	if ds, err := adm.DescribeConsumerGroups(ctx, "classic"); err != nil || !errors.Is(ds["classic"].Err, kerr.GroupIDNotFound) {
		t.Errorf("ConsumerGroupDescribe of a classic group: %v %v", err, ds["classic"].Err)
	}
	for i := range 2 {
		ms[i].stop()
		ms[i].cl.Close() // leaves (epoch -1)
		wait.Until(t, 20*time.Second, "the remaining members to own everything", func() bool { return led.balanced(2 - i) })
	}
	acked := prod.Stop(t)
	wait.Until(t, 20*time.Second, "every acknowledged record processed", func() bool { return led.covers(acked) })
	ms[2].stop()
	led.mu.Lock()
	defer led.mu.Unlock()
	for _, o := range led.overlaps {
		t.Error(o)
	}
	if dups := led.duplicates(); len(dups) > 0 {
		t.Errorf("records processed twice: %v", dups)
	}
	if led.commitErrs > 0 {
		t.Errorf("%d commits failed", led.commitErrs)
	}
}

// A member subscribed by regex (resolved by the broker, KIP-848 v1) gets a
// matching topic created after it joined, and never a topic that does not
// match.
func TestConsumerGroupRegexPicksUpNewTopic(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t, consumerProtocol)
	k.CreateTopic("rx-a", 2, nil)
	k.CreateTopic("other", 1, nil)
	cl := k.Client(kgo.ConsumerGroup("rx"), kgo.ConsumeRegex(), kgo.ConsumeTopics("^rx-"), kgo.ServerSideBalancer(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond), kgo.MetadataMinAge(100*time.Millisecond))
	for _, topic := range []string{"rx-a", "other"} {
		produceValues(t, k, topic, 0, 3)
	}
	got := map[string]int{}
	poll := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got[r.Topic]++ })
	}
	wait.Until(t, 20*time.Second, "rx-a consumed", func() bool { poll(); return got["rx-a"] == 3 })
	k.CreateTopic("rx-b", 1, nil)
	produceValues(t, k, "rx-b", 0, 4)
	wait.Until(t, 20*time.Second, "rx-b, created later, consumed", func() bool { poll(); return got["rx-b"] == 4 })
	if got["other"] != 0 || got["rx-a"] != 3 {
		t.Fatalf("consumed %v", got)
	}
}

// TestConsumerGroupStaticRejoin: a static member (group.instance.id) of a KIP-848 group closes,
// which franz-go sends as the static leave (epoch -2), and its instance comes back within the
// session timeout: it gets exactly the partitions it had, nobody else was assigned them
// meanwhile, ownership never overlapped and every acknowledged record is processed exactly once.
func TestConsumerGroupStaticRejoin(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t, consumerProtocol)
	const topic, group = "orders", "g848-static"
	k.CreateTopic(topic, killTopicPartitions, nil)
	led := newGroupLedger()
	prod := startBgProducer(t, k, topic, killTopicPartitions)
	ssb := kgo.ServerSideBalancer()
	var ms []*loopMember
	for i := range 3 {
		ms = append(ms, startMember(t, k, i, group, topic, kgo.StickyBalancer(), led, ssb, kgo.InstanceID(fmt.Sprintf("instance-%d", i))))
	}
	wait.Until(t, 20*time.Second, "three members to share all partitions", func() bool { return led.balanced(3) })
	had := led.owned(0)
	slices.Sort(had)
	adm := kadm.NewClient(k.Client())
	epoch := func() int32 {
		ds, err := adm.DescribeConsumerGroups(context.Background(), group)
		if err != nil || ds[group].Err != nil {
			t.Fatalf("ConsumerGroupDescribe: %v %v", err, ds[group].Err)
		}
		return ds[group].Epoch
	}
	before := epoch()
	left := time.Now()
	ms[0].stop()
	ms[0].cl.Close() // the static leave; a closed client holds nothing
	led.revoked(0, map[string][]int32{topic: had})
	back := startMember(t, k, 3, group, topic, kgo.StickyBalancer(), led, ssb, kgo.InstanceID("instance-0"))
	wait.Until(t, groupSession/2, "the instance to get its partitions back", func() bool { return len(led.owned(3)) == len(had) })
	got := led.owned(3)
	slices.Sort(got)
	if !slices.Equal(got, had) {
		t.Errorf("the returning instance got %v, it had %v", got, had)
	}
	if after := epoch(); after != before {
		t.Errorf("group epoch %d after the static leave and rejoin, was %d (a rebalance happened)", after, before)
	}
	led.mu.Lock()
	for _, p := range had {
		if at := led.assignedAt[p]; at.After(left) && led.owner[p] != 3 {
			t.Errorf("partition %d assigned to member %d while instance-0 was away", p, led.owner[p])
		}
	}
	led.mu.Unlock()
	wait.Until(t, 20*time.Second, "records after the rejoin to be processed", func() bool { return led.processedCount() > 0 && len(led.owned(3)) > 0 })
	acked := prod.Stop(t)
	wait.Until(t, 20*time.Second, "every acknowledged record to be processed", func() bool { return led.covers(acked) })
	for _, m := range append(ms[1:], back) {
		m.stop()
	}
	led.mu.Lock()
	defer led.mu.Unlock()
	if len(led.overlaps) > 0 {
		t.Errorf("ownership overlapped: %v", led.overlaps)
	}
	if d := led.duplicates(); len(d) > 0 {
		t.Errorf("records processed twice: %v", d)
	}
}
