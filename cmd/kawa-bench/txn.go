package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"github.com/kawa-broker/kawa/cmd/internal/cli"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// txnBench measures transactional produce against plain (idempotent,
// acks=all) produce in one run, as ratios (issue 5's closing measurement):
// one producer writes --record-size records round-robin over --partitions
// partitions as fast as it can; a transactional cell commits every
// --commit-every interval (records are sent asynchronously until the
// interval ends, then Flush and EndTransaction commit). The plain cell runs
// before and after the transactional ones; ratios are against their mean.
type txnBench struct {
	brokers, topic string
	partitions     int32
	recordSize     int
	intervals      []time.Duration
	duration       time.Duration
	warmup         time.Duration
	json           bool
}

// txnCell is one measured configuration.
type txnCell struct {
	Mode       string  `json:"mode"` // "plain" or "txn"
	CommitMs   int64   `json:"commit_every_ms,omitempty"`
	Records    int64   `json:"records"`
	Txns       int64   `json:"txns,omitempty"`
	Seconds    float64 `json:"seconds"`
	RecordsS   float64 `json:"records_per_s"`
	MBs        float64 `json:"mb_per_s"`
	TxnsS      float64 `json:"txns_per_s,omitempty"`
	VsPlain    float64 `json:"ratio_vs_plain,omitempty"`
	AvgTxnRecs float64 `json:"records_per_txn,omitempty"`
}

func runTxnBench(args []string, stdout io.Writer) error {
	fs := cli.NewFlagSet("txn", "kawa-bench txn [--topic T] [--partitions 8] [--record-size 1024] [--commit-every 10ms,100ms,1s] [--duration 5s] [--warmup 2s] [--json]")
	b := &txnBench{}
	brokers := cli.BrokersFlag(fs)
	fs.StringVar(&b.topic, "topic", "txn-bench", "topic to write (created if missing)")
	parts := fs.Int("partitions", 8, "partitions of the topic and of every transaction")
	fs.IntVar(&b.recordSize, "record-size", 1024, "value size in bytes")
	every := fs.String("commit-every", "10ms,100ms,1s", "comma-separated commit intervals, one transactional cell each")
	fs.DurationVar(&b.duration, "duration", 5*time.Second, "measured time per cell")
	fs.DurationVar(&b.warmup, "warmup", 2*time.Second, "unmeasured plain writes before the first cell")
	fs.BoolVar(&b.json, "json", false, "print one JSON object per cell")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	b.brokers, b.partitions = *brokers, int32(*parts)
	for _, s := range strings.Split(*every, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil || d <= 0 {
			return fs.UsageErr("--commit-every: bad interval %q", s)
		}
		b.intervals = append(b.intervals, d)
	}
	if b.partitions <= 0 || b.recordSize <= 0 || b.duration <= 0 {
		return fs.UsageErr("--partitions, --record-size and --duration must be positive")
	}
	if _, err := cli.SeedBrokers(fs, b.brokers); err != nil {
		return err
	}
	return b.run(stdout)
}

func (b *txnBench) run(w io.Writer) error {
	if err := b.ensureTopic(); err != nil {
		return err
	}
	// Warm up (connections, page cache, segment files), then measure plain
	// before and after the transactional cells: the baseline is their mean,
	// so drift during the run shows instead of skewing the ratios.
	if _, err := b.cell(0, b.warmup); err != nil {
		return fmt.Errorf("warmup: %w", err)
	}
	before, err := b.cell(0, b.duration)
	if err != nil {
		return fmt.Errorf("plain cell: %w", err)
	}
	var cells []txnCell
	for _, d := range b.intervals {
		c, err := b.cell(d, b.duration)
		if err != nil {
			return fmt.Errorf("commit every %v: %w", d, err)
		}
		cells = append(cells, c)
	}
	after, err := b.cell(0, b.duration)
	if err != nil {
		return fmt.Errorf("plain cell: %w", err)
	}
	base := (before.RecordsS + after.RecordsS) / 2
	for i := range cells {
		if base > 0 {
			cells[i].VsPlain = roundTo(cells[i].RecordsS/base, 3)
		}
	}
	return b.report(w, append(append([]txnCell{before}, cells...), after))
}

