package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/kawa-broker/kawa/cmd/internal/clitest"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// keyedLines returns n "key-i:value i" lines and what consume --print-key
// prints for them.
func keyedLines(n, keys int) (in, out string) {
	var ib, ob strings.Builder
	for i := range n {
		fmt.Fprintf(&ib, "key-%d:value %d\n", i%keys, i)
		fmt.Fprintf(&ob, "key-%d\tvalue %d\n", i%keys, i)
	}
	return ib.String(), ob.String()
}

// TestProduceConsumeKeyedRoundTrip: 100 keyed lines in, the same 100
// key<TAB>value lines out, in order (one partition).
func TestProduceConsumeKeyedRoundTrip(t *testing.T) {
	t.Parallel()
	addr := clitest.Broker(t)
	topic := clitest.Topic(t, addr, 1)
	in, want := keyedLines(100, 100)
	out := mustRun(t, runProduce, in, "--brokers", addr, "--topic", topic, "--key-separator", ":")
	if out != "produced 100 records\n" {
		t.Fatalf("produce printed %q", out)
	}
	out = mustRun(t, runConsume, "", "--brokers", addr, "--topic", topic, "--from-beginning", "--print-key", "--max-messages", "100")
	if out != want {
		t.Errorf("consume printed:\n%s\nwant:\n%s", out, want)
	}
}

// TestProduceConsumeKeyedPartitions: 300 lines over 10 keys on 3
// partitions come back complete, and each key's values in produce order.
func TestProduceConsumeKeyedPartitions(t *testing.T) {
	t.Parallel()
	addr := clitest.Broker(t)
	topic := clitest.Topic(t, addr, 3)
	in, want := keyedLines(300, 10)
	mustRun(t, runProduce, in, "--brokers", addr, "--topic", topic, "--key-separator", ":")
	out := mustRun(t, runConsume, "", "--brokers", addr, "--topic", topic, "--from-beginning", "--print-key", "--max-messages", "300")
	got := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	wantLines := strings.Split(strings.TrimSuffix(want, "\n"), "\n")
	for key := range 10 {
		prefix := fmt.Sprintf("key-%d\t", key)
		g := slices.DeleteFunc(slices.Clone(got), func(s string) bool { return !strings.HasPrefix(s, prefix) })
		w := slices.DeleteFunc(slices.Clone(wantLines), func(s string) bool { return !strings.HasPrefix(s, prefix) })
		if !slices.Equal(g, w) {
			t.Errorf("key %d: got %q, want %q", key, g, w)
		}
	}
	if len(got) != 300 {
		t.Errorf("consumed %d lines, want 300", len(got))
	}
}

// TestProduceLineEdges: lines without the separator get a null key (printed
// empty), empty lines are empty values, a last line without "\n" counts, and
// only the first separator splits.
func TestProduceLineEdges(t *testing.T) {
	t.Parallel()
	addr := clitest.Broker(t)
	topic := clitest.Topic(t, addr, 1)
	in := "k1=v1\nno separator\n\nk2=v=2\n=empty key\nlast"
	out := mustRun(t, runProduce, in, "--brokers", addr, "--topic", topic, "--key-separator", "=")
	if out != "produced 6 records\n" {
		t.Fatalf("produce printed %q", out)
	}
	out = mustRun(t, runConsume, "", "--brokers", addr, "--topic", topic, "--from-beginning", "--print-key", "--max-messages", "6")
	want := "k1\tv1\n\tno separator\n\t\nk2\tv=2\n\tempty key\n\tlast\n"
	if out != want {
		t.Errorf("consume printed %q, want %q", out, want)
	}
	out = mustRun(t, runConsume, "", "--brokers", addr, "--topic", topic, "--from-beginning", "--max-messages", "6")
	if want := "v1\nno separator\n\nv=2\nempty key\nlast\n"; out != want {
		t.Errorf("values printed %q, want %q", out, want)
	}
}

// TestProduceAcks: acks 1 and 0 (idempotence off by themselves) deliver.
func TestProduceAcks(t *testing.T) {
	t.Parallel()
	addr := clitest.Broker(t)
	topic := clitest.Topic(t, addr, 1)
	for _, acks := range []string{"1", "0", "all"} {
		out := mustRun(t, runProduce, "x\ny\n", "--brokers", addr, "--topic", topic, "--acks", acks)
		if out != "produced 2 records\n" {
			t.Errorf("acks %s: %q", acks, out)
		}
	}
	mustRun(t, runProduce, "z\n", "--brokers", addr, "--topic", topic, "--idempotent=false")
	out := mustRun(t, runConsume, "", "--brokers", addr, "--topic", topic, "--from-beginning", "--max-messages", "7")
	if out != "x\ny\nx\ny\nx\ny\nz\n" {
		t.Errorf("consume printed %q", out)
	}
}

