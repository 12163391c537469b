package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kawa-broker/kawa/cmd/internal/cli"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// W5, the exactly-once pipeline (issue 10 item 2): records are produced to
// an input topic at a fixed rate, a consume-transform-produce stage copies
// them to an output topic in transactions (kgo.GroupTransactSession,
// read_committed, committing the outputs and the input offsets together
// every commitRecords records or commitEvery, whichever comes first), and a
// read_committed consumer reads the output. Latency is end to end: from the
// input record's intended send time, carried in its sentHeader header, to
// the moment the output consumer polled the copy. After the window the
// pipeline drains, and every input record must come out exactly once.

// sentHeader is the record header holding the intended send time of an
// input record: 8 bytes, big-endian Unix nanoseconds.
const sentHeader = "kawa-bench-sent"

// pipelineBench is one W5 run against one broker.
type pipelineBench struct {
	brokers       string
	in, out       string // topics, created with partitions partitions if missing
	group         string // the transform stage's consumer group
	partitions    int
	recordSize    int
	rate          float64 // input records/s (0: as fast as the producer goes)
	warmup        time.Duration
	duration      time.Duration
	commitRecords int           // commit after this many records (0: by time only)
	commitEvery   time.Duration // commit at least this often (0: by count only)
	drain         time.Duration // after the window, how long the output may take to catch up
	brokerPID     int
}

// pipelineResult is what a W5 run measured.
type pipelineResult struct {
	Input        produceResult  // the input producer (publish latency, broker usage)
	Records      int64          // output records read inside the window
	RecordsPerS  float64        // of Records
	MiBPerS      float64        // of their values
	E2E          latencySummary // input intended send time -> output read, records sent in the window
	Transactions int64          // committed by the transform stage
	Commit       latencySummary // End(TryCommit) of those transactions: flush + EndTxn
	Expected     int64          // stamped records in the input topic
	Delivered    int64          // distinct stamped records read from the output
	Duplicates   int64          // output records whose key was already read (must be 0)
}

// run creates the topics, starts the transform stage and the output
// consumer, produces the input for warmup+duration, drains, and stops both.
func (b *pipelineBench) run(ctx context.Context, res *pipelineResult) error {
	pb := &produceBench{brokers: b.brokers, topic: b.in, partitions: b.partitions, partitionsSet: true,
		producers: 1, recordSize: b.recordSize, duration: b.duration, warmup: b.warmup, rate: b.rate,
		linger: 10 * time.Millisecond, maxBuffered: max(1, (1<<20)/max(b.recordSize, 1)), brokerPID: b.brokerPID,
		keyed: true, stamp: true}
	opts, err := cli.ProducerOpts(cli.NewFlagSet("produce", ""), "all", true)
	if err != nil {
		return err
	}
	pb.clientOpts = opts
	for _, topic := range []string{b.in, b.out} {
		t := *pb
		t.topic = topic
		if _, err := t.ensureTopic(ctx); err != nil {
			return err
		}
	}
	out := newPipelineReader()
	pb.onStart = out.setWindow
	stageCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	var stageErr, readErr error
	stage := &stageStats{commit: newHistogram()} // the transform's until wg.Wait
	assigned := make(chan struct{})
	wg.Go(func() { stageErr = b.transform(stageCtx, stage, assigned) })
	wg.Go(func() { readErr = out.read(stageCtx, b.brokers, b.out) })
	// The input starts once the stage owns its partitions, so that the
	// group join is not inside the measurement.
	timer := time.NewTimer(60 * time.Second)
	defer timer.Stop()
	select {
	case <-assigned:
	case <-timer.C:
	case <-ctx.Done():
	}

	perr := pb.run(ctx, &res.Input)
	expected, err := stampedRecords(ctx, b.brokers, b.in, pb.producers)
	if err == nil && perr == nil {
		// Every input record is acknowledged: wait until the output holds
		// them all, or the drain time is over.
		err = out.waitFor(ctx, expected, b.drain)
	}
	stop()
	wg.Wait()
	if errors.Is(stageErr, context.Canceled) {
		stageErr = nil
	}
	res.Expected, res.Transactions, res.Commit = expected, stage.txns, summarize(stage.commit)
	out.fill(res, b.recordSize)
	if err := errors.Join(perr, err, stageErr, readErr); err != nil {
		return err
	}
	if res.Duplicates > 0 || res.Delivered != res.Expected {
		return fmt.Errorf("exactly-once violated (or not drained within %v): %d of %d input records read from the output, %d duplicates",
			b.drain, res.Delivered, res.Expected, res.Duplicates)
	}
	return nil
}

