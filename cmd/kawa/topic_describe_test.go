package main

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kawa-broker/kawa/internal/kawatest/wait"
)

// TestTopicDescribeSizeAndCleaner: against `kawa serve`, `kawa topic describe` shows each partition's
// SIZE from DescribeLogDirs (0 when empty, growing with what is produced), and for a compacted topic the
// line naming the cleaner gauges, which /metrics then serves for that topic's partition.
func TestTopicDescribeSizeAndCleaner(t *testing.T) {
	t.Parallel()
	props := filepath.Join(t.TempDir(), "fast.properties")
	if err := os.WriteFile(props, []byte("log.cleaner.backoff.ms=50\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	metricsAddr := freeAddr(t)
	p := startKawa(t, t.TempDir(), "--config", props, "--metrics-addr", metricsAddr)
	b := "--brokers=" + p.Addr
	mustRun(t, runTopic, "", "create", "kv", "--config", "cleanup.policy=compact", b)
	mustRun(t, runTopic, "", "create", "plain", b)

	size := func(out string) int {
		t.Helper()
		m := regexp.MustCompile(`\n0 +1 +1 +1 +0 +\d+ +(\d+)\n`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("no partition 0 row with a numeric SIZE:\n%s", out)
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	const cleanerLine = "cleaner progress: kawa_cleaner_dirty_ratio"
	out := mustRun(t, runTopic, "", "describe", "plain", b)
	if n := size(out); n != 0 {
		t.Errorf("empty topic: SIZE %d, want 0:\n%s", n, out)
	}
	if strings.Contains(out, cleanerLine) {
		t.Errorf("cleanup.policy=delete topic shows the cleaner line:\n%s", out)
	}

	mustRun(t, runProduce, "a:1\nb:2\n", "--topic", "kv", "--key-separator", ":", b)
	out = mustRun(t, runTopic, "", "describe", "kv", b)
	first := size(out)
	if first <= 0 {
		t.Errorf("after 2 records: SIZE %d, want > 0:\n%s", first, out)
	}
	if !strings.Contains(out, cleanerLine) || !strings.Contains(out, `{topic="kv"}`) {
		t.Errorf("compacted topic lacks the cleaner line:\n%s", out)
	}
	mustRun(t, runProduce, "a:3\nb:4\n", "--topic", "kv", "--key-separator", ":", b)
	if n := size(mustRun(t, runTopic, "", "describe", "kv", b)); n <= first {
		t.Errorf("after 2 more records: SIZE %d, want more than %d", n, first)
	}

	// The cleaner looks at kv in its next round (every 50 ms), and the gauges follow.
	want := []string{`kawa_cleaner_dirty_ratio{partition="0",topic="kv"}`, `kawa_cleaner_first_dirty_offset{partition="0",topic="kv"} 0`,
		`kawa_cleaner_last_clean_timestamp_seconds{partition="0",topic="kv"} 0`} // active segment only: nothing cleaned yet
	var body string
	wait.Until(t, 30*time.Second, "the cleaner gauges for kv-0 on /metrics", func() bool {
		resp, err := http.Get("http://" + metricsAddr + "/metrics")
		if err != nil {
			return false
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = string(raw)
		return strings.Contains(body, want[0])
	})
	for _, w := range want[1:] {
		if !strings.Contains(body, w+"\n") {
			t.Errorf("/metrics lacks %s", w)
		}
	}
	if strings.Contains(body, `topic="plain"`) {
		t.Errorf("/metrics has cleaner gauges for the cleanup.policy=delete topic plain")
	}
}