// TestConsumePartitionOffset: --partition with --offset starts exactly
// there; --timeout ends an idle consume; the default start is the end.
func TestConsumePartitionOffset(t *testing.T) {
	t.Parallel()
	addr := clitest.Broker(t)
	topic := clitest.Topic(t, addr, 1)
	mustRun(t, runProduce, "0\n1\n2\n3\n4\n5\n6\n7\n8\n9\n", "--brokers", addr, "--topic", topic)
	b := []string{"--brokers", addr, "--topic", topic, "--partition", "0"}
	out := mustRun(t, runConsume, "", append(b, "--offset", "7", "--max-messages", "2")...)
	if out != "7\n8\n" {
		t.Errorf("offset 7, max 2: %q", out)
	}
	out = mustRun(t, runConsume, "", append(b, "--offset", "7", "--timeout", "1s")...)
	if out != "7\n8\n9\n" {
		t.Errorf("offset 7 until idle: %q", out)
	}
	out = mustRun(t, runConsume, "", append(b, "--timeout", "1s")...)
	if out != "" {
		t.Errorf("from the end: %q, want nothing", out)
	}
}

// TestConsumeGroup: a group resumes where its previous member stopped, and
// --max-messages commits only what was printed.
func TestConsumeGroup(t *testing.T) {
	t.Parallel()
	addr := clitest.Broker(t)
	topic := clitest.Topic(t, addr, 1)
	group := clitest.UniqueName(t, "g")
	mustRun(t, runProduce, "0\n1\n2\n3\n4\n5\n6\n7\n8\n9\n", "--brokers", addr, "--topic", topic)
	b := []string{"--brokers", addr, "--topic", topic, "--group", group, "--from-beginning"}
	if out := mustRun(t, runConsume, "", append(b, "--max-messages", "4")...); out != "0\n1\n2\n3\n" {
		t.Errorf("first member: %q", out)
	}
	if out := mustRun(t, runConsume, "", append(b, "--max-messages", "6")...); out != "4\n5\n6\n7\n8\n9\n" {
		t.Errorf("second member: %q", out)
	}
}

// TestConsumeErrors: a missing topic or partition fails fast by Kafka name.
func TestConsumeErrors(t *testing.T) {
	t.Parallel()
	addr := clitest.Broker(t)
	topic := clitest.Topic(t, addr, 1)
	_, err := runCmd(t, runConsume, "", "--brokers", addr, "--topic", clitest.UniqueName(t, "missing"), "--timeout", "1s")
	if !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Errorf("missing topic: %v, want UNKNOWN_TOPIC_OR_PARTITION", err)
	}
	_, err = runCmd(t, runConsume, "", "--brokers", addr, "--topic", topic, "--partition", "5", "--timeout", "1s")
	if err == nil || !strings.HasSuffix(err.Error(), "has 1 partitions, no partition 5") {
		t.Errorf("missing partition: %v", err)
	}
}

// TestProduceUnknownTopic: every record failing makes produce fail, with the
// count of acknowledged records still printed.
func TestProduceUnknownTopic(t *testing.T) {
	t.Parallel()
	if clitest.Shared() {
		t.Skip("a shared broker may auto-create topics")
	}
	addr := clitest.Broker(t)
	out, err := runCmd(t, runProduce, "a\nb\n", "--brokers", addr, "--topic", "missing", "--timeout", "2s")
	// Which error a record fails with depends on whether the client's
	// metadata retries or the 2s delivery timeout run out first.
	if !errors.Is(err, kerr.UnknownTopicOrPartition) && !errors.Is(err, kgo.ErrRecordTimeout) ||
		!strings.Contains(err.Error(), "2 of 2 records failed") {
		t.Errorf("err %v, want 2 of 2 failed with UNKNOWN_TOPIC_OR_PARTITION or a record timeout", err)
	}
	if out != "produced 0 records\n" {
		t.Errorf("stdout %q", out)
	}
}
