package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/kawa-broker/kawa/cmd/internal/cli"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// produceBench is a parsed `kawa-bench produce` invocation.
type produceBench struct {
	brokers       string
	topic         string
	partitions    int
	partitionsSet bool // --partitions given: an existing topic must match
	producers     int
	recordSize    int
	duration      time.Duration
	warmup        time.Duration
	rate          float64 // records/s over all producers; 0: as fast as possible
	sync          bool
	linger        time.Duration
	maxBuffered   int
	brokerPID     int
	json          bool
	clientOpts    []kgo.Opt // acks, idempotence
	// Transactions (W4): each client gets its own transactional ID and
	// commits every txnRecords records or every txnEvery, whichever is set.
	txnRecords int
	txnEvery   time.Duration
	keyed      bool // W6: key each record by producer index and sequence (dupKey)
	// W5: each record carries its intended send time in a sentHeader
	// header, and onStart (if set) learns the window before any record is
	// sent.
	stamp   bool
	onStart func(warmEnd, end time.Time)
}

// transactional reports whether the clients produce in transactions.
func (b *produceBench) transactional() bool { return b.txnRecords > 0 || b.txnEvery > 0 }

// produceResult is one run's report; its JSON names are the script's API.
type produceResult struct {
	Bench       string         `json:"bench"` // "produce"
	Topic       string         `json:"topic"`
	Partitions  int            `json:"partitions"`
	Producers   int            `json:"producers"`
	RecordSize  int            `json:"record_size"`
	Acks        string         `json:"acks"`
	Idempotent  bool           `json:"idempotent"`
	Sync        bool           `json:"sync"`
	TargetRate  float64        `json:"target_rate"` // records/s; 0: max
	WarmupS     float64        `json:"warmup_s"`
	DurationS   float64        `json:"duration_s"` // measured window
	Records     int64          `json:"records"`    // acked inside the window
	Errors      int64          `json:"errors"`     // failed records, whole run
	RecordsPerS float64        `json:"records_per_s"`
	MBPerS      float64        `json:"mb_per_s"` // record value bytes, 10^6
	MiBPerS     float64        `json:"mib_per_s"`
	Latency     latencySummary `json:"publish_latency_us"`
	Broker      *brokerUsage   `json:"broker,omitempty"`
}

func runBenchProduce(args []string, stdout io.Writer) error {
	b, res, err := parseBenchProduce(args)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	runErr := b.run(ctx, res)
	if res.DurationS > 0 {
		if err := b.report(stdout, res); err != nil {
			return err
		}
	}
	if runErr != nil {
		return fmt.Errorf("bench produce: %w", runErr)
	}
	return nil
}

func parseBenchProduce(args []string) (*produceBench, *produceResult, error) {
	fs := cli.NewFlagSet("produce", "kawa-bench produce --topic T [flags]")
	b := &produceBench{}
	fs.StringVar(&b.brokers, "brokers", cli.DefaultBrokers, "comma-separated `host:port` list of seed brokers")
	fs.StringVar(&b.topic, "topic", "bench", "topic; created with --partitions if missing")
	fs.IntVar(&b.partitions, "partitions", 1, "partitions of the topic")
	fs.IntVar(&b.producers, "producers", 1, "concurrent producers, each its own client")
	fs.IntVar(&b.recordSize, "record-size", 1024, "record value size in bytes (random, incompressible)")
	fs.DurationVar(&b.duration, "duration", 20*time.Second, "measured window")
	fs.DurationVar(&b.warmup, "warmup", 5*time.Second, "unmeasured time before the window")
	fs.Float64Var(&b.rate, "rate", 0, "target records/s over all producers (0: as fast as possible)")
	fs.BoolVar(&b.sync, "sync", false, "one record in flight per producer (ProduceSync)")
	fs.DurationVar(&b.linger, "linger", 10*time.Millisecond, "producer linger (kgo's default is 10ms)")
	fs.IntVar(&b.maxBuffered, "max-buffered-records", 50000, "records a producer buffers before Produce blocks (kgo's default)")
	fs.IntVar(&b.brokerPID, "broker-pid", 0, "broker process to sample for CPU and peak RSS")
	fs.BoolVar(&b.json, "json", false, "print one JSON object")
	acks := fs.String("acks", "all", "all, 1 or 0")
	idempotent := fs.Bool("idempotent", true, "idempotent producer; needs --acks all")
	if err := cli.ParseFlags(fs, args); err != nil {
		return nil, nil, err
	}
	if err := b.validate(fs); err != nil {
		return nil, nil, err
	}
	opts, err := cli.ProducerOpts(fs, *acks, *idempotent)
	if err != nil {
		return nil, nil, err
	}
	b.clientOpts = opts
	b.partitionsSet = cli.IsSet(fs, "partitions")
	res := &produceResult{
		Bench: "produce", Topic: b.topic, Producers: b.producers, RecordSize: b.recordSize,
		Acks: *acks, Idempotent: *idempotent && (*acks == "all" || *acks == "-1"), Sync: b.sync,
		TargetRate: b.rate, WarmupS: b.warmup.Seconds(),
	}
	return b, res, nil
}

