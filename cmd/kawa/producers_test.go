package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kawa-broker/kawa/cmd/internal/cli"
	"github.com/kawa-broker/kawa/internal/kawatest"
)

// TestProducersDescribe: `kawa producers describe` prints the idempotent
// producer franz-go used, with its exact epoch, last sequence and last
// timestamp, on the partition it wrote, and nothing for the other one.
func TestProducersDescribe(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	k.CreateTopic("tp", 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	prod := k.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic("tp"))
	ts := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	var recs []*kgo.Record
	for i := range 3 {
		recs = append(recs, &kgo.Record{Partition: 0, Value: []byte{byte(i)}, Timestamp: ts})
	}
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	pid, epoch, err := prod.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}

	out := mustRun(t, runProducers, "", "describe", "tp", "--brokers="+k.Addr)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "PARTITION") {
		t.Fatalf("want a header and one row, got:\n%s", out)
	}
	want := []string{"0", fmt.Sprint(pid), fmt.Sprint(epoch), "2", "2024-05-01T12:00:00Z", "-1", "-1"}
	if got := strings.Fields(lines[1]); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("row %q, want fields %q", lines[1], want)
	}

	_, err = runCmd(t, runProducers, "", "describe", "nope", "--brokers="+k.Addr)
	if !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("unknown topic: %v, want UNKNOWN_TOPIC_OR_PARTITION", err)
	}
}

// TestProducersUsage: missing or unknown subcommands and a missing TOPIC are
// usage errors; -h prints the usage.
func TestProducersUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{nil, {"list"}, {"describe"}, {"describe", "a", "b"}} {
		var usage *cli.UsageError
		if _, err := runCmd(t, runProducers, "", args...); !errors.As(err, &usage) {
			t.Errorf("producers %q: %v, want a usage error", args, err)
		}
	}
	var help *cli.HelpRequest
	if _, err := runCmd(t, runProducers, "", "-h"); !errors.As(err, &help) || !strings.Contains(help.Usage, "kawa producers describe TOPIC") {
		t.Errorf("producers -h: %v", err)
	}
}
