package delivery

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Consumer is one processing loop; build it with NewAtMostOnce,
// NewAtLeastOnce or NewExactlyOnce. Run it once.
type Consumer struct {
	run     func(ctx context.Context) error
	close   func()
	started sync.Once
}

// Run consumes until ctx is cancelled (then it finishes cleanly: it commits
// what is done, leaves the group and returns nil) or a fatal condition
// (returned as the error: a non-retryable fetch error, a failed dead-letter
// write, a handler that keeps failing an exactly-once batch, ...). Run may
// be called once; the Consumer's client is closed when it returns.
func (c *Consumer) Run(ctx context.Context) error {
	err := errors.New("delivery: Run called twice")
	c.started.Do(func() {
		defer c.close()
		err = c.run(ctx)
	})
	return err
}

// Close releases the client of a Consumer whose Run was never called.
func (c *Consumer) Close() {
	c.started.Do(c.close)
}

// maxCommitFailures bounds how often in a row the at-most-once loop retries
// the commit of one batch before Run returns the commit error.
const maxCommitFailures = 10

// NewAtMostOnce builds the at-most-once loop: each poll (kgo.PollRecords with
// BlockRebalanceOnPoll, at most Config.MaxPollRecords records) is committed
// synchronously, and only when the commit succeeded does h run on its records,
// in order. A failed commit means no processing: the batch is fetched again
// and its commit retried (Run returns the error after 10 failures in a row).
// A handler error or panic is reported through Hooks.OnError and the record
// is not retried, which is what at-most-once means. A crash between the commit
// and the end of the handler loses the rest of that batch and nothing else;
// a clean stop (ctx cancelled) first finishes the committed batch, so h gets
// a ctx that the loop's cancellation does not reach.
func NewAtMostOnce(cfg Config, h Handler) (*Consumer, error) {
	c, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	if _, err := probe(c, false); err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(c.groupOpts(kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll())...)
	if err != nil {
		return nil, fmt.Errorf("delivery: client: %w", err)
	}
	return &Consumer{
		run:   func(ctx context.Context) error { return c.runAtMostOnce(ctx, cl, h) },
		close: cl.CloseAllowingRebalance,
	}, nil
}

func (c *common) runAtMostOnce(ctx context.Context, cl *kgo.Client, h Handler) error {
	failures := 0
	for {
		fs := cl.PollRecords(ctx, c.MaxPollRecords)
		ok, fatal := c.fetchErr(ctx, fs)
		if fatal != nil || !ok {
			cl.AllowRebalance()
			return fatal
		}
		offs := batchOffsets(fs, true)
		if err := c.commitSync(ctx, cl, offs); err != nil {
			if ctx.Err() != nil {
				cl.AllowRebalance()
				return nil
			}
			failures++
			if failures >= maxCommitFailures {
				cl.AllowRebalance()
				return fmt.Errorf("delivery: at-most-once commit failed %d times in a row: %w", failures, err)
			}
			// Not committed, so not processed: fetch the batch again from its
			// first offsets and retry the commit. Partitions revoked meanwhile
			// are the new owner's and SetOffsets ignores them.
			cl.SetOffsets(batchOffsets(fs, false))
			cl.AllowRebalance()
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(backoff(failures, 100*time.Millisecond, 2*time.Second)):
			}
			continue
		}
		failures = 0
		c.crash(CrashAfterCommitBeforeHandler)
		n := fs.NumRecords()
		c.hooks.OnInFlight(n)
		// The batch is committed: finish it even when ctx is cancelled, so a
		// clean stop loses nothing (only a crash loses the rest of a batch).
		hctx := context.WithoutCancel(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			if err := c.call(hctx, h, r, 1); err != nil {
				c.hooks.OnError(fmt.Errorf("delivery: at-most-once handler for %s/%d@%d (not retried): %w",
					r.Topic, r.Partition, r.Offset, err))
				return
			}
			c.hooks.OnProcessed(r)
		})
		c.hooks.OnInFlight(-n)
		cl.AllowRebalance()
	}
}
