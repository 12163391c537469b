package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
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
	for i := range 2 {
		ms[i].stop()
		ms[i].cl.Close() // leaves (epoch -1)
		wait.Until(t, 20*time.Second, "the remaining members to own everything", func() bool { return led.balanced(2 - i) })
	}
	acked := prod.stop(t)
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
