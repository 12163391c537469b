package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/kawa-broker/kawa/cmd/internal/procstat"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestInFlightRequestMemoryCapped: 500 connections each declare a 100 MiB
// request and send 4 MiB of it. Before queued.max.request.bytes, 300 such
// connections took `kawa serve` to 1.97 GB RSS; now the peak RSS stays
// within the cap plus the runtime's overhead, the trickling connections are
// closed after --request-read-timeout, and a producer and consumer work
// afterwards with nothing acknowledged lost.
func TestInFlightRequestMemoryCapped(t *testing.T) {
	if testing.Short() {
		t.Skip("moves 2 GB over loopback")
	}
	const (
		conns    = 500
		declared = 100 << 20
		sent     = 4 << 20
		cap      = 128 << 20
	)
	p := startKawa(t, t.TempDir(), "--queued-max-request-bytes", fmt.Sprint(cap), "--request-read-timeout", "10s")
	pid := p.cmd.Process.Pid
	base, err := procstat.PeakRSS(pid)
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := newClient(t, p.Addr, kgo.DefaultProduceTopic("mem"), kgo.AllowAutoTopicCreation())
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("before")}).FirstErr(); err != nil {
		t.Fatalf("produce before the attack: %v", err)
	}

	body := make([]byte, sent)
	var wg sync.WaitGroup
	closedByBroker := make(chan bool, conns)
	for i := 0; i < conns; i++ {
		c, err := net.Dial("tcp", p.Addr)
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(90 * time.Second))
			c.Write(binary.BigEndian.AppendUint32(nil, declared))
			c.Write(body) // blocks while the broker, at its cap, does not read
			_, err := io.Copy(io.Discard, c)
			ne, ok := err.(net.Error)
			closedByBroker <- !(ok && ne.Timeout())
		}()
	}
	wg.Wait()
	close(closedByBroker)
	for ok := range closedByBroker {
		if !ok {
			t.Fatal("a trickling connection was not closed by the broker")
		}
	}
	peak, err := procstat.PeakRSS(pid)
	if err != nil {
		t.Fatal(err)
	}
	f, _ := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	rss, _ := procstat.ParseStatusKB(f, "VmRSS:")
	f.Close()
	t.Logf("kawa serve: peak RSS %d MiB (before the attack %d MiB, now %d MiB) with %d connections each declaring %d MiB and sending %d MiB; queued.max.request.bytes %d MiB",
		peak>>20, base>>20, rss>>20, conns, declared>>20, sent>>20, cap>>20)
	// The pool holds at most cap of request buffers; the Go heap may hold
	// as much again of freed (outgrown) buffers before a GC, and each
	// connection has its own buffered reader and writer (128 KiB). 3*cap +
	// 100 MiB is far below the 1.97 GB of the unbounded broker.
	if limit := int64(3*cap + 100<<20); peak > limit {
		t.Fatalf("peak RSS %d MiB over %d MiB", peak>>20, limit>>20)
	}

	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatalf("produce after the attack: %v", err)
	}
	cons := newClient(t, p.Addr, kgo.ConsumeTopics("mem"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []string
	for len(got) < 2 {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %q before timing out", got)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if got[0] != "before" || got[1] != "after" {
		t.Fatalf("consumed %q, want [before after]", got)
	}
}
