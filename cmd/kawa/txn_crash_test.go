package main

import (
	"context"
	"net"
	"os"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kawa-broker/kawa/internal/broker"
	"github.com/kawa-broker/kawa/internal/kawatest/wait"
)

// TestTxnCommitCompletedAfterCrash: a real kawa process acknowledges
// EndTxn(commit) while its markers are stalled (test hook), and is
// SIGKILLed before any marker is written. Before the kill nothing of the
// transaction is visible to read_committed; after a restart on the same
// directory the recorded decision is completed: the transaction is
// committed on every partition, never half.
//
// Not parallel: the hook is an environment variable the child inherits.
func TestTxnCommitCompletedAfterCrash(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(broker.StallTxnMarkersEnv, "1")
	p := startKawa(t, dir)
	os.Unsetenv(broker.StallTxnMarkersEnv) // the restart below completes the markers
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const topic, txnID = "txn-crash", "crash-txn"
	adm := kadm.NewClient(newClient(t, p.Addr))
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	prod := newClient(t, p.Addr, kgo.TransactionalID(txnID), kgo.DefaultProduceTopic(topic))
	if err := prod.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := int32(0); i < 3; i++ {
		if err := prod.ProduceSync(ctx, &kgo.Record{Partition: i, Value: []byte{'a' + byte(i)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("EndTxn(commit) not acknowledged: %v", err)
	}
	if d := describeTxn(t, ctx, adm, txnID); d.State != "PrepareCommit" {
		t.Fatalf("state before the kill %q, want PrepareCommit (markers stalled)", d.State)
	}
	if got := readCommitted(t, p.Addr, topic, 0); len(got) != 0 {
		t.Fatalf("read_committed before the markers: %q", got)
	}
	p.Kill()

	p2 := startKawa(t, dir)
	if got := readCommitted(t, p2.Addr, topic, 3); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("read_committed after the restart: %q, want every record of the transaction", got)
	}
	adm2 := kadm.NewClient(newClient(t, p2.Addr))
	wait.Until(t, 10*time.Second, "state CompleteCommit after the restart", func() bool {
		return describeTxn(t, ctx, adm2, txnID).State == "CompleteCommit"
	})
}

func describeTxn(t *testing.T, ctx context.Context, adm *kadm.Client, id string) kadm.DescribedTransaction {
	t.Helper()
	ds, err := adm.DescribeTransactions(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	d := ds[id]
	if d.Err != nil {
		t.Fatalf("describe %s: %v", id, d.Err)
	}
	return d
}

// readCommitted consumes topic from the start with read_committed until
// want values arrived (want 0: until it is idle) and returns them sorted.
func readCommitted(t *testing.T, addr, topic string, want int, opts ...kgo.Opt) []string {
	t.Helper()
	cl := newClient(t, addr, append([]kgo.Opt{kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100 * time.Millisecond)}, opts...)...)
	defer cl.Close()
	var got []string
	for idle, deadline := 0, time.Now().Add(20*time.Second); time.Now().Before(deadline); {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		fs := cl.PollFetches(ctx)
		cancel()
		n := len(got)
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
		if want > 0 && len(got) >= want {
			break
		}
		if len(got) == n {
			if idle++; want == 0 && idle >= 3 {
				break
			}
		}
	}
	sort.Strings(got)
	return got
}

// freeAddr returns a 127.0.0.1 address with a port free right now, so a
// restarted broker can listen where clients already look.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
