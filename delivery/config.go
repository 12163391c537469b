package delivery

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime/debug"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Handler processes one record. A nil error means the record is done; an
// error (or a panic) is a failed attempt, treated as each semantic says. The
// ctx is cancelled when the loop stops or the record's partition is revoked:
// a handler should give up then, and its record is redelivered later (for
// at-least-once) because it is not finished.
type Handler func(ctx context.Context, r *kgo.Record) error

// Config is what every loop needs. The loop builds its own franz-go client
// from it.
type Config struct {
	// Brokers are the seed brokers, host:port.
	Brokers []string
	// Group is the consumer group (Kafka's group.id); required.
	Group string
	// Topics are the topics consumed; required.
	Topics []string
	// KgoOpts are extra franz-go options (timeouts, client ID, logger,
	// reset offset, ...). Options that contradict the loop's semantic are
	// refused by the constructor with an error naming them: the group, the
	// topics, commit settings, rebalance callbacks, and for the loops that
	// write (dead letters, parking, exactly-once outputs) acks below all or
	// a non-idempotent producer. The record partitioner and the rebalance
	// callbacks (kgo.OnPartitions*) are the loop's: franz-go does not let
	// them be read back, so the loop's own silently take precedence.
	KgoOpts []kgo.Opt
	// Hooks receives events for metrics; nil means none.
	Hooks Hooks
	// Scope names the handler in dead-letter provenance headers (and park
	// markers); it defaults to Group.
	Scope string
	// MaxPollRecords bounds the records taken per poll (the at-most-once
	// loss window and the exactly-once transaction size); default 100.
	MaxPollRecords int
	// CrashPoint, when non-nil, is called with one of the Crash* constants
	// each time the loop passes that point. It is for tests only: a test
	// binary SIGKILLs itself there to hit a crash window exactly.
	CrashPoint func(point string)
}

// PanicError is a recovered handler panic; it counts as a failed attempt.
type PanicError struct {
	Value any    // what the handler panicked with
	Stack []byte // the handler goroutine's stack at the panic
}

func (e *PanicError) Error() string { return fmt.Sprintf("delivery: handler panic: %v", e.Value) }

// ErrContradictingOption is wrapped by constructor errors that refuse a kgo
// option.
var ErrContradictingOption = errors.New("delivery: option contradicts the semantic")

// common is the validated part of Config shared by the loops.
type common struct {
	Config
	hooks Hooks
	crash func(string)
}

func (c Config) validate() (common, error) {
	if len(c.Brokers) == 0 {
		return common{}, errors.New("delivery: Config.Brokers is empty")
	}
	if c.Group == "" {
		return common{}, errors.New("delivery: Config.Group is empty")
	}
	if len(c.Topics) == 0 {
		return common{}, errors.New("delivery: Config.Topics is empty")
	}
	cm := common{Config: c, hooks: c.Hooks, crash: c.CrashPoint}
	if cm.hooks == nil {
		cm.hooks = NopHooks{}
	}
	if cm.crash == nil {
		cm.crash = func(string) {}
	}
	if cm.Scope == "" {
		cm.Scope = c.Group
	}
	if cm.MaxPollRecords <= 0 {
		cm.MaxPollRecords = 100
	}
	return cm, nil
}

// probe builds a client from the user's options and the group (no topics, so
// it joins nothing and connects nowhere) to read back what they set, and reports the ones
// that contradict a loop. writes says the loop produces records.
func probe(c common, writes bool) (rebalanceTimeout time.Duration, err error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.Brokers...), kgo.ConsumerGroup(c.Group)}, c.KgoOpts...)...)
	if err != nil {
		return 0, fmt.Errorf("delivery: kgo options: %w", err)
	}
	defer cl.Close()
	refuse := func(what string) error {
		return fmt.Errorf("%w: %s (the loop sets it)", ErrContradictingOption, what)
	}
	switch {
	case cl.OptValue(kgo.ConsumerGroup) != c.Group:
		return 0, refuse("kgo.ConsumerGroup; use Config.Group")
	case len(cl.OptValue(kgo.ConsumeTopics).([]string)) > 0:
		return 0, refuse("kgo.ConsumeTopics; use Config.Topics")
	case cl.OptValue(kgo.ConsumeRegex).(bool):
		return 0, refuse("kgo.ConsumeRegex")
	case reflect.ValueOf(cl.OptValue(kgo.ConsumePartitions)).Len() > 0:
		return 0, refuse("kgo.ConsumePartitions (a group loop consumes what the group assigns)")
	case cl.OptValue(kgo.AutoCommitMarks).(bool), cl.OptValue(kgo.GreedyAutoCommit).(bool):
		return 0, refuse("autocommit (kgo.AutoCommitMarks/GreedyAutoCommit); the loop owns every commit")
	}
	if vs := cl.OptValues(kgo.TransactionalID); len(vs) == 2 && vs[1].(bool) {
		return 0, refuse("kgo.TransactionalID; only NewExactlyOnce is transactional and takes it as an argument")
	}
	if writes {
		if cl.OptValue(kgo.DisableIdempotentWrite).(bool) {
			return 0, refuse("kgo.DisableIdempotentWrite; dead-letter, park and output writes are idempotent")
		}
		if acks, ok := cl.OptValue(kgo.RequiredAcks).(kgo.Acks); ok && acks != kgo.AllISRAcks() {
			return 0, refuse("kgo.RequiredAcks below all; dead-letter, park and output writes use acks=all")
		}
	}
	rt, _ := cl.OptValue(kgo.RebalanceTimeout).(time.Duration)
	return rt, nil
}

