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
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/kawa-broker/kawa/cmd/internal/cli"
	"github.com/kawa-broker/kawa/internal/batch"
	"github.com/kawa-broker/kawa/internal/kawatest"
	"github.com/kawa-broker/kawa/internal/kawatest/wait"
)

// TestTxnListDescribeAbort: `kawa txn list` and `describe` show an open
// transaction that pins a partition's last stable offset; `kawa txn abort`
// writes the ABORT marker for its producer, after which the LSO reaches the
// high watermark and read_committed skips the aborted record.
func TestTxnListDescribeAbort(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	const topic = "hang"
	k.CreateTopic(topic, 1, nil)
	v := kversion.Stable()
	v.SetMaxKeyVersion(int16(kmsg.AddPartitionsToTxn), 3) // v4+ is the brokers' batched form
	cl := k.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.MaxVersions(v))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	txnID := "hanging-" + fmt.Sprint(time.Now().UnixNano())
	pid, epoch := openTxnWithRecord(t, ctx, cl, txnID, topic)
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("plain")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	b := []string{"--brokers", k.Addr}
	out := mustRun(t, runTxn, "", append([]string{"list"}, b...)...)
	if !strings.Contains(oneSpaced(out), fmt.Sprintf("%s %d Ongoing\n", txnID, pid)) {
		t.Fatalf("txn list:\n%s", out)
	}
	if out := mustRun(t, runTxn, "", append([]string{"list", "--state", "CompleteCommit"}, b...)...); strings.Contains(out, txnID) {
		t.Fatalf("txn list --state CompleteCommit lists the open transaction:\n%s", out)
	}
	out = mustRun(t, runTxn, "", append([]string{"describe", txnID}, b...)...)
	if !strings.Contains(oneSpaced(out), fmt.Sprintf("%s Ongoing %d %d 600000 ", txnID, pid, epoch)) || !strings.HasSuffix(out, " "+topic+"-0\n") {
		t.Fatalf("txn describe:\n%s", out)
	}
	if lso := listLatest(t, ctx, cl, topic, 1); lso != 0 {
		t.Fatalf("LSO %d before the abort, want 0", lso)
	}
	out = mustRun(t, runTxn, "", append([]string{"abort", "--topic", topic, "--partition", "0",
		"--producer-id", fmt.Sprint(pid), "--producer-epoch", fmt.Sprint(epoch)}, b...)...)
	if out != fmt.Sprintf("aborted producer %d epoch %d on %s-0\n", pid, epoch, topic) {
		t.Fatalf("txn abort: %q", out)
	}
	wait.Until(t, 5*time.Second, "LSO 3 after the abort (record, plain, marker)", func() bool { return listLatest(t, ctx, cl, topic, 1) == 3 })
	cons := k.Client(kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	fs := cons.PollFetches(ctx)
	if recs := fs.Records(); len(recs) != 1 || string(recs[0].Value) != "plain" {
		t.Fatalf("read_committed after the abort: %d records (%v)", len(recs), fs.Err0())
	}
	var usage *cli.UsageError
	if _, err := runCmd(t, runTxn, "", "abort", "--topic", topic); !errors.As(err, &usage) {
		t.Fatalf("abort without producer: %v, want a usage error", err)
	}
}

// openTxnWithRecord opens a transaction of txnID with one record at topic/0
// (raw requests, so the test holds the producer ID and epoch) and returns
// them.
func openTxnWithRecord(t *testing.T, ctx context.Context, cl *kgo.Client, txnID, topic string) (int64, int16) {
	t.Helper()
	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionalID, init.TransactionTimeoutMillis = &txnID, 600000
	ir, err := init.RequestWith(ctx, cl)
	if err != nil || ir.ErrorCode != 0 {
		t.Fatalf("InitProducerId: %v %v", err, kerr.ErrorForCode(ir.ErrorCode))
	}
	add := kmsg.NewPtrAddPartitionsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch = txnID, ir.ProducerID, ir.ProducerEpoch
	add.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: topic, Partitions: []int32{0}}}
	br := cl.SeedBrokers()[0]
	ar, err := br.Request(ctx, add)
	if err != nil || ar.(*kmsg.AddPartitionsToTxnResponse).Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("AddPartitionsToTxn: %v %+v", err, ar)
	}
	rec := batch.Encode(batch.Header{ProducerID: ir.ProducerID, ProducerEpoch: ir.ProducerEpoch, BaseSequence: 0, Attributes: 1 << 4},
		[]kmsg.Record{{Value: []byte("in-txn")}})
	prod := kmsg.NewPtrProduceRequest()
	prod.TransactionID, prod.Acks, prod.TimeoutMillis = &txnID, -1, 5000
	prod.Topics = []kmsg.ProduceRequestTopic{{Topic: topic, Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: rec}}}}
	pr, err := br.Request(ctx, prod)
	if err != nil || pr.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("transactional produce: %v %+v", err, pr)
	}
	return ir.ProducerID, ir.ProducerEpoch
}

// listLatest is ListOffsets latest of topic/0 with isolation (1 = read_committed).
func listLatest(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, isolation int8) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.IsolationLevel = isolation
	req.Topics = []kmsg.ListOffsetsRequestTopic{{Topic: topic, Partitions: []kmsg.ListOffsetsRequestTopicPartition{{Partition: 0, Timestamp: -1, CurrentLeaderEpoch: -1}}}}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Topics[0].Partitions[0].Offset
}

// oneSpaced collapses each line's runs of spaces (tabwriter padding) to one.
func oneSpaced(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(s, "\n") {
		b.WriteString(strings.Join(strings.Fields(l), " ") + "\n")
	}
	return b.String()
}
