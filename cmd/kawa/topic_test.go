package main

import (
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/kawa-broker/kawa/cmd/internal/clitest"
	"github.com/twmb/franz-go/pkg/kerr"
)

// TestTopicLifecycle walks create, list, describe and delete through the
// subcommand functions, checking exact outputs.
func TestTopicLifecycle(t *testing.T) {
	t.Parallel()
	addr := clitest.Broker(t)
	b := "--brokers=" + addr
	name := clitest.UniqueName(t, "orders")

	out := mustRun(t, runTopic, "", "create", name, "--partitions", "3", "--config", "retention.ms=60000", b)
	if want := "created topic " + name + " with 3 partitions\n"; out != want {
		t.Errorf("create: %q, want %q", out, want)
	}
	_, err := runCmd(t, runTopic, "", "create", name, b)
	if !errors.Is(err, kerr.TopicAlreadyExists) {
		t.Errorf("second create: %v, want TOPIC_ALREADY_EXISTS", err)
	}

	out = mustRun(t, runTopic, "", "list", b)
	if !hasRow(out, name, "3", "1") || !strings.HasPrefix(out, "TOPIC") {
		t.Errorf("list lacks %s with 3 partitions, replication 1:\n%s", name, out)
	}

	mustRun(t, runProduce, "a\nb\nc\n", "--topic", name, b)
	out = mustRun(t, runTopic, "", "describe", b, name)
	checkDescribe(t, out, name)

	out = mustRun(t, runTopic, "", "delete", name, b)
	if want := "deleted topic " + name + "\n"; out != want {
		t.Errorf("delete: %q, want %q", out, want)
	}
	if out = mustRun(t, runTopic, "", "list", b); hasRow(out, name, "3", "1") {
		t.Errorf("list after delete still shows %s:\n%s", name, out)
	}
	_, err = runCmd(t, runTopic, "", "delete", name, b)
	if !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Errorf("delete of a deleted topic: %v, want UNKNOWN_TOPIC_OR_PARTITION", err)
	}
	_, err = runCmd(t, runTopic, "", "describe", name, b)
	if !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Errorf("describe of a deleted topic: %v, want UNKNOWN_TOPIC_OR_PARTITION", err)
	}
}

// checkDescribe checks the header, the partition table (3 records without
// keys spread over 3 partitions: end offsets sum to 3, all starts 0, one
// broker leads and holds every replica) and the config set at create.
func checkDescribe(t *testing.T, out, name string) {
	t.Helper()
	head := "topic: " + name + "\nid: "
	if !strings.HasPrefix(out, head) || !strings.Contains(out, "\npartitions: 3\n\n") {
		t.Fatalf("describe header:\n%s", out)
	}
	lines := strings.Split(out, "\n")
	var i int
	for i = range lines {
		if strings.HasPrefix(lines[i], "PARTITION") {
			break
		}
	}
	if got := strings.Fields(lines[i]); strings.Join(got, " ") != "PARTITION LEADER REPLICAS ISR START END SIZE" {
		t.Fatalf("partition header %q", lines[i])
	}
	var endSum int
	for p := 0; p < 3; p++ {
		f := strings.Fields(lines[i+1+p])
		if len(f) != 7 || f[0] != string(rune('0'+p)) || f[1] != f[2] || f[1] != f[3] || f[4] != "0" {
			t.Errorf("partition row %q", lines[i+1+p])
			continue
		}
		end, err := strconv.Atoi(f[5])
		if err != nil {
			t.Errorf("end offset %q: %v", f[5], err)
		}
		endSum += end
	}
	if endSum != 3 {
		t.Errorf("end offsets sum to %d, want 3:\n%s", endSum, out)
	}
	if !regexp.MustCompile(`\nCONFIG +VALUE +SOURCE\n`).MatchString(out) ||
		!regexp.MustCompile(`\nretention\.ms +60000 +DYNAMIC_TOPIC_CONFIG\n`).MatchString(out) {
		t.Errorf("configs lack retention.ms=60000 (DYNAMIC_TOPIC_CONFIG):\n%s", out)
	}
}