// call runs h once, turning a panic into a *PanicError, and reports the
// attempt to the hooks.
func (c *common) call(ctx context.Context, h Handler, r *kgo.Record, attempt int) (err error) {
	start := time.Now()
	defer func() {
		if v := recover(); v != nil {
			pe := &PanicError{Value: v, Stack: debug.Stack()}
			c.hooks.OnPanic(r, pe)
			err = pe
		}
		c.hooks.OnHandled(r, attempt, time.Since(start), err)
	}()
	return h(ctx, r)
}

// fetchErr sorts a poll's errors: a closed client or a cancelled ctx ends the
// loop quietly (ok=false, err=nil); retryable errors and data loss are
// reported and polling goes on; anything else is returned as fatal.
func (c *common) fetchErr(ctx context.Context, fs kgo.Fetches) (ok bool, fatal error) {
	if fs.IsClientClosed() || ctx.Err() != nil {
		return false, nil
	}
	fs.EachError(func(topic string, p int32, err error) {
		if fatal != nil {
			return
		}
		var loss *kgo.ErrDataLoss
		switch {
		case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		case errors.As(err, &loss), isRetriable(err):
			c.hooks.OnError(fmt.Errorf("delivery: fetch %s/%d: %w", topic, p, err))
		default:
			fatal = fmt.Errorf("delivery: fetch %s/%d: %w", topic, p, err)
		}
	})
	return fatal == nil, fatal
}

func isRetriable(err error) bool {
	var re interface{ IsRetriable() bool }
	if errors.As(err, &re) {
		return re.IsRetriable()
	}
	return false
}

// batchOffsets is, for every partition in fs, one past its last record (end)
// — what committing "all of this batch" means — or its first record (!end),
// for rewinding; with the record's leader epoch.
func batchOffsets(fs kgo.Fetches, end bool) map[string]map[int32]kgo.EpochOffset {
	out := map[string]map[int32]kgo.EpochOffset{}
	fs.EachPartition(func(p kgo.FetchTopicPartition) {
		if len(p.Records) == 0 {
			return
		}
		r, next := p.Records[0], int64(0)
		if end {
			r, next = p.Records[len(p.Records)-1], 1
		}
		if out[p.Topic] == nil {
			out[p.Topic] = map[int32]kgo.EpochOffset{}
		}
		out[p.Topic][p.Partition] = kgo.EpochOffset{Epoch: r.LeaderEpoch, Offset: r.Offset + next}
	})
	return out
}

// groupOpts are the options of a loop's client: the seeds, the user's
// options, then the group, the topics and the loop's own options, which come
// last so that they win.
func (c *common) groupOpts(own ...kgo.Opt) []kgo.Opt {
	opts := append([]kgo.Opt{kgo.SeedBrokers(c.Brokers...)}, c.KgoOpts...)
	opts = append(opts, kgo.ConsumerGroup(c.Group), kgo.ConsumeTopics(c.Topics...))
	return append(opts, own...)
}

// commitSync commits offsets synchronously and returns the request error or
// the first partition's error.
func (c *common) commitSync(ctx context.Context, cl *kgo.Client, offs map[string]map[int32]kgo.EpochOffset) error {
	if len(offs) == 0 {
		return nil
	}
	start := time.Now()
	var rerr error
	cl.CommitOffsetsSync(ctx, offs, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			rerr = err
			return
		}
		rerr = firstCommitErr(resp)
	})
	c.hooks.OnCommit(offs, time.Since(start), rerr)
	return rerr
}

func firstCommitErr(resp *kmsg.OffsetCommitResponse) error {
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("commit %s/%d: %w", t.Topic, p.Partition, err)
			}
		}
	}
	return nil
}