func (b *txnBench) report(w io.Writer, cells []txnCell) error {
	for _, c := range cells {
		if b.json {
			if err := writeJSON(w, c); err != nil {
				return err
			}
			continue
		}
		if c.Mode == "plain" {
			fmt.Fprintf(w, "plain (idempotent, acks=all): %.0f records/s, %.1f MB/s\n", c.RecordsS, c.MBs)
			continue
		}
		fmt.Fprintf(w, "txn, commit every %4dms: %.0f records/s, %.1f MB/s, %.1f txns/s (%.0f records/txn), %.2fx plain\n",
			c.CommitMs, c.RecordsS, c.MBs, c.TxnsS, c.AvgTxnRecs, c.VsPlain)
	}
	return nil
}

func (b *txnBench) ensureTopic() error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(b.brokers, ",")...))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, b.partitions, 1, nil, b.topic)
	if err == nil {
		err = resp.Err
	}
	if errors.Is(err, kerr.TopicAlreadyExists) {
		return nil
	}
	return err
}

// cell measures one configuration: every > 0 commits a transaction each
// interval, 0 writes without transactions.
func (b *txnBench) cell(every, duration time.Duration) (txnCell, error) {
	opts := []kgo.Opt{kgo.SeedBrokers(strings.Split(b.brokers, ",")...), kgo.DefaultProduceTopic(b.topic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()),
		// ~1 MiB buffered at most (all cells alike), so a transaction's
		// final Flush is short and its length close to the interval.
		kgo.MaxBufferedRecords(max(1, (1<<20)/b.recordSize))}
	if every > 0 {
		opts = append(opts, kgo.TransactionalID(fmt.Sprintf("kawa-txn-bench-%d", time.Now().UnixNano())))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return txnCell{}, err
	}
	defer cl.Close()
	payload := make([]byte, b.recordSize)
	_, _ = rand.Read(payload)
	var acked atomic.Int64
	var firstErr atomic.Value
	promise := func(_ *kgo.Record, err error) {
		if err != nil {
			firstErr.CompareAndSwap(nil, err)
			return
		}
		acked.Add(1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), duration+30*time.Second)
	defer cancel()
	start := time.Now()
	end := start.Add(duration)
	var txns, committed int64
	for time.Now().Before(end) {
		if every > 0 {
			if err := cl.BeginTransaction(); err != nil {
				return txnCell{}, err
			}
		}
		before := acked.Load()
		for stop := time.Now().Add(max(every, 10*time.Millisecond)); time.Now().Before(stop); {
			cl.Produce(ctx, &kgo.Record{Value: payload}, promise)
		}
		if every > 0 {
			// NB: kgo's EndTransaction does not flush; records still
			// buffered would reach the broker after the EndTxn and be
			// refused (KIP-890 part 1).
			if err := cl.Flush(ctx); err != nil {
				return txnCell{}, err
			}
			if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
				return txnCell{}, err
			}
			txns++
			committed += acked.Load() - before
		}
	}
	if err := cl.Flush(ctx); err != nil {
		return txnCell{}, err
	}
	if err, _ := firstErr.Load().(error); err != nil {
		return txnCell{}, err
	}
	elapsed := time.Since(start)
	c := txnCell{Mode: "plain", Records: acked.Load(), Seconds: roundTo(elapsed.Seconds(), 3)}
	if every > 0 {
		c.Mode, c.CommitMs, c.Txns, c.Records = "txn", every.Milliseconds(), txns, committed
		c.TxnsS = roundTo(float64(txns)/elapsed.Seconds(), 1)
		c.AvgTxnRecs = roundTo(float64(committed)/float64(max(txns, 1)), 1)
	}
	c.RecordsS, c.MBs, _ = rates(c.Records, c.Records*int64(b.recordSize), elapsed)
	return c, nil
}
