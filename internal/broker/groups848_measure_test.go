package broker_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/kawatest"
	"github.com/kawa-broker/kawa/internal/kawatest/wait"
)

// ownership is what each member of a group says it holds, from its kgo callbacks.
type ownership struct {
	mu   sync.Mutex
	held map[int]map[int32]bool // member index -> partitions
	dead map[int]bool
}

func (o *ownership) opts(i int) []kgo.Opt {
	set := func(add bool) func(context.Context, *kgo.Client, map[string][]int32) {
		return func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
			o.mu.Lock()
			defer o.mu.Unlock()
			if o.held[i] == nil {
				o.held[i] = map[int32]bool{}
			}
			for _, parts := range ps {
				for _, p := range parts {
					if add {
						o.held[i][p] = true
					} else {
						delete(o.held[i], p)
					}
				}
			}
		}
	}
	return []kgo.Opt{kgo.OnPartitionsAssigned(set(true)), kgo.OnPartitionsRevoked(set(false)), kgo.OnPartitionsLost(set(false))}
}

// converged reports whether the n live members hold every one of parts partitions, each exactly
// once, balanced (each parts/n or one more).
func (o *ownership) converged(n, parts int) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	seen, live := map[int32]bool{}, 0
	for i, ps := range o.held {
		if o.dead[i] {
			continue
		}
		live++
		if len(ps) < parts/n || len(ps) > (parts+n-1)/n {
			return false
		}
		for p := range ps {
			if seen[p] {
				return false
			}
			seen[p] = true
		}
	}
	return live == n && len(seen) == parts
}

// TestMeasureGroupConvergence (KAWA_GROUP_MEASURE=1; issue 15 "Measure"): how long 10 members of
// a group on 60 partitions take to converge (every partition held once, balanced, as the members'
// own callbacks say) after an 11th joins and after one dies without leaving, for a classic group
// with cooperative-sticky and a KIP-848 group (uniform), in the same run on one broker. Sessions
// are 6 s and heartbeats 250 ms in both (the classic client's settings, the broker's for 848), so
// the death is noticed after the session timeout in both.
func TestMeasureGroupConvergence(t *testing.T) {
	if os.Getenv("KAWA_GROUP_MEASURE") == "" {
		t.Skip("set KAWA_GROUP_MEASURE=1 to measure")
	}
	const parts, rounds = 60, 3
	k := kawatest.NewBroker(t, consumerProtocol)
	for _, tc := range []struct {
		name string
		opts []kgo.Opt
	}{
		{"classic cooperative-sticky", []kgo.Opt{kgo.Balancers(kgo.CooperativeStickyBalancer())}},
		{"KIP-848 uniform", []kgo.Opt{kgo.ServerSideBalancer(), kgo.Balancers(kgo.StickyBalancer())}},
	} {
		for round := range rounds {
			topic, group := fmt.Sprintf("conv-%d-%d", len(tc.name), round), fmt.Sprintf("g-%d-%d", len(tc.name), round)
			k.CreateTopic(topic, parts, nil)
			own := &ownership{held: map[int]map[int32]bool{}, dead: map[int]bool{}}
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			start := func(i int) *crashableClient {
				cl := newCrashable(t, k.Addr, append(append(memberOpts(group, topic), tc.opts...), own.opts(i)...)...)
				wg.Add(1)
				go func() {
					defer wg.Done()
					for ctx.Err() == nil {
						cl.PollFetches(ctx)
					}
				}()
				return cl
			}
			var ms []*crashableClient
			for i := range 10 {
				ms = append(ms, start(i))
			}
			wait.Until(t, time.Minute, "10 members to converge", func() bool { return own.converged(10, parts) })
			t0 := time.Now()
			ms = append(ms, start(10))
			wait.Until(t, time.Minute, "11 members to converge", func() bool { return own.converged(11, parts) })
			joined := time.Since(t0)
			ms[3].Crash()
			own.mu.Lock()
			own.dead[3] = true
			own.mu.Unlock()
			t0 = time.Now()
			wait.Until(t, time.Minute, "10 members to converge after a death", func() bool { return own.converged(10, parts) })
			died := time.Since(t0)
			t.Logf("%s round %d: after a join %v, after a death %v", tc.name, round, joined.Round(time.Millisecond), died.Round(time.Millisecond))
			cancel()
			for _, m := range ms {
				m.Close()
			}
			wg.Wait()
		}
	}
}

// TestMeasureConsumerHeartbeatRate (KAWA_GROUP_MEASURE=1): keep-alive ConsumerGroupHeartbeats per
// second the coordinator answers over TCP: 100 members of one group on 100 partitions, 16 clients
// each heartbeating its members back to back for 5 s.
func TestMeasureConsumerHeartbeatRate(t *testing.T) {
	if os.Getenv("KAWA_GROUP_MEASURE") == "" {
		t.Skip("set KAWA_GROUP_MEASURE=1 to measure")
	}
	const members, clients = 100, 16
	k := kawatest.NewBroker(t, consumerProtocol)
	k.CreateTopic("hb", members, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	type member struct {
		id    string
		epoch int32
		owned []kmsg.ConsumerGroupHeartbeatRequestTopic
	}
	beat := func(cl *kgo.Client, m *member) error {
		r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		r.Group, r.MemberID, r.MemberEpoch, r.Topics = "hb", m.id, m.epoch, m.owned
		if m.epoch == 0 {
			r.SubscribedTopicNames, r.RebalanceTimeoutMillis = []string{"hb"}, 60000
		}
		resp, err := r.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return err
		}
		m.epoch = resp.MemberEpoch
		if resp.Assignment != nil {
			m.owned = nil
			for _, a := range resp.Assignment.Topics {
				m.owned = append(m.owned, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: a.TopicID, Partitions: slices.Clone(a.Partitions)})
			}
			if m.owned == nil {
				m.owned = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
			}
		}
		return nil
	}
	cls := make([]*kgo.Client, clients)
	for i := range cls {
		cls[i] = k.Client()
	}
	ms := make([]*member, members)
	for i := range ms {
		ms[i] = &member{id: fmt.Sprintf("m-%03d", i)}
		if err := beat(cls[i%clients], ms[i]); err != nil {
			t.Fatal(err)
		}
	}
	var n, fails atomic.Int64
	var wg sync.WaitGroup
	end := time.Now().Add(5 * time.Second)
	start := time.Now()
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				for i := c; i < members; i += clients {
					if err := beat(cls[c], ms[i]); err != nil {
						fails.Add(1)
						continue
					}
					n.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	t.Logf("%d heartbeats in %v: %.0f/s (%d failed), %d members, %d clients", n.Load(), el.Round(time.Millisecond), float64(n.Load())/el.Seconds(), fails.Load(), members, clients)
	if n.Load() == 0 {
		t.Fatal("no heartbeat answered")
	}
}
