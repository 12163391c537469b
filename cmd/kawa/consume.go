package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/kawa-broker/kawa/cmd/internal/cli"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// consumeOpts are the parsed `kawa consume` flags.
type consumeOpts struct {
	brokers       string
	topic         string
	fromBeginning bool
	offset        int64 // -1: not given
	partition     int   // -1: all partitions
	maxMessages   int
	group         string
	isolation     string
	printKey      bool
	timeout       time.Duration // idle timeout; 0: none
}

// runConsume implements `kawa consume`: it prints each record's value (or
// key<TAB>value with --print-key; a null key prints as empty) one per line,
// and exits after --max-messages records or after --timeout without a record.
// SIGINT/SIGTERM end it cleanly. Without a group nothing is committed; with
// --group the offsets of printed records are committed on exit.
func runConsume(args []string, _ io.Reader, stdout io.Writer) error {
	fs, o := consumeFlags()
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	opts, err := o.kgoOpts(fs)
	if err != nil {
		return err
	}
	cl, err := cli.ClientFor(fs, o.brokers, opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := o.checkTopic(ctx, cl); err != nil {
		return fmt.Errorf("consume: %w", err)
	}
	if err := consumeLoop(ctx, cl, o, stdout); err != nil {
		return fmt.Errorf("consume %s: %w", o.topic, err)
	}
	return nil
}

func consumeFlags() (*cli.FlagSet, *consumeOpts) {
	fs := cli.NewFlagSet("consume", "kawa consume --topic T [--from-beginning | --offset N] [--partition P] [--max-messages N] [--group G] [--isolation read_committed|read_uncommitted] [--print-key] [--timeout D]")
	o := &consumeOpts{}
	fs.StringVar(&o.brokers, "brokers", cli.DefaultBrokers, "comma-separated `host:port` list of seed brokers")
	cli.CommandConfigFlag(fs)
	fs.StringVar(&o.topic, "topic", "", "topic to consume (required)")
	fs.BoolVar(&o.fromBeginning, "from-beginning", false, "start at the log start offset instead of the end")
	fs.Int64Var(&o.offset, "offset", -1, "start at this offset (needs --partition)")
	fs.IntVar(&o.partition, "partition", -1, "consume only this partition (-1: all)")
	fs.IntVar(&o.maxMessages, "max-messages", 0, "exit after this many records (0: no limit)")
	fs.StringVar(&o.group, "group", "", "consume as a member of this consumer group, committing printed offsets")
	fs.StringVar(&o.isolation, "isolation", "read_uncommitted", "read_committed or read_uncommitted (KIP-98)")
	fs.BoolVar(&o.printKey, "print-key", false, "print key<TAB>value")
	fs.DurationVar(&o.timeout, "timeout", 0, "exit after this long without a record (0: wait forever)")
	return fs, o
}

// kgoOpts validates flag combinations and maps them to consumer options.
func (o *consumeOpts) kgoOpts(fs *cli.FlagSet) ([]kgo.Opt, error) {
	switch {
	case o.topic == "":
		return nil, fs.UsageErr("--topic is required")
	case o.fromBeginning && o.offset >= 0:
		return nil, fs.UsageErr("--from-beginning and --offset are exclusive")
	case o.offset < -1:
		return nil, fs.UsageErr("--offset must be >= 0, got %d", o.offset)
	case o.offset >= 0 && o.partition < 0:
		return nil, fs.UsageErr("--offset needs --partition")
	case o.partition < -1:
		return nil, fs.UsageErr("--partition must be >= 0, got %d", o.partition)
	case o.group != "" && o.partition >= 0:
		return nil, fs.UsageErr("--group and --partition are exclusive (the group assigns partitions)")
	case o.maxMessages < 0:
		return nil, fs.UsageErr("--max-messages must be >= 0")
	case o.timeout < 0:
		return nil, fs.UsageErr("--timeout must be >= 0")
	}
	var opts []kgo.Opt
	switch o.isolation {
	case "read_committed":
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	case "read_uncommitted":
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadUncommitted()))
	default:
		return nil, fs.UsageErr("--isolation must be read_committed or read_uncommitted, got %q", o.isolation)
	}
	return append(opts, o.startOpts()...), nil
}

// startOpts picks where consumption starts: an exact partition offset, the
// group's committed offsets (reset per --from-beginning), or a whole topic.
func (o *consumeOpts) startOpts() []kgo.Opt {
	start := kgo.NewOffset().AtEnd()
	if o.fromBeginning {
		start = kgo.NewOffset().AtStart()
	}
	if o.offset >= 0 {
		start = kgo.NewOffset().At(o.offset)
	}
	if o.partition >= 0 {
		return []kgo.Opt{kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
			o.topic: {int32(o.partition): start},
		})}
	}
	opts := []kgo.Opt{kgo.ConsumeTopics(o.topic), kgo.ConsumeResetOffset(start)}
	if o.group != "" {
		// Commit only what was printed: with --max-messages the client may
		// have fetched more than it printed.
		opts = append(opts, kgo.ConsumerGroup(o.group), kgo.AutoCommitMarks())
	}
	return opts
}

// checkTopic fails fast on a missing topic or partition, where the client
// alone would wait for it to appear.
func (o *consumeOpts) checkTopic(ctx context.Context, cl *kgo.Client) error {
	mctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	topics, err := kadm.NewClient(cl).ListTopics(mctx, o.topic)
	if err != nil {
		return err
	}
	t, ok := topics[o.topic]
	if !ok {
		return fmt.Errorf("%s: not in the metadata response", o.topic)
	}
	if t.Err != nil {
		return fmt.Errorf("%s: %w", o.topic, t.Err)
	}
	if o.partition >= len(t.Partitions) {
		return fmt.Errorf("%s has %d partitions, no partition %d", o.topic, len(t.Partitions), o.partition)
	}
	return nil
}

// consumeLoop polls and prints until the record limit, the idle timeout or
// ctx's end, then commits marked offsets when in a group.
func consumeLoop(ctx context.Context, cl *kgo.Client, o *consumeOpts, stdout io.Writer) error {
	w := bufio.NewWriterSize(stdout, 1<<16)
	defer w.Flush()
	printed := 0
	for o.maxMessages == 0 || printed < o.maxMessages {
		pctx, cancel := pollContext(ctx, o.timeout)
		fetches := cl.PollRecords(pctx, o.maxMessages-printed)
		cancel()
		if ctx.Err() != nil || fetches.IsClientClosed() {
			break
		}
		if err := cli.FetchError(fetches); err != nil {
			return err
		}
		if fetches.NumRecords() == 0 && pctx.Err() != nil {
			break // idle for --timeout
		}
		recs := fetches.Records()
		for _, r := range recs {
			printRecord(w, r, o.printKey)
		}
		printed += len(recs)
		cl.MarkCommitRecords(recs...) // after printing: it sorts recs in place
		if err := w.Flush(); err != nil {
			return fmt.Errorf("write stdout: %w", err)
		}
	}
	if o.group == "" {
		return nil
	}
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return cl.CommitMarkedOffsets(cctx)
}

func pollContext(ctx context.Context, idle time.Duration) (context.Context, context.CancelFunc) {
	if idle <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, idle)
}

func printRecord(w *bufio.Writer, r *kgo.Record, printKey bool) {
	if printKey {
		w.Write(r.Key)
		w.WriteByte('\t')
	}
	w.Write(r.Value)
	w.WriteByte('\n')
}
