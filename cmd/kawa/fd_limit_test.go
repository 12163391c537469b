package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestManyPartitionsUnderLowFileLimit: `kawa serve` under `ulimit -n 256`
// creates and writes 5,000 partitions (three segment files each, so 15,000
// files), keeps serving while 300 connections exhaust its descriptors, and
// after a restart on the same data, under the same limit, starts and serves
// every partition with its record. Before the segment file cache every
// segment held three descriptors, so the broker failed at ~80 partitions;
// and an accept that failed with EMFILE stopped the broker.
func TestManyPartitionsUnderLowFileLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("5,000 partitions")
	}
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Skip("prlimit (util-linux) not installed")
	}
	const parts = 5000
	wrap := []string{prlimit, "--nofile=256:256", "--"}
	dir := t.TempDir()
	p := startKawaWrapped(t, wrap, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	start := time.Now()
	// Creating 5,000 partitions (15,000 files, each made durable) can
	// outlast kgo's request timeout on a loaded machine, and kgo then
	// retries: allow for both.
	adm := kadm.NewClient(newClient(t, p.Addr, kgo.RequestTimeoutOverhead(2*time.Minute)))
	adm.SetTimeoutMillis(int32((2 * time.Minute).Milliseconds()))
	resp, err := adm.CreateTopic(ctx, parts, 1, nil, "many")
	if err == nil {
		err = resp.Err
	}
	if errors.Is(err, kerr.TopicAlreadyExists) {
		err = nil // a retry of our own request that had already succeeded
	}
	if err != nil {
		t.Fatalf("create %d partitions: %v", parts, err)
	}
	cl := newClient(t, p.Addr, kgo.DefaultProduceTopic("many"))
	recs := make([]*kgo.Record, parts)
	for i := range recs {
		recs[i] = &kgo.Record{Partition: int32(i), Value: []byte(fmt.Sprint(i))}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce to %d partitions: %v", parts, err)
	}
	t.Logf("created and wrote %d partitions in %v", parts, time.Since(start).Round(time.Millisecond))

	// Exhaust the descriptors with connections: accepts fail with EMFILE
	// (or succeed), the broker keeps running, and serves once they close.
	var flood []net.Conn
	for i := 0; i < 300; i++ {
		c, err := net.DialTimeout("tcp", p.Addr, 5*time.Second)
		if err != nil {
			break
		}
		flood = append(flood, c)
	}
	for _, c := range flood {
		c.Close()
	}
	select {
	case <-p.done:
		t.Fatal("kawa exited while connections exhausted its descriptors")
	default:
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte("after-flood")}).FirstErr(); err != nil {
		t.Fatalf("produce after the connection flood: %v", err)
	}
	cl.Close()
	stopAt := time.Now()
	if err := p.Stop(ctx); err != nil {
		t.Fatalf("stop: %v", err)
	}
	t.Logf("stopped in %v", time.Since(stopAt).Round(time.Millisecond))

	start = time.Now()
	p = startKawaWrapped(t, wrap, dir)
	t.Logf("restarted on %d partitions in %v", parts, time.Since(start).Round(time.Millisecond))
	adm = kadm.NewClient(newClient(t, p.Addr))
	ends, err := adm.ListEndOffsets(ctx, "many")
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(o kadm.ListedOffset) {
		want := int64(1)
		if o.Partition == 0 {
			want = 2
		}
		if o.Err != nil || o.Offset != want {
			t.Errorf("partition %d after restart: end offset %d (err %v), want %d", o.Partition, o.Offset, o.Err, want)
		}
	})
	if n := len(ends["many"]); n != parts {
		t.Fatalf("%d partitions listed after restart, want %d", n, parts)
	}
	t.Logf("end offsets of %d partitions listed after %v", parts, time.Since(start).Round(time.Millisecond))
	cons := newClient(t, p.Addr, kgo.ConsumeTopics("many"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := map[int32]string{}
	for len(seen) < parts {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d partitions before timing out", len(seen), parts)
		}
		fs.EachError(func(topic string, part int32, err error) { t.Errorf("fetch %s/%d: %v", topic, part, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if _, ok := seen[r.Partition]; !ok {
				seen[r.Partition] = string(r.Value)
			}
		})
	}
	t.Logf("consumed every partition %v after the restart", time.Since(start).Round(time.Millisecond))
	for i := int32(0); i < parts; i++ {
		if seen[i] != fmt.Sprint(i) {
			t.Fatalf("partition %d holds %q first, want %q", i, seen[i], fmt.Sprint(i))
		}
	}
}
