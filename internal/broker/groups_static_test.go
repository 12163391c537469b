package broker_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/kawatest"
	"github.com/kawa-broker/kawa/internal/kawatest/wait"
)

// staticMember is a kgo member with a group.instance.id whose rebalance
// callbacks are counted.
type staticMember struct {
	cl       *kgo.Client
	mu       sync.Mutex
	events   int     // assigned + revoked + lost callbacks
	assigned []int32 // current partitions
}

// staticSession is the static members' session timeout: long, so that a
// restart on a loaded machine is still "well within" it (a new client's join
// took over 3 s under a load average of 30).
const staticSession = 30 * time.Second

func startStatic(t *testing.T, k *kawatest.Broker, instance string) *staticMember {
	t.Helper()
	m := &staticMember{}
	onAssigned := func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.events++
		m.assigned = append(m.assigned, ps["t"]...)
		slices.Sort(m.assigned)
	}
	onRevoked := func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.events++
		m.assigned = slices.DeleteFunc(m.assigned, func(p int32) bool { return slices.Contains(ps["t"], p) })
	}
	cl, err := kgo.NewClient(append(memberOpts("static", "t"), kgo.SeedBrokers(k.Addr), kgo.InstanceID(instance),
		kgo.Balancers(kgo.RangeBalancer()), kgo.DisableAutoCommit(), kgo.ClientID(instance),
		kgo.OnPartitionsAssigned(onAssigned), kgo.OnPartitionsRevoked(onRevoked), kgo.OnPartitionsLost(onRevoked),
		kgo.SessionTimeout(staticSession))...)
	if err != nil {
		t.Fatal(err)
	}
	m.cl = cl
	t.Cleanup(cl.Close)
	go func() {
		for {
			if fs := cl.PollFetches(context.Background()); fs.IsClientClosed() {
				return
			}
		}
	}()
	return m
}

func (m *staticMember) state() (events int, assigned []int32, generation int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, generation = m.cl.GroupMetadata()
	return m.events, slices.Clone(m.assigned), generation
}

// TestGroupStaticMemberRestart (KIP-345): three static members are Stable;
// one restarts (closes without LeaveGroup, a new client with the same
// group.instance.id joins well within the session timeout). It gets its old
// partitions back at the same generation, the other two see no rebalance
// (no callbacks, same generation), and the replaced member ID is fenced.
func TestGroupStaticMemberRestart(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	k.CreateTopic("t", 6, nil)
	members := make([]*staticMember, 3)
	for i := range members {
		members[i] = startStatic(t, k, fmt.Sprintf("instance-%d", i))
	}
	wait.Until(t, 20*time.Second, "three static members with two partitions each", func() bool {
		g := describeGroup(t, k.Admin(), "static")
		if g.State != "Stable" || len(g.Members) != 3 {
			return false
		}
		for _, m := range members {
			if _, a, _ := m.state(); len(a) != 2 {
				return false
			}
		}
		return true
	})
	type snapshot struct {
		events     int
		assigned   []int32
		generation int32
	}
	before := make([]snapshot, 3)
	for i, m := range members {
		before[i].events, before[i].assigned, before[i].generation = m.state()
	}
	oldID, _ := members[1].cl.GroupMetadata()

	restartedAt := time.Now()
	members[1].cl.Close() // static: no LeaveGroup
	members[1] = startStatic(t, k, "instance-1")
	wait.Until(t, staticSession/2, "the restarted member's old partitions", func() bool {
		_, a, _ := members[1].state()
		return slices.Equal(a, before[1].assigned)
	})
	rejoined := time.Since(restartedAt)

	if _, _, gen := members[1].state(); gen != before[1].generation {
		t.Errorf("restarted member at generation %d, want %d (no rebalance)", gen, before[1].generation)
	}
	for _, i := range []int{0, 2} {
		ev, a, gen := members[i].state()
		if ev != before[i].events || gen != before[i].generation || !slices.Equal(a, before[i].assigned) {
			t.Errorf("member %d: %d callbacks, generation %d, partitions %v; before the restart %+v", i, ev, gen, a, before[i])
		}
	}
	g := describeGroup(t, k.Admin(), "static")
	if g.State != "Stable" || len(g.Members) != 3 {
		t.Errorf("after the restart: %s with %d members", g.State, len(g.Members))
	}
	checkFenced(t, k, oldID, "instance-1", before[1].generation)
	t.Logf("static member back with partitions %v after %v", before[1].assigned, rejoined.Round(time.Millisecond))
}

// checkFenced: a heartbeat from the replaced member ID of a static
// instance gets FENCED_INSTANCE_ID.
func checkFenced(t *testing.T, k *kawatest.Broker, oldID, instance string, generation int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrHeartbeatRequest()
	req.Group, req.MemberID, req.InstanceID, req.Generation = "static", oldID, &instance, generation
	resp, err := req.RequestWith(ctx, k.Client())
	if err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != kerr.FencedInstanceID.Code {
		t.Errorf("heartbeat from the replaced member %s: code %d, want FENCED_INSTANCE_ID", oldID, resp.ErrorCode)
	}
}
