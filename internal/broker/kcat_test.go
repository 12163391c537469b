package broker_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kawa-broker/kawa/internal/kawatest"
)

// kcatPath returns the kcat binary. CI sets KAWA_REQUIRE_KCAT=1 so a missing
// kcat fails there instead of skipping.
func kcatPath(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("kcat")
	if err != nil {
		if os.Getenv("KAWA_REQUIRE_KCAT") != "" {
			t.Fatal("kcat not installed but KAWA_REQUIRE_KCAT is set")
		}
		t.Skip("kcat not installed (apt-get install kcat)")
	}
	return p
}

// licenseLines returns n non-empty lines of the license texts Debian's
// base-files ships, repeated in order until n are collected.
func licenseLines(t *testing.T, n int) []string {
	t.Helper()
	files, _ := filepath.Glob("/usr/share/common-licenses/*")
	var lines []string
	for len(lines) < n {
		before := len(lines)
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				continue
			}
			for _, l := range strings.Split(string(b), "\n") {
				// kcat's line mode skips empty lines, so the test sends none.
				if strings.TrimSpace(l) != "" && len(lines) < n {
					lines = append(lines, l)
				}
			}
		}
		if len(lines) == before {
			t.Skip("no license texts under /usr/share/common-licenses")
		}
	}
	return lines
}

// TestKcatRoundTrip: librdkafka (kcat) produces 10k lines of a real text
// file and reads them back identical; kcat -L lists the topic.
func TestKcatRoundTrip(t *testing.T) {
	t.Parallel()
	kcat := kcatPath(t)
	k := kawatest.NewBroker(t)
	k.CreateTopic("kcat", 1, nil)
	lines := licenseLines(t, 10_000)
	input := strings.Join(lines, "\n") + "\n"

	prod := exec.Command(kcat, "-P", "-b", k.Addr, "-t", "kcat", "-p", "0", "-X", "acks=all")
	prod.Stdin = strings.NewReader(input)
	if out, err := prod.CombinedOutput(); err != nil {
		t.Fatalf("kcat -P: %v\n%s", err, out)
	}

	cons := exec.Command(kcat, "-C", "-b", k.Addr, "-t", "kcat", "-o", "beginning", "-e", "-q", "-f", "%s\n")
	var stderr bytes.Buffer
	cons.Stderr = &stderr
	out, err := cons.Output()
	if err != nil {
		t.Fatalf("kcat -C: %v\n%s", err, stderr.String())
	}
	if string(out) != input {
		got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
		t.Fatalf("kcat read back %d lines, want %d identical lines (first: %q)", len(got), len(lines), got[0])
	}

	list, err := exec.Command(kcat, "-L", "-b", k.Addr, "-t", "kcat").CombinedOutput()
	if err != nil {
		t.Fatalf("kcat -L: %v\n%s", err, list)
	}
	if !strings.Contains(string(list), `topic "kcat" with 1 partitions`) {
		t.Fatalf("kcat -L does not list the topic:\n%s", list)
	}
}
