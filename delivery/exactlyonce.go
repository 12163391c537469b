package delivery

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TransformHandler processes one input record of an exactly-once batch and
// passes its output records to emit (any number, any topics; a record
// without a Topic is refused by the producer and aborts the batch). The
// outputs become visible to read_committed consumers only if the batch
// commits; a handler must keep no state across calls that it cannot rebuild
// from its inputs, because an aborted batch is processed again.
type TransformHandler func(ctx context.Context, r *kgo.Record, emit func(out *kgo.Record)) error

// BatchAbortedError is reported through Hooks.OnError when an exactly-once
// batch did not commit: its outputs are aborted and its input offsets were
// not committed, so its records are polled and processed again (by this
// member, or by the partition's new owner after a rebalance).
type BatchAbortedError struct {
	Records int   // input records in the batch
	Err     error // the handler or produce error; nil when End refused the commit (rebalance, fencing)
}

func (e *BatchAbortedError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("delivery: exactly-once batch of %d records aborted: %v", e.Records, e.Err)
	}
	return fmt.Sprintf("delivery: exactly-once batch of %d records not committed (rebalance or fencing)", e.Records)
}

func (e *BatchAbortedError) Unwrap() error { return e.Err }

// maxBatchFailures bounds how often in a row an exactly-once batch may be
// aborted by its handler before Run returns the handler's error: the batch
// is rewound each time, so a record that always fails would otherwise loop.
const maxBatchFailures = 5

// NewExactlyOnce builds the exactly-once consume-transform-produce loop on
// kgo.GroupTransactSession (KIP-98 transactions with KIP-447 group fencing):
// for every poll (at most Config.MaxPollRecords records) it begins a
// transaction, runs h on each record in order, produces what h emits, flushes,
// and ends with kgo.TryCommit, which commits the outputs and the input offsets
// atomically. When End reports no commit (a revoke or loss during the batch,
// fencing, or a handler/produce error, which aborts), the outputs are aborted,
// the session rewinds to the committed offsets, and a *BatchAbortedError goes
// to Hooks.OnError. transactionalID is Kafka's transactional.id, one per
// running instance. Outputs are read_committed-visible exactly once; database
// side effects of h are not covered (use dedup).
func NewExactlyOnce(cfg Config, transactionalID string, h TransformHandler) (*Consumer, error) {
	c, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	if transactionalID == "" {
		return nil, errors.New("delivery: NewExactlyOnce: transactionalID is empty")
	}
	if _, err := probe(c, true); err != nil {
		return nil, err
	}
	sess, err := kgo.NewGroupTransactSession(c.groupOpts(kgo.TransactionalID(transactionalID),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))...)
	if err != nil {
		return nil, fmt.Errorf("delivery: transact session: %w", err)
	}
	return &Consumer{
		run:   func(ctx context.Context) error { return c.runExactlyOnce(ctx, sess, h) },
		close: sess.Close,
	}, nil
}

func (c *common) runExactlyOnce(ctx context.Context, sess *kgo.GroupTransactSession, h TransformHandler) error {
	failures := 0
	for {
		fs := sess.PollRecords(ctx, c.MaxPollRecords)
		ok, fatal := c.fetchErr(ctx, fs)
		if !ok {
			return fatal
		}
		n := fs.NumRecords()
		if n == 0 {
			continue
		}
		if err := sess.Begin(); err != nil {
			return fmt.Errorf("delivery: begin transaction: %w", err)
		}
		c.hooks.OnInFlight(n)
		herr := c.transformBatch(ctx, sess, fs, h)
		c.crash(CrashAfterProduceBeforeEnd)
		try := kgo.TryCommit
		if herr != nil || ctx.Err() != nil {
			try = kgo.TryAbort
		}
		// End must run even when ctx is cancelled, or the transaction stays
		// open until transaction.timeout.ms and blocks read_committed readers.
		ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		committed, err := sess.End(ectx, try)
		cancel()
		c.hooks.OnInFlight(-n)
		if err != nil {
			return fmt.Errorf("delivery: end transaction: %w", err)
		}
		if committed {
			failures = 0
			fs.EachRecord(c.hooks.OnProcessed)
			continue
		}
		c.hooks.OnError(&BatchAbortedError{Records: n, Err: herr})
		if ctx.Err() != nil {
			return nil
		}
		if herr != nil {
			failures++
			if failures >= maxBatchFailures {
				return fmt.Errorf("delivery: exactly-once batch aborted %d times in a row: %w", failures, herr)
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(backoff(failures, 100*time.Millisecond, 2*time.Second)):
			}
		}
	}
}

// transformBatch runs h over the batch and waits for every output's produce
// result; the first handler or produce error is returned.
func (c *common) transformBatch(ctx context.Context, sess *kgo.GroupTransactSession, fs kgo.Fetches, h TransformHandler) error {
	var mu sync.Mutex
	var perr error
	emit := func(out *kgo.Record) {
		sess.Produce(ctx, out, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				if perr == nil {
					perr = err
				}
				mu.Unlock()
			}
		})
	}
	call := func(ctx context.Context, r *kgo.Record) error { return h(ctx, r, emit) }
	var herr error
	fs.EachRecord(func(r *kgo.Record) {
		if herr == nil {
			if err := c.call(ctx, call, r, 1); err != nil {
				herr = fmt.Errorf("handler for %s/%d@%d: %w", r.Topic, r.Partition, r.Offset, err)
			}
		}
	})
	if err := sess.Client().Flush(ctx); err != nil && herr == nil {
		herr = fmt.Errorf("flush outputs: %w", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if herr == nil && perr != nil {
		herr = fmt.Errorf("produce output: %w", perr)
	}
	return herr
}
