package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kawa-broker/kawa/dedup"
	"github.com/kawa-broker/kawa/delivery"
	"github.com/kawa-broker/kawa/internal/kawatest"
	"github.com/kawa-broker/kawa/internal/sqltest"
	"github.com/kawa-broker/kawa/outbox"
)

var countsRE = regexp.MustCompile(`dedup applied=(\d+) duplicate=(\d+) stale=(\d+) gap=(\d+)`)

// TestConsumerCrashPointsExactCounts is sdk-design.md's C1/C2 at the
// example level, on both backends, with exact numbers: the consumer process
// (one partition, so one serial lane; message-id keys) SIGKILLs itself at
// each of its named points right after its K-th applied order; then
//   - applied holds exactly K+1 orders when the crash came after the dedup
//     transaction's commit (dedup.PointAfterCommit: the issue's "after the
//     handler's DB commit, before the offset commit"), else exactly K (the
//     K+1-th order's transaction rolled back, no key left: PointKeyRecorded,
//     PointBeforeCommit; or it was not started: CrashAfterHandlerBeforeCommit);
//   - a restarted consumer sees every order above the committed offset again
//     and answers exactly those applied ones Duplicate (deliveries - applied),
//     applies the rest once, and the example's full check passes.
func TestConsumerCrashPointsExactCounts(t *testing.T) {
	const orders, k = 40, 15
	b := kawatest.NewBroker(t)
	t.Setenv(envMain, "1") // the fleet's children are this test binary
	sqltest.Each(t, func(t *testing.T, be sqltest.Backend) {
		for i, tc := range []struct {
			point       string
			wantApplied int
		}{
			{dedup.PointKeyRecorded, k},
			{dedup.PointBeforeCommit, k},
			{dedup.PointAfterCommit, k + 1},
			{delivery.CrashAfterHandlerBeforeCommit, k},
		} {
			t.Run(tc.point, func(t *testing.T) {
				ctx := context.Background()
				c := &config{brokers: b.Addr, db: be.URL, orders: orders, products: 4, rollbackPct: 10, seed: uint64(i + 1),
					crashEvery: k, relayMode: "idempotent", dedupKey: "message-id", runID: fmt.Sprintf("c%d-%s", i, be.Name),
					partitions: 1, shards: 2, batch: 20, consumers: 1, leaseTTL: 2 * time.Second, pollMax: 100 * time.Millisecond}
				if consumerPoints[i] != tc.point {
					t.Fatalf("rotation index %d is %s, want %s", i, consumerPoints[i], tc.point)
				}
				adm, w := publishOrders(t, b, be, c)

				// The crashing incarnation.
				cmd := exec.Command(os.Args[0], c.args("consumer", i, 0)...)
				var out bytes.Buffer
				cmd.Stdout, cmd.Stderr = &out, &out
				err := cmd.Run()
				var ee *exec.ExitError
				if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
					t.Fatalf("consumer ended with %v, want SIGKILL at %s:\n%s", err, tc.point, out.String())
				}
				var applied int
				if err := be.DB.QueryRow(`SELECT COUNT(*) FROM applied`).Scan(&applied); err != nil {
					t.Fatal(err)
				}
				if applied != tc.wantApplied {
					t.Fatalf("after SIGKILL at %s: %d orders applied, want exactly %d", tc.point, applied, tc.wantApplied)
				}
				committed := committedOffset(t, adm, c)
				if committed > int64(applied) {
					t.Fatalf("committed offset %d passes the %d applied orders", committed, applied)
				}

				// The restarted incarnation, to the end.
				topic, err := readTopic(ctx, c)
				if err != nil {
					t.Fatal(err)
				}
				var log bytes.Buffer
				if err := ensureCommitted(ctx, adm, c, &log, topic); err != nil {
					t.Fatalf("restart: %v\n%s", err, log.String())
				}
				m := countsRE.FindStringSubmatch(log.String())
				if m == nil {
					t.Fatalf("no dedup counts from the restarted consumer:\n%s", log.String())
				}
				gotApplied, _ := strconv.Atoi(m[1])
				gotDup, _ := strconv.Atoi(m[2])
				if wantDup := applied - int(committed); gotDup != wantDup || gotApplied != orders-applied || m[3] != "0" || m[4] != "0" {
					t.Fatalf("restart: dedup applied=%d duplicate=%d stale=%s gap=%s, want applied=%d duplicate=%d (applied %d above committed offset %d) stale=0 gap=0",
						gotApplied, gotDup, m[3], m[4], orders-applied, wantDup, applied, committed)
				}
				t.Logf("crash at %s: %d applied, committed offset %d; restart: applied=%d duplicate=%d", tc.point, applied, committed, gotApplied, gotDup)
				if _, err := verify(ctx, be.DB, be.Dialect, adm, c, w, topic); err != nil {
					t.Fatal(err)
				}
			})
		}
	})
}

// publishOrders prepares c's tables and topics, commits c.orders orders and
// publishes them all with an in-process relay (no crashes).
func publishOrders(t *testing.T, b *kawatest.Broker, be sqltest.Backend, c *config) (*kadm.Client, *workload) {
	t.Helper()
	ctx := context.Background()
	if err := prepare(ctx, be.DB, be.Dialect, c); err != nil {
		t.Fatal(err)
	}
	adm := b.Admin()
	if err := createTopics(ctx, adm, c); err != nil {
		t.Fatal(err)
	}
	w, err := writeOrders(ctx, be.DB, be.Dialect, c, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ob, err := outbox.New(be.DB, be.Dialect, outbox.Config{Source: c.source(), Shards: c.shards})
	if err != nil {
		t.Fatal(err)
	}
	published := make(chan int, 64)
	r, err := ob.NewRelay(outbox.RelayConfig{Mode: c.mode(), ClientOpts: []kgo.Opt{kgo.SeedBrokers(b.Addr)},
		Hooks: outbox.Hooks{Published: func(_, n int) { published <- n }}})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- r.Run(rctx) }()
	deadline := time.After(60 * time.Second)
	for n := 0; n < len(w.committed); {
		select {
		case k := <-published:
			n += k
		case err := <-errc:
			t.Fatalf("relay stopped: %v", err)
		case <-deadline:
			t.Fatalf("relay published %d of %d", n, len(w.committed))
		}
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	return adm, w
}

func committedOffset(t *testing.T, adm *kadm.Client, c *config) int64 {
	t.Helper()
	offs, err := adm.FetchOffsets(context.Background(), c.group())
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := offs.Lookup(c.topic(), 0); ok && o.At >= 0 {
		return o.At
	}
	return 0
}
