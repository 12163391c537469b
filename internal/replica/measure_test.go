package replica

import (
	"os"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// TestMeasureIdleGroups measures what idle raft groups cost (issue 16, "Measure": CPU and memory per 1,000
// idle partitions, to decide when heartbeat coalescing and quiescence are needed): three schedulers in this
// process, $KAWA_REPLICA_IDLE_GROUPS groups (default 1000) on each, a tick every 100ms (heartbeat every tick,
// election after 10), in-memory transport, no proposals. Wall-clock and slow, so it runs only with
// KAWA_REPLICA_MEASURE=1:
//
//	KAWA_REPLICA_MEASURE=1 go test ./internal/replica -run TestMeasureIdleGroups -v
func TestMeasureIdleGroups(t *testing.T) {
	if os.Getenv("KAWA_REPLICA_MEASURE") != "1" {
		t.Skip("set KAWA_REPLICA_MEASURE=1 to measure")
	}
	groups := 1000
	if v, err := strconv.Atoi(os.Getenv("KAWA_REPLICA_IDLE_GROUPS")); err == nil && v > 0 {
		groups = v
	}
	nodes, sms := startCluster(t, groups, 2, 100*time.Millisecond)
	start := time.Now()
	for g := 0; g < groups; {
		if sms[1][g].leader() != 0 {
			g++
			continue
		}
		if time.Since(start) > 2*time.Minute {
			t.Fatalf("group %d has no leader after 2 minutes", g)
		}
		time.Sleep(50 * time.Millisecond) // a wall-clock measurement: polling the elections is the point
	}
	t.Logf("%d groups × 3 nodes elected leaders in %v", groups, time.Since(start).Round(time.Millisecond))
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	cpu0, wall0 := cpuTime(t), time.Now()
	time.Sleep(10 * time.Second) // the measurement window
	cpu, wall := cpuTime(t)-cpu0, time.Since(wall0)
	t.Logf("idle: %d groups per node, 3 nodes in one process: %.1f%% of one core per node (%.2f ms CPU per second per 1,000 groups per node); heap in use %.1f MiB per node (%.1f KiB per group replica)",
		groups, 100*cpu.Seconds()/wall.Seconds()/3, 1000*cpu.Seconds()/wall.Seconds()/3*1000/float64(groups),
		float64(ms.HeapInuse)/3/(1<<20), float64(ms.HeapInuse)/3/float64(groups)/1024)
	for _, s := range nodes {
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
	}
}

func cpuTime(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