func (b *produceBench) validate(fs *cli.FlagSet) error {
	switch {
	case b.topic == "":
		return fs.UsageErr("--topic is empty")
	case b.partitions < 1:
		return fs.UsageErr("--partitions must be >= 1")
	case b.producers < 1 || b.producers > 1024:
		return fs.UsageErr("--producers must be in [1, 1024]")
	case b.recordSize < 0 || b.recordSize > 64<<20:
		return fs.UsageErr("--record-size must be in [0, 64 MiB]")
	case b.duration <= 0:
		return fs.UsageErr("--duration must be positive")
	case b.maxBuffered < 1:
		return fs.UsageErr("--max-buffered-records must be >= 1")
	case b.warmup < 0 || b.rate < 0 || b.linger < 0 || b.brokerPID < 0:
		return fs.UsageErr("--warmup, --rate, --linger and --broker-pid must be >= 0")
	}
	return nil
}

// produceStats collects acks from every producer's promises.
type produceStats struct {
	hist     *histogram
	window   atomic.Int64 // acks received inside the window
	errs     atomic.Int64
	firstErr atomic.Pointer[error]
	warmEnd  time.Time
	end      time.Time
	runCtx   context.Context
}

// ack accounts one record intended to be sent at intended.
func (s *produceStats) ack(intended time.Time, err error) {
	now := time.Now()
	if err != nil {
		if s.runCtx.Err() != nil && errors.Is(err, context.Canceled) {
			return // interrupted, not failed
		}
		s.errs.Add(1)
		s.firstErr.CompareAndSwap(nil, &err)
		return
	}
	if !intended.Before(s.warmEnd) {
		s.hist.RecordDuration(now.Sub(intended))
	}
	if !now.Before(s.warmEnd) && now.Before(s.end) {
		s.window.Add(1)
	}
}

// run sets up the topic and clients, produces for warmup+duration, and fills res.
func (b *produceBench) run(ctx context.Context, res *produceResult) error {
	partitions, err := b.ensureTopic(ctx)
	if err != nil {
		return err
	}
	res.Partitions = partitions
	clients, err := b.newClients()
	defer func() {
		for _, cl := range clients {
			cl.Close()
		}
	}()
	if err != nil {
		return err
	}
	payload := make([]byte, b.recordSize)
	rand.NewChaCha8([32]byte{}).Read(payload)
	if err := prime(ctx, clients, payload, b.transactional()); err != nil {
		return err
	}
	start := time.Now()
	st := &produceStats{hist: newHistogram(), warmEnd: start.Add(b.warmup), runCtx: ctx}
	st.end = st.warmEnd.Add(b.duration)
	if b.onStart != nil {
		b.onStart(st.warmEnd, st.end)
	}
	var wg sync.WaitGroup
	for i, cl := range clients {
		if b.transactional() {
			wg.Go(func() { b.txnLoop(ctx, cl, st, payload) })
			continue
		}
		wg.Go(func() { b.produceLoop(ctx, cl, uint32(i), st, start, payload) })
	}
	usage, sampleErr := b.sampleWindow(ctx, st)
	stopped := time.Now() // the window's end, or the interrupt
	if stopped.After(st.end) {
		stopped = st.end
	}
	wg.Wait()
	b.fill(res, st, usage, stopped.Sub(st.warmEnd))
	if p := st.firstErr.Load(); p != nil {
		return fmt.Errorf("%d records failed, first: %w", res.Errors, *p)
	}
	return sampleErr
}