// hasRow reports whether a tabwriter table has a row with exactly these cells.
func hasRow(table string, cells ...string) bool {
	for _, line := range strings.Split(table, "\n") {
		if strings.Join(strings.Fields(line), " ") == strings.Join(cells, " ") {
			return true
		}
	}
	return false
}

// TestTopicListExact pins the list layout on a broker holding one topic.
func TestTopicListExact(t *testing.T) {
	t.Parallel()
	if clitest.Shared() {
		t.Skip("exact layout needs a broker of our own")
	}
	addr := clitest.Broker(t)
	name := "events"
	mustRun(t, runTopic, "", "create", name, "--partitions", "12", "--brokers", addr)
	out := mustRun(t, runTopic, "", "list", "--brokers", addr)
	want := "TOPIC   PARTITIONS  REPLICATION\n" +
		"events  12          1\n"
	if out != want {
		t.Errorf("list:\n%q\nwant\n%q", out, want)
	}
}

// TestTopicConfigsCLI: against `kawa serve` started with broker-level topic defaults
// (--compression-type, --log-retention-ms), `kawa topic create --config` stores overrides, `kawa topic
// alter-config` sets and deletes them, and describe shows each value with its source; a bad value is
// refused with INVALID_CONFIG naming it, and a bad broker default stops `kawa serve` at start.
func TestTopicConfigsCLI(t *testing.T) {
	t.Parallel()
	p := startKawa(t, t.TempDir(), "--compression-type", "zstd", "--log-retention-ms", "3600000")
	b := "--brokers=" + p.Addr
	mustRun(t, runTopic, "", "create", "connect-offsets", "--config", "cleanup.policy=compact", "--config", "min.insync.replicas=1", b)
	out := mustRun(t, runTopic, "", "describe", "connect-offsets", b)
	for _, row := range [][]string{
		{"cleanup.policy", "compact", "DYNAMIC_TOPIC_CONFIG"}, {"min.insync.replicas", "1", "DYNAMIC_TOPIC_CONFIG"},
		{"compression.type", "zstd", "STATIC_BROKER_CONFIG"}, {"retention.ms", "3600000", "STATIC_BROKER_CONFIG"},
		{"segment.bytes", "1073741824", "DEFAULT_CONFIG"},
	} {
		if !hasRow(out, row...) {
			t.Errorf("describe lacks %v:\n%s", row, out)
		}
	}
	out = mustRun(t, runTopic, "", "alter-config", "connect-offsets", "--set", "compression.type=lz4", "--delete", "min.insync.replicas", b)
	for _, row := range [][]string{
		{"cleanup.policy", "compact", "DYNAMIC_TOPIC_CONFIG"}, {"compression.type", "lz4", "DYNAMIC_TOPIC_CONFIG"},
		{"min.insync.replicas", "1", "DEFAULT_CONFIG"},
	} {
		if !hasRow(out, row...) {
			t.Errorf("alter-config output lacks %v:\n%s", row, out)
		}
	}
	_, err := runCmd(t, runTopic, "", "alter-config", "connect-offsets", "--set", "compression.zstd.level=99", b)
	if !errors.Is(err, kerr.InvalidConfig) || !strings.Contains(err.Error(), "compression.zstd.level") {
		t.Errorf("alter-config with a bad level: %v, want INVALID_CONFIG naming it", err)
	}
	_, err = runCmd(t, runTopic, "", "create", "x", "--config", "nope=1", b)
	if !errors.Is(err, kerr.InvalidConfig) || !strings.Contains(err.Error(), "nope") {
		t.Errorf("create with an unknown config: %v, want INVALID_CONFIG naming it", err)
	}
	if err := runServe([]string{"--data-dir", t.TempDir(), "--min-insync-replicas", "0"}); err == nil || !strings.Contains(err.Error(), "min.insync.replicas") {
		t.Errorf("serve --min-insync-replicas 0: %v, want a usage error naming min.insync.replicas", err)
	}
}
