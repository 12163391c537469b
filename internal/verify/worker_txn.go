package verify

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// abortOneIn makes one transaction in this many an abort on purpose, so the
// read_committed checks have aborted data to not see.
const abortOneIn = 4

// runTxnWriter is workload c: transactions of two to four records over at
// least two partitions of its topic, about spec.Rate per second, a quarter
// of them aborted on purpose. Between the last write and EndTxn it waits
// spec.ProcDelay, the window where a client crash leaves the transaction
// open for the coordinator to abort.
func runTxnWriter(ctx context.Context, spec WorkerSpec, stop <-chan struct{}, emit Emit) error {
	opts := append(baseOpts(spec),
		kgo.TransactionalID(spec.TxnID),
		kgo.TransactionTimeout(spec.TxnTimeout),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.DefaultProduceTopic(spec.Topics[0]),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	rng := workerRand(spec)
	every := time.Second / time.Duration(max(spec.Rate, 1))
	var seq int64
	for n := 1; ; n++ {
		select {
		case <-stop:
			return nil
		case <-ctx.Done():
			return nil
		default:
		}
		txn := fmt.Sprintf("%s/%d", spec.Name, n)
		if err := writeTxn(ctx, cl, spec, rng, txn, &seq, emit); err != nil || ctx.Err() != nil {
			return err
		}
		if !sleepCtx(ctx, every) {
			return nil
		}
	}
}

// writeTxn writes and ends one transaction.
func writeTxn(ctx context.Context, cl *kgo.Client, spec WorkerSpec, rng *rand.Rand, txn string, seq *int64, emit Emit) error {
	if err := cl.BeginTransaction(); err != nil {
		return fmt.Errorf("begin %s: %w", txn, err)
	}
	topic := spec.Topics[0]
	parts := max(spec.Partitions, 1)
	first := rng.Int32N(parts)
	var failed atomic.Bool
	for i := range 2 + rng.IntN(3) {
		*seq++
		id := recordID(spec.Name, *seq)
		p := (first + int32(i)) % parts
		emit(Event{Kind: KindSend, ID: id, Topic: topic, Txn: txn})
		produceTxn(cl, emit, &kgo.Record{Topic: topic, Partition: p, Value: recordValue(id, txn)}, id, txn, &failed)
	}
	if err := cl.Flush(ctx); err != nil {
		return nil // crashed
	}
	if !sleepCtx(ctx, spec.ProcDelay) {
		return nil
	}
	commit := !failed.Load() && rng.IntN(abortOneIn) != 0
	emit(Event{Kind: KindTxnEnd, Txn: txn, Commit: commit})
	err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit))
	emit(Event{Kind: KindTxnDone, Txn: txn, Commit: commit && err == nil, Err: errString(err)})
	if err != nil {
		return fmt.Errorf("end %s: %w", txn, err)
	}
	return nil
}