// prime sends one record synchronously through each client before the clock
// starts, so connecting, metadata and the idempotent producer ID
// (InitProducerID) are behind every producer when the warmup begins. On a
// loaded machine that setup can outlast a short warmup and window, and the
// window would count acks of setup, not of steady state (with none at all
// when it outlasts both). The primed records stay in the log, unmeasured.
// Transactional clients send theirs in a committed transaction of one, which
// also gets their transactional producer ID and epoch (InitProducerID).
func prime(ctx context.Context, clients []*kgo.Client, payload []byte, txn bool) error {
	pctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	errs := make([]error, len(clients))
	var wg sync.WaitGroup
	for i, cl := range clients {
		wg.Go(func() {
			if txn {
				errs[i] = cl.BeginTransaction()
			}
			if errs[i] == nil {
				errs[i] = cl.ProduceSync(pctx, &kgo.Record{Value: payload}).FirstErr()
			}
			if txn && errs[i] == nil {
				errs[i] = cl.EndTransaction(pctx, kgo.TryCommit)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("first record: %w", err)
	}
	return nil
}

// fill computes the result from the stats of a window that lasted elapsed.
func (b *produceBench) fill(res *produceResult, st *produceStats, usage *brokerUsage, elapsed time.Duration) {
	if elapsed > 0 {
		res.DurationS = roundTo(elapsed.Seconds(), 3)
	}
	res.Records, res.Errors, res.Broker = st.window.Load(), st.errs.Load(), usage
	bytes := res.Records * int64(b.recordSize)
	res.RecordsPerS, res.MBPerS, res.MiBPerS = rates(res.Records, bytes, elapsed)
	res.Latency = summarize(st.hist)
	usage.setPerGiB(bytes)
}

// sampleWindow samples the broker at the window's start and end.
func (b *produceBench) sampleWindow(ctx context.Context, st *produceStats) (*brokerUsage, error) {
	s := &brokerSampler{pid: b.brokerPID}
	if !sleepUntil(ctx, st.warmEnd) {
		return nil, nil
	}
	if err := s.start(); err != nil {
		return nil, fmt.Errorf("broker pid %d: %w", b.brokerPID, err)
	}
	sleepUntil(ctx, st.end)
	u, err := s.stop(0)
	if err != nil {
		return nil, fmt.Errorf("broker pid %d: %w", b.brokerPID, err)
	}
	return u, nil
}

// sleepUntil waits for t or ctx's end and reports whether t was reached.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// produceLoop sends records until the window ends, then waits for their acks.
// With a rate the intended send times are start + i*interval, fixed in advance.
// With keyed, producer is this loop's index in the record keys (dupKey).
func (b *produceBench) produceLoop(ctx context.Context, cl *kgo.Client, producer uint32, st *produceStats, start time.Time, payload []byte) {
	var interval time.Duration
	if b.rate > 0 {
		interval = time.Duration(float64(time.Second) * float64(b.producers) / b.rate)
	}
	// The record's Timestamp is its intended send time; kgo leaves a
	// caller-set Timestamp alone, so the promise needs no closure per record.
	promise := func(r *kgo.Record, err error) { st.ack(r.Timestamp, err) }
	for i := 0; ctx.Err() == nil; i++ {
		intended := time.Now()
		if interval > 0 {
			intended = start.Add(time.Duration(i) * interval)
			if !sleepUntil(ctx, intended) {
				break
			}
		}
		if !intended.Before(st.end) {
			break
		}
		rec := &kgo.Record{Value: payload, Timestamp: intended}
		if b.keyed {
			rec.Key = dupKey(producer, uint64(i))
		}
		if b.stamp {
			rec.Headers = []kgo.RecordHeader{{Key: sentHeader, Value: binary.BigEndian.AppendUint64(nil, uint64(intended.UnixNano()))}}
		}
		if b.sync {
			st.ack(intended, cl.ProduceSync(ctx, rec).FirstErr())
			continue
		}
		cl.Produce(ctx, rec, promise)
	}
	fctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := cl.Flush(fctx); err != nil {
		st.ack(time.Now(), fmt.Errorf("flush: %w", err))
	}
}

// ensureTopic creates the topic if missing and returns its partition count.
func (b *produceBench) ensureTopic(ctx context.Context) (int, error) {
	cl, err := cli.ClientFor(cli.NewFlagSet("produce", ""), b.brokers)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	// W8's 1,000 partitions took over 15 s on Kawa with --fsync=always (each
	// partition directory is created durably, MkdirAllDurable) on a loaded VM.
	tctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	resp, err := adm.CreateTopic(tctx, int32(b.partitions), 1, nil, b.topic)
	if err == nil {
		err = cli.WithMessage(resp.Err, resp.ErrMessage)
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return 0, fmt.Errorf("create topic %s: %w", b.topic, err)
	}
	topics, err := adm.ListTopics(tctx, b.topic)
	if err != nil {
		return 0, err
	}
	t := topics[b.topic]
	if t.Err != nil {
		return 0, fmt.Errorf("topic %s: %w", b.topic, t.Err)
	}
	if n := len(t.Partitions); n != b.partitions && b.partitionsSet {
		return 0, fmt.Errorf("topic %s exists with %d partitions, not --partitions %d: delete it or pick another --topic", b.topic, n, b.partitions)
	}
	return len(t.Partitions), nil
}

// newClients builds one kgo client per producer, so each has its own
// connections and producer ID, as separate applications would.
func (b *produceBench) newClients() ([]*kgo.Client, error) {
	fs := cli.NewFlagSet("produce", "")
	opts := append([]kgo.Opt{
		kgo.DefaultProduceTopic(b.topic),
		kgo.ProducerLinger(b.linger),
		kgo.MaxBufferedRecords(b.maxBuffered),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
	}, b.clientOpts...)
	clients := make([]*kgo.Client, 0, b.producers)
	run := time.Now().UnixNano() // transactional IDs unique to this run
	for i := range b.producers {
		o := opts
		if b.transactional() {
			o = append(slices.Clip(opts), kgo.TransactionalID(fmt.Sprintf("kawa-bench-%d-%d", run, i)))
		}
		cl, err := cli.ClientFor(fs, b.brokers, o...)
		if err != nil {
			return clients, err
		}
		clients = append(clients, cl)
	}
	return clients, nil
}

func (b *produceBench) report(w io.Writer, r *produceResult) error {
	if b.json {
		return writeJSON(w, r)
	}
	mode := "acks=" + r.Acks
	if r.Idempotent {
		mode += " idempotent"
	}
	if r.Sync {
		mode += " sync"
	}
	fmt.Fprintf(w, "bench produce %s: %d partitions, %d producers, %d B records, %s, %.1fs window after %.1fs warmup\n",
		r.Topic, r.Partitions, r.Producers, r.RecordSize, mode, r.DurationS, r.WarmupS)
	fmt.Fprintf(w, "  %.0f records/s  %.2f MB/s  (%d records, %d errors)\n", r.RecordsPerS, r.MBPerS, r.Records, r.Errors)
	l := r.Latency
	fmt.Fprintf(w, "  publish latency p50 %s  p99 %s  p99.9 %s  max %s  (%d samples)\n",
		fmtLatency(l.P50), fmtLatency(l.P99), fmtLatency(l.P999), fmtLatency(l.Max), l.Count)
	writeBrokerUsage(w, r.Broker)
	return nil
}
