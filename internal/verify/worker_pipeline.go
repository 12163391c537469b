package verify

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"
)

// runPipeline is one member of the exactly-once consume-transform-produce
// pipeline (workload b): it reads the input topic read_committed in a group
// and, per polled batch, writes one output record per input record (same
// id) and commits the input offsets in the same transaction, through
// kgo.GroupTransactSession. Any error ending a transaction is returned; the
// next incarnation re-initialises the same transactional.id, which fences
// this one and aborts whatever it left open.
func runPipeline(ctx context.Context, spec WorkerSpec, stop <-chan struct{}, emit Emit) error {
	in, out := spec.Topics[0], spec.Topics[1]
	opts := append(baseOpts(spec), groupOpts(spec, in)...)
	opts = append(opts,
		kgo.TransactionalID(spec.TxnID),
		kgo.TransactionTimeout(spec.TxnTimeout),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.DefaultProduceTopic(out),
	)
	s, err := kgo.NewGroupTransactSession(opts...)
	if err != nil {
		return err
	}
	defer s.Close()
	pollCtx, cancel := untilStop(ctx, stop)
	defer cancel()
	for n := 1; ; n++ {
		fs := s.PollRecords(pollCtx, 200)
		if pollCtx.Err() != nil || fs.IsClientClosed() {
			return nil
		}
		recs := fs.Records()
		if len(recs) == 0 {
			continue
		}
		txn := fmt.Sprintf("%s/%d", spec.Name, n)
		if err := transform(ctx, s, spec, txn, out, recs, emit); err != nil || ctx.Err() != nil {
			return err
		}
	}
}

// transform runs one transaction over recs.
func transform(ctx context.Context, s *kgo.GroupTransactSession, spec WorkerSpec, txn, out string, recs []*kgo.Record, emit Emit) error {
	if err := s.Begin(); err != nil {
		return fmt.Errorf("begin %s: %w", txn, err)
	}
	_, gen := s.Client().GroupMetadata()
	emit(procEvents(recs, gen, ReadCommitted)...)
	var failed atomic.Bool
	for _, r := range recs {
		id, _ := parseValue(r.Value)
		emit(Event{Kind: KindSend, ID: id, Topic: out, Txn: txn})
		produceTxn(s.Client(), emit, &kgo.Record{Topic: out, Value: recordValue(id, txn)}, id, txn, &failed)
	}
	if !sleepCtx(ctx, spec.ProcDelay) { // a crash here is mid-transaction
		return nil
	}
	if err := s.Client().Flush(ctx); err != nil {
		return err
	}
	offsets := s.Client().UncommittedOffsets()
	commit := !failed.Load()
	emit(Event{Kind: KindTxnEnd, Txn: txn, Commit: commit})
	committed, err := s.End(ctx, kgo.TransactionEndTry(commit))
	emit(Event{Kind: KindTxnDone, Txn: txn, Commit: committed, Err: errString(err)})
	if err != nil {
		return fmt.Errorf("end %s: %w", txn, err)
	}
	if committed {
		var evs []Event
		for t, ps := range offsets {
			for p, eo := range ps {
				evs = append(evs, Event{Kind: KindCommit, Topic: t, Part: p, Off: eo.Offset, Gen: gen, Txn: txn})
			}
		}
		emit(evs...)
	}
	return nil
}

// produceTxn produces one record of a transaction; a failure marks the
// transaction so it is aborted rather than committed without the record.
func produceTxn(cl *kgo.Client, emit Emit, r *kgo.Record, id, txn string, failed *atomic.Bool) {
	sent := nowMicros()
	cl.Produce(context.Background(), r, func(r *kgo.Record, err error) {
		if err != nil {
			failed.Store(true)
			emit(Event{Kind: KindFail, ID: id, Topic: r.Topic, Txn: txn, Err: err.Error()})
			return
		}
		emit(Event{Kind: KindAck, ID: id, Topic: r.Topic, Part: r.Partition, Off: r.Offset, Txn: txn,
			Lat: nowMicros() - sent})
	})
}
