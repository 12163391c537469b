package broker_test

import (
	"bytes"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/kawa-broker/kawa/internal/kawatest"
)

// TestCompactionKcat: librdkafka (kcat) produces the acceptance size, 100,000 keys x 10 versions (1M
// records, 1 MiB segments), and NULL-valued tombstones (-Z) for every third key; after two cleaning passes
// (delete.retention.ms=0) kcat reads exactly one record per live key, at its latest value, and none for the
// tombstoned keys, also after a restart.
func TestCompactionKcat(t *testing.T) {
	t.Parallel()
	kcat := kcatPath(t)
	k := kawatest.NewBroker(t)
	compactedTopic(k, "kc", map[string]*string{"internal.segment.bytes": ptr("1048576")})
	const keys, versions, roll = 100_000, 10, 1100 // roll: > 1 MiB of fresh keys, so every version is in a closed segment
	var in strings.Builder
	want := map[string]string{}
	for v := range versions {
		for i := range keys {
			fmt.Fprintf(&in, "k%d:v%d-%d\n", i, i, v)
			want[fmt.Sprintf("k%d", i)] = fmt.Sprintf("v%d-%d", i, v)
		}
	}
	for i := 0; i < keys; i += 3 {
		fmt.Fprintf(&in, "k%d:\n", i) // -Z: an empty value is sent as NULL, a tombstone
		delete(want, fmt.Sprintf("k%d", i))
	}
	prod := exec.Command(kcat, "-P", "-b", k.Addr, "-t", "kc", "-p", "0", "-K", ":", "-Z", "-X", "acks=all")
	prod.Stdin = strings.NewReader(in.String())
	if out, err := prod.CombinedOutput(); err != nil {
		t.Fatalf("kcat -P: %v\n%s", err, out)
	}
	rollPast(t, k.Client(), "kc", "roll", roll)
	for range 2 {
		if err := k.B.CleanNow(); err != nil {
			t.Fatal(err)
		}
	}
	check := func(stage string) {
		t.Helper()
		cons := exec.Command(kcat, "-C", "-b", k.Addr, "-t", "kc", "-o", "beginning", "-e", "-q", "-f", "%k=%s\n")
		var stderr bytes.Buffer
		cons.Stderr = &stderr
		out, err := cons.Output()
		if err != nil {
			t.Fatalf("%s: kcat -C: %v\n%s", stage, err, stderr.String())
		}
		seen := map[string]int{}
		n := 0
		for _, line := range strings.Split(strings.TrimSuffix(string(out), "\n"), "\n") {
			key, val, _ := strings.Cut(line, "=")
			n++
			if strings.HasPrefix(key, "roll-") {
				continue
			}
			seen[key]++
			if want[key] != val {
				t.Fatalf("%s: kcat read %s=%q, want %q", stage, key, val, want[key])
			}
		}
		for key := range want {
			if seen[key] != 1 {
				t.Fatalf("%s: key %s read %d times", stage, key, seen[key])
			}
		}
		if n != len(want)+roll {
			t.Fatalf("%s: kcat read %d records, want %d live keys + %d", stage, n, len(want), roll)
		}
	}
	check("after cleaning")
	k = k.Restart()
	check("after restart")
}
