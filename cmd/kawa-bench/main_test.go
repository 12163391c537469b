package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kawa-broker/kawa/cmd/internal/cli"
	"github.com/kawa-broker/kawa/cmd/internal/clitest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestBenchProduceThenFetch: a short produce run reports consistent JSON
// (rates match counts, quantiles ordered, broker usage of this very process,
// which hosts kfake), and a fetch run reads back exactly what is in the log.
func TestBenchProduceThenFetch(t *testing.T) {
	t.Parallel()
	addr := clitest.Broker(t)
	topic := clitest.UniqueName(t, "bench")
	pid := strconv.Itoa(os.Getpid())
	out := mustRun(t, "produce", "--brokers", addr, "--topic", topic, "--partitions", "2",
		"--producers", "2", "--record-size", "100", "--duration", "1s", "--warmup", "200ms",
		"--broker-pid", pid, "--json")
	var p produceResult
	decodeOne(t, out, &p)
	if p.Bench != "produce" || p.Topic != topic || p.Partitions != 2 || p.Producers != 2 || p.RecordSize != 100 ||
		p.Acks != "all" || !p.Idempotent || p.Errors != 0 || p.DurationS != 1 {
		t.Errorf("produce result %+v", p)
	}
	l := p.Latency
	if p.Records == 0 || l.Count == 0 || !(0 < l.P50 && l.P50 <= l.P99 && l.P99 <= l.P999 && l.P999 <= l.Max) {
		t.Errorf("records %d, latency %+v", p.Records, l)
	}
	if want := float64(p.Records) / p.DurationS; p.RecordsPerS < want*0.99 || p.RecordsPerS > want*1.01 {
		t.Errorf("records/s %v, want %v", p.RecordsPerS, want)
	}
	if p.Broker == nil || p.Broker.PID != os.Getpid() || p.Broker.PeakRSSBytes <= 0 || p.Broker.CPUSeconds < 0 {
		t.Errorf("broker usage %+v", p.Broker)
	}

	out = mustRun(t, "fetch", "--brokers", addr, "--topic", topic, "--json")
	var f fetchResult
	decodeOne(t, out, &f)
	if f.Bench != "fetch" || f.Partitions != 2 || !f.Complete || f.Records != f.Expected || f.Bytes != 100*f.Records {
		t.Errorf("fetch result %+v", f)
	}
	// Every record sent was acked (no errors), so the log holds at least the
	// window's acks plus the warmup's.
	if f.Records < p.Records || f.MBPerS <= 0 {
		t.Errorf("fetched %d records at %v MB/s, produce acked %d in the window", f.Records, f.MBPerS, p.Records)
	}
}

// TestBenchProduceSyncRate: with --sync and --rate, the schedule fixes how
// many records are sent (200/s for 0.5s) and each gets one latency sample.
func TestBenchProduceSyncRate(t *testing.T) {
	t.Parallel()
	addr := clitest.Broker(t)
	out := mustRun(t, "produce", "--brokers", addr, "--topic", clitest.UniqueName(t, "sync"),
		"--sync", "--rate", "200", "--duration", "500ms", "--warmup", "0s", "--acks", "1")
	lines := strings.Split(out, "\n")
	if !strings.Contains(lines[0], "1 partitions, 1 producers, 1024 B records, acks=1 sync, 0.5s window after 0.0s warmup") {
		t.Errorf("header %q", lines[0])
	}
	if !strings.Contains(out, "(100 samples)") {
		t.Errorf("want exactly 100 latency samples (200/s for 0.5s):\n%s", out)
	}
}

func TestBenchFetchEmptyTopic(t *testing.T) {
	t.Parallel()
	addr := clitest.Broker(t)
	topic := clitest.Topic(t, addr, 3)
	_, err := runCmd(t, "fetch", "--brokers", addr, "--topic", topic)
	if err == nil || !strings.HasSuffix(err.Error(), "has no records to fetch (3 partitions)") {
		t.Errorf("err %v", err)
	}
}

// TestBenchPeerKfake: the peer serves produce and consume with a data dir
// and per-batch fsync, and its records survive a restart on that dir.
func TestBenchPeerKfake(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	addr, stop := startPeer(t, kfake.Ports(0), kfake.DataDir(dir), kfake.SyncWrites())
	topic := "peer"
	cl := clitest.Client(t, addr)
	if _, err := kadm.NewClient(cl).CreateTopic(context.Background(), 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"a", "b", "c"} {
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: topic, Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cl.Close()
	stop()

	addr, stop = startPeer(t, kfake.Ports(0), kfake.DataDir(dir))
	defer stop()
	cl = clitest.Client(t, addr, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []string
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for len(got) < 3 && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if strings.Join(got, ",") != "a,b,c" {
		t.Errorf("after restart: %q", got)
	}
	cl.Close()
}

// startPeer runs servePeerKfake until the returned stop is called, which
// waits for its "kfake stopped" line.
func startPeer(t *testing.T, opts ...kfake.Opt) (addr string, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r, w := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- servePeerKfake(ctx, opts, w)
		w.Close()
	}()
	sc := bufio.NewScanner(r)
	if !sc.Scan() {
		cancel()
		t.Fatalf("peer printed nothing: %v", <-done)
	}
	addr, ok := strings.CutPrefix(sc.Text(), "kfake listening on ")
	if !ok {
		t.Fatalf("peer printed %q", sc.Text())
	}
	return addr, func() {
		cancel()
		if !sc.Scan() || sc.Text() != "kfake stopped" {
			t.Errorf("peer did not report its stop: %q", sc.Text())
		}
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

// decodeOne decodes out as exactly one JSON line.
func decodeOne(t *testing.T, out string, v any) {
	t.Helper()
	if strings.Count(out, "\n") != 1 {
		t.Fatalf("want one JSON line, got %q", out)
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("%v: %q", err, out)
	}
}

// TestExitStatus: usage errors exit 2 naming the mode, help exits 0.
func TestExitStatus(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args      []string
		status    int
		stderr1   string
		stdoutPfx string
	}{
		{nil, 2, "kawa-bench: missing bench mode", ""},
		{[]string{"nope"}, 2, `kawa-bench: unknown bench mode "nope"`, ""},
		{[]string{"produce", "--producers", "0"}, 2, "kawa-bench produce: --producers must be in [1, 1024]", ""},
		{[]string{"peer-kfake", "--sync-writes"}, 2, "kawa-bench peer-kfake: --sync-writes needs --data-dir", ""},
		{[]string{"fetch", "-h"}, 0, "", "usage: kawa-bench fetch --topic T [flags]"},
		{[]string{"txn", "-h"}, 0, "", "usage: kawa-bench txn "},
	} {
		var stdout, stderr bytes.Buffer
		status := cli.ExitStatus("kawa-bench", runBench(tt.args, strings.NewReader(""), &stdout), &stdout, &stderr)
		if status != tt.status {
			t.Errorf("%q: status %d, want %d; stderr:\n%s", tt.args, status, tt.status, stderr.String())
		}
		if first, _, _ := strings.Cut(stderr.String(), "\n"); first != tt.stderr1 {
			t.Errorf("%q: stderr first line %q, want %q", tt.args, first, tt.stderr1)
		}
		if !strings.HasPrefix(stdout.String(), tt.stdoutPfx) {
			t.Errorf("%q: stdout %q, want prefix %q", tt.args, stdout.String(), tt.stdoutPfx)
		}
	}
}