// stampedRecords is the number of records the input topic holds minus the
// producers' unstamped priming records (prime), read from its end offsets.
func stampedRecords(ctx context.Context, brokers, topic string, producers int) (int64, error) {
	cl, err := cli.ClientFor(cli.NewFlagSet("pipeline", ""), brokers)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	lctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	ends, err := kadm.NewClient(cl).ListEndOffsets(lctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return 0, fmt.Errorf("end offsets of %s: %w", topic, err)
	}
	var n int64
	ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
	return n - int64(producers), nil
}

// transform is the consume-transform-produce stage: it copies every input
// record (key, value, headers) to the output topic inside a transaction
// that also commits the input offsets, until ctx ends. It counts committed
// transactions in st, and closes assigned once it owns input partitions.
func (b *pipelineBench) transform(ctx context.Context, st *stageStats, assigned chan struct{}) error {
	var once sync.Once
	onAssigned := func(context.Context, *kgo.Client, map[string][]int32) { once.Do(func() { close(assigned) }) }
	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(b.brokers), kgo.OnPartitionsAssigned(onAssigned),
		kgo.TransactionalID(fmt.Sprintf("kawa-bench-w5-%d", time.Now().UnixNano())),
		kgo.ConsumerGroup(b.group), kgo.ConsumeTopics(b.in),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), // kgo group consumers always ask for stable offsets (KIP-447)
		kgo.DefaultProduceTopic(b.out), kgo.ProducerLinger(0),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		return err
	}
	defer sess.Close()
	var failed atomic.Pointer[error]
	promise := func(_ *kgo.Record, err error) {
		if err != nil {
			failed.CompareAndSwap(nil, &err)
		}
	}
	for ctx.Err() == nil {
		if err := sess.Begin(); err != nil {
			return fmt.Errorf("begin transaction: %w", err)
		}
		n, err := b.fill(ctx, sess, promise)
		try := kgo.TryCommit
		if err != nil || ctx.Err() != nil {
			try = kgo.TryAbort
		}
		// End flushes the outputs; it must run even when ctx is over, or the
		// transaction stays open and blocks read_committed readers.
		ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		began := time.Now()
		committed, eerr := sess.End(ectx, try)
		took := time.Since(began)
		cancel()
		switch {
		case err != nil:
			return err
		case eerr != nil:
			return fmt.Errorf("end transaction: %w", eerr)
		case failed.Load() != nil:
			return fmt.Errorf("produce output: %w", *failed.Load())
		case committed && n > 0:
			st.txns++
			st.commit.RecordDuration(took)
		}
	}
	return ctx.Err()
}

// stageStats is what the transform stage counts.
type stageStats struct {
	txns   int64      // committed transactions that copied records
	commit *histogram // how long End(TryCommit) took for those
}

// fill polls input records into the open transaction until commitRecords
// were copied or commitEvery has passed, and returns how many it copied.
func (b *pipelineBench) fill(ctx context.Context, sess *kgo.GroupTransactSession, promise func(*kgo.Record, error)) (int, error) {
	pctx := ctx
	if b.commitEvery > 0 {
		var cancel context.CancelFunc
		pctx, cancel = context.WithTimeout(ctx, b.commitEvery)
		defer cancel()
	}
	n := 0
	for pctx.Err() == nil && (b.commitRecords <= 0 || n < b.commitRecords) {
		fs := sess.PollRecords(pctx, b.commitRecords-n) // <= 0: every buffered record
		if err := cli.FetchError(fs); err != nil {
			return n, fmt.Errorf("poll %s: %w", b.in, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			sess.Produce(ctx, &kgo.Record{Key: r.Key, Value: r.Value, Headers: r.Headers}, promise)
			n++
		})
	}
	return n, nil
}

