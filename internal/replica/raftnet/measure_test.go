package raftnet

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/kawa-broker/kawa/internal/kawatest/wait"
	"github.com/kawa-broker/kawa/internal/replica"
)

// TestMeasureIdle measures what idle groups cost over TCP (issue 16, "Measure"), with heartbeat coalescing
// and without: three nodes in this process on loopback, $KAWA_RAFTNET_GROUPS groups (default 1000), a tick
// every 100ms with a heartbeat every tick (election after 10), no proposals; CPU of the process and bytes
// sent by all three transports over a 10 s window once every group has a leader. Wall-clock and slow, so it
// runs only with KAWA_RAFTNET_MEASURE=1:
//
//	KAWA_RAFTNET_MEASURE=1 go test ./internal/replica/raftnet -run TestMeasure -v
func TestMeasureIdle(t *testing.T) {
	groups := measureGroups(t)
	for _, coalesce := range []bool{true, false} {
		t.Run(fmt.Sprintf("coalesce=%v", coalesce), func(t *testing.T) {
			c := newClusterSched(t, groups, func(cfg *Config) { cfg.DisableHeartbeatCoalescing = !coalesce },
				func(rc *replica.Config) { rc.TickInterval, rc.HeartbeatTicks = 100*time.Millisecond, 1 })
			waitLeaders(t, c)
			time.Sleep(2 * time.Second) // let the elections' traffic pass before the window
			cpu0, sent0, wall0 := cpuTime(t), sentStats(c), time.Now()
			time.Sleep(10 * time.Second) // the measurement window
			cpu, sent1, wall := cpuTime(t)-cpu0, sentStats(c), time.Since(wall0).Seconds()
			bytes, msgs := sent1.BytesSent-sent0.BytesSent, sent1.MsgsSent-sent0.MsgsSent
			per := 1000 / float64(groups)
			t.Logf("coalesce=%v: %d groups x 3 nodes idle: CPU %.1f%% of one core for the process (%.1f%% per node per 1,000 groups); "+
				"per node per 1,000 groups %.0f bytes/s, %.0f messages/s (%.1f bytes each)", coalesce, groups, 100*cpu.Seconds()/wall,
				100*cpu.Seconds()/wall/3*per, float64(bytes)/wall/3*per, float64(msgs)/wall/3*per, float64(bytes)/float64(max(msgs, 1)))
		})
	}
}

// TestMeasureCommits measures commits per second of small (16-byte) proposals across three nodes on
// loopback: $KAWA_RAFTNET_COMMIT_GROUPS groups (default 100), each kept at up to 32 proposals in flight at
// its leader, for 10 s; an entry counts when the slowest node applied it. FileLog fsyncs every cycle's
// appends (one fsync per group with new entries).
func TestMeasureCommits(t *testing.T) {
	measureGroups(t)
	groups := 100
	if v, err := strconv.Atoi(os.Getenv("KAWA_RAFTNET_COMMIT_GROUPS")); err == nil && v > 0 {
		groups = v
	}
	c := newClusterSched(t, groups, nil, func(rc *replica.Config) { rc.TickInterval = 100 * time.Millisecond })
	waitLeaders(t, c)
	proposed := make([]int, groups)
	slowest := func() int {
		low := -1
		for id := uint64(1); id <= 3; id++ {
			n := 0
			for g := range groups {
				n += c.nodes[id].sms[g].applied()
			}
			if low < 0 || n < low {
				low = n
			}
		}
		return low
	}
	value := make([]byte, 16)
	start, base := time.Now(), slowest()
	for time.Since(start) < 10*time.Second {
		for g := range groups {
			lead := c.leader(g, all)
			if lead == 0 {
				continue
			}
			for proposed[g]-c.nodes[lead].sms[g].applied() < 32 {
				proposed[g]++
				copy(value, fmt.Sprintf("g%d-%d", g, proposed[g]))
				if err := c.nodes[lead].node.Propose(replica.GroupID(g), value); err != nil {
					t.Fatal(err)
				}
			}
		}
		select { // an apply anywhere frees room for more proposals
		case <-c.notify:
		case <-time.After(10 * time.Millisecond):
		}
	}
	elapsed, done := time.Since(start).Seconds(), slowest()-base
	t.Logf("%d groups, 3 nodes: %d entries committed and applied on all nodes in %.1f s: %.0f commits/s", groups, done, elapsed, float64(done)/elapsed)
}

func measureGroups(t *testing.T) int {
	if os.Getenv("KAWA_RAFTNET_MEASURE") != "1" {
		t.Skip("set KAWA_RAFTNET_MEASURE=1 to measure")
	}
	if v, err := strconv.Atoi(os.Getenv("KAWA_RAFTNET_GROUPS")); err == nil && v > 0 {
		return v
	}
	return 1000
}

func waitLeaders(t *testing.T, c *cluster) {
	wait.Until(t, 3*time.Minute, "a leader in every group", func() bool {
		for g := range c.groups {
			if c.leader(g, all) == 0 {
				return false
			}
		}
		return true
	})
	runtime.GC()
}

// sentStats sums the three transports' bytes and messages sent.
func sentStats(c *cluster) (s Stats) {
	for _, nd := range c.nodes {
		st := nd.tr.Stats()
		s.BytesSent += st.BytesSent
		s.MsgsSent += st.MsgsSent
	}
	return s
}

func cpuTime(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
