//go:build measure

// Issue 4's closing measurements, not run by CI:
//
//	go test -tags measure -run TestMeasureGroups -v ./internal/broker
//
// Both run against an in-process broker on 127.0.0.1, clients in the same
// process (so client CPU competes with the broker's on small machines).
package broker_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/config"
	"github.com/kawa-broker/kawa/internal/kawatest"
	"github.com/kawa-broker/kawa/internal/kawatest/wait"
)

// TestMeasureGroupsRebalance: 10 members on a 20-partition topic are
// Stable; one leaves (Close sends LeaveGroup). Measured: from the Close call
// until the 9 others own all 20 partitions again (every rebalance callback
// done). Five rounds per balancer.
func TestMeasureGroupsRebalance(t *testing.T) {
	for _, bal := range []struct {
		name string
		b    kgo.GroupBalancer
	}{{"range (eager)", kgo.RangeBalancer()}, {"cooperative-sticky", kgo.CooperativeStickyBalancer()}} {
		// Members learn of the rebalance from their next heartbeat, so the
		// heartbeat interval bounds the first step.
		for _, hb := range []time.Duration{50 * time.Millisecond, 250 * time.Millisecond, 3 * time.Second} {
			var took []time.Duration
			for round := 0; round < 5; round++ {
				took = append(took, rebalanceOnce(t, bal.b, hb))
			}
			slices.Sort(took)
			t.Logf("rebalance after 1 of 10 members leaves, %s, heartbeat %v: median %v, min %v, max %v", bal.name, hb,
				took[2].Round(time.Millisecond), took[0].Round(time.Millisecond), took[4].Round(time.Millisecond))
		}
	}
}

func rebalanceOnce(t *testing.T, bal kgo.GroupBalancer, hb time.Duration) time.Duration {
	k := kawatest.NewBroker(t)
	defer k.Close()
	const partitions, n = 20, 10
	k.CreateTopic("t", partitions, nil)
	var mu sync.Mutex
	owner := map[int32]int{}
	clients := make([]*kgo.Client, n)
	for i := range clients {
		id := i
		cl, err := kgo.NewClient(append(memberOpts("g", "t"), kgo.SeedBrokers(k.Addr), kgo.Balancers(bal), kgo.DisableAutoCommit(), kgo.HeartbeatInterval(hb),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
				mu.Lock()
				defer mu.Unlock()
				for _, p := range ps["t"] {
					owner[p] = id
				}
			}),
			kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
				mu.Lock()
				defer mu.Unlock()
				for _, p := range ps["t"] {
					if owner[p] == id {
						delete(owner, p)
					}
				}
			}))...)
		if err != nil {
			t.Fatal(err)
		}
		clients[i] = cl
		go func() {
			for !cl.PollFetches(context.Background()).IsClientClosed() {
			}
		}()
	}
	defer func() {
		for _, cl := range clients[1:] {
			cl.Close()
		}
	}()
	owners := func(exclude int) bool {
		mu.Lock()
		defer mu.Unlock()
		seen := map[int]bool{}
		for _, o := range owner {
			if o == exclude {
				return false
			}
			seen[o] = true
		}
		want := n
		if exclude >= 0 {
			want = n - 1
		}
		return len(owner) == partitions && len(seen) == want
	}
	wait.Until(t, 60*time.Second, "10 members owning 20 partitions", func() bool { return owners(-1) })
	start := time.Now()
	clients[0].Close()
	mu.Lock()
	for p, o := range owner {
		if o == 0 {
			delete(owner, p)
		}
	}
	mu.Unlock()
	wait.Until(t, time.Minute, "the rebalance after member 0 left", func() bool { return owners(0) })
	return time.Since(start)
}

// TestMeasureGroupsCommitThroughput: 8 groups, each one member formed with
// raw JoinGroup/SyncGroup, commit one partition's offset per OffsetCommit
// from W goroutines per group for 3 s. Commits/s for W=1 (latency-bound)
// and W=8, under --fsync=always and never.
func TestMeasureGroupsCommitThroughput(t *testing.T) {
	for _, fsync := range []config.Fsync{config.FsyncAlways, config.FsyncNever} {
		for _, w := range []int{1, 8} {
			rate := commitRate(t, fsync, 8, w, 3*time.Second)
			t.Logf("offset commits/s, 8 groups × %d committers, fsync=%s: %.0f", w, fsync, rate)
		}
	}
}

func commitRate(t *testing.T, fsync config.Fsync, groups, workers int, d time.Duration) float64 {
	k := kawatest.NewBroker(t, kawatest.WithFsync(fsync))
	defer k.Close()
	k.CreateTopic("t", 8, nil)
	ctx, cancel := context.WithTimeout(context.Background(), d+30*time.Second)
	defer cancel()
	var total atomic.Int64
	var wg sync.WaitGroup
	deadline := time.Now().Add(d)
	for g := 0; g < groups; g++ {
		cl := k.Client()
		j := joinAlone(t, ctx, cl, fmt.Sprintf("g%d", g))
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for off := int64(1); time.Now().Before(deadline); off++ {
					req := kmsg.NewPtrOffsetCommitRequest()
					req.Group, req.MemberID, req.Generation = j.group, j.member, j.generation
					rt := kmsg.NewOffsetCommitRequestTopic()
					rt.Topic = "t"
					rp := kmsg.NewOffsetCommitRequestTopicPartition()
					rp.Partition, rp.Offset = int32(w), off
					rt.Partitions = append(rt.Partitions, rp)
					req.Topics = append(req.Topics, rt)
					resp, err := req.RequestWith(ctx, cl)
					if err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
						t.Errorf("commit: %v", err)
						return
					}
					total.Add(1)
				}
			}()
		}
	}
	began := time.Now()
	wg.Wait()
	return float64(total.Load()) / time.Since(began).Seconds()
}