// pipelineReader is the read_committed consumer of the output topic.
type pipelineReader struct {
	mu       sync.Mutex
	warmEnd  time.Time // set by setWindow before the first input record is sent
	end      time.Time
	hist     *histogram
	window   int64               // records read inside [warmEnd, end)
	seen     map[string]struct{} // keys of the stamped records read
	dups     int64
	target   int64         // waitFor's count; 0: none
	caughtUp chan struct{} // closed once len(seen) >= target > 0
	closedUp bool
}

func newPipelineReader() *pipelineReader {
	return &pipelineReader{hist: newHistogram(), seen: map[string]struct{}{}, caughtUp: make(chan struct{})}
}

func (p *pipelineReader) setWindow(warmEnd, end time.Time) {
	p.mu.Lock()
	p.warmEnd, p.end = warmEnd, end
	p.mu.Unlock()
}

// read polls the output topic until ctx ends.
func (p *pipelineReader) read(ctx context.Context, brokers, topic string) error {
	err := pollTopic(ctx, brokers, topic, func(fs kgo.Fetches, now time.Time) {
		p.mu.Lock()
		fs.EachRecord(func(r *kgo.Record) { p.record(r, now) })
		p.checkLocked()
		p.mu.Unlock()
	}, kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil && err == ctx.Err() {
		return nil // stopped: the run is over
	}
	return err
}

// pollTopic consumes topic with a client of opts until ctx ends (returning
// its error) or a fetch fails, handing each poll's fetches to onPoll with the
// time the poll returned.
func pollTopic(ctx context.Context, brokers, topic string, onPoll func(fs kgo.Fetches, now time.Time), opts ...kgo.Opt) error {
	cl, err := cli.ClientFor(cli.NewFlagSet("poll", ""), brokers, append([]kgo.Opt{kgo.ConsumeTopics(topic)}, opts...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		now := time.Now()
		if err := cli.FetchError(fs); err != nil {
			return fmt.Errorf("poll %s: %w", topic, err)
		}
		onPoll(fs, now)
	}
	return ctx.Err()
}

// record accounts one output record read at now. Unstamped records (the
// input producer's priming record, copied) are not measured.
func (p *pipelineReader) record(r *kgo.Record, now time.Time) {
	sent := sentAt(r)
	if sent.IsZero() {
		return
	}
	if _, dup := p.seen[string(r.Key)]; dup {
		p.dups++
		return
	}
	p.seen[string(r.Key)] = struct{}{}
	if p.warmEnd.IsZero() {
		return
	}
	if !sent.Before(p.warmEnd) && sent.Before(p.end) {
		p.hist.RecordDuration(now.Sub(sent))
	}
	if !now.Before(p.warmEnd) && now.Before(p.end) {
		p.window++
	}
}

func (p *pipelineReader) checkLocked() {
	if !p.closedUp && p.target > 0 && int64(len(p.seen)) >= p.target {
		p.closedUp = true
		close(p.caughtUp)
	}
}

// waitFor waits until n distinct stamped records were read, for at most d.
func (p *pipelineReader) waitFor(ctx context.Context, n int64, d time.Duration) error {
	if n <= 0 {
		return errors.New("no records in the input topic")
	}
	p.mu.Lock()
	p.target = n
	p.checkLocked()
	p.mu.Unlock()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-p.caughtUp:
		return nil
	case <-timer.C:
		return nil // the shortfall is reported as exactly-once violated
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *pipelineReader) fill(res *pipelineResult, recordSize int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	res.Records, res.Delivered, res.Duplicates = p.window, int64(len(p.seen)), p.dups
	res.RecordsPerS, _, res.MiBPerS = rates(p.window, p.window*int64(recordSize), p.end.Sub(p.warmEnd))
	res.E2E = summarize(p.hist)
}
