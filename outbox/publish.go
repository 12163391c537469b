package outbox

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// publisher sends one batch of rows and reports each row's outcome in errs.
// A returned error means the shard must start over (recovery included).
type publisher interface {
	publish(ctx context.Context, s *shardRun, rows []row, errs []error) error
}

type pinKey struct{}

// clientOpts are the user's options followed by the relay's own. shard >= 0
// makes a transactional client for that shard.
func (r *Relay) clientOpts(shard int) []kgo.Opt {
	// A topic that does not exist fails its rows after one metadata load
	// that does not know it (kgo retries 4 times by default, about 12 s that
	// the whole shard waits, per attempt): the attempt is charged and the
	// row goes dead after MaxAttempts like any other rejected row. Before
	// ClientOpts, so an application can choose otherwise.
	opts := append([]kgo.Opt{kgo.UnknownTopicRetries(1)}, r.cfg.ClientOpts...)
	opts = append(opts,
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(partitioner()),
		kgo.ProducerLinger(0),
	)
	if shard >= 0 {
		opts = append(opts,
			kgo.TransactionalID("kawa-outbox-"+r.o.source+"-"+strconv.Itoa(shard)),
			kgo.TransactionTimeout(r.cfg.TransactionTimeout),
			kgo.WithHooks(endTxnHook{r}),
		)
	}
	return opts
}

// partitioner sends a record to its pinned partition (the progress record,
// or Record.Partition), a keyed record by the murmur2 hash of its key as
// Kafka's default partitioner does (so every relay instance agrees), and a
// keyless one anywhere.
func partitioner() kgo.Partitioner {
	keyed := kgo.StickyKeyPartitioner(nil)
	return kgo.BasicConsistentPartitioner(func(topic string) func(*kgo.Record, int) int {
		tp := keyed.ForTopic(topic)
		return func(rec *kgo.Record, n int) int {
			if rec.Context != nil {
				if p, ok := rec.Context.Value(pinKey{}).(int32); ok {
					if int(p) >= n {
						return -1 // kgo fails the record: an attempt is charged
					}
					return int(p)
				}
			}
			if rec.Key == nil {
				return rand.N(n)
			}
			return tp.Partition(rec, n)
		}
	})
}

func (rw *row) record(ctx context.Context) *kgo.Record {
	rec := &kgo.Record{Topic: rw.topic, Value: rw.value}
	if len(rw.key) > 0 {
		rec.Key = rw.key
	}
	for _, h := range rw.headers {
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}
	if rw.part.Valid {
		rec.Context = context.WithValue(ctx, pinKey{}, int32(rw.part.Int64))
	}
	return rec
}

// produceAll produces recs and waits for every ack; it calls the
// after-produce crash point between the two.
func (r *Relay) produceAll(ctx context.Context, cl *kgo.Client, recs []*kgo.Record, errs []error) {
	var wg sync.WaitGroup
	wg.Add(len(recs))
	for i, rec := range recs {
		cl.Produce(ctx, rec, func(_ *kgo.Record, err error) {
			errs[i] = err
			wg.Done()
		})
	}
	r.crash(PointAfterProduce)
	wg.Wait()
}

type idemPublisher struct {
	r  *Relay
	cl *kgo.Client
}

func (p *idemPublisher) publish(ctx context.Context, s *shardRun, rows []row, errs []error) error {
	recs := make([]*kgo.Record, len(rows))
	for i := range rows {
		recs[i] = rows[i].record(ctx)
	}
	p.r.produceAll(ctx, p.cl, recs, errs)
	return nil
}

// errTxnAborted marks a row whose transaction was aborted because another
// row of the batch failed.
var errTxnAborted = errors.New("outbox: batch transaction aborted")

type txnPublisher struct {
	r     *Relay
	cl    *kgo.Client
	shard int
	key   []byte // progress record key: <source>/<shard>
}

// newTxnPublisher creates the shard's transactional client, initialises its
// producer ID (which fences any earlier holder of the transactional.id and
// aborts its open transaction) and then recovers: the rows named by the
// shard's last committed progress record are deleted if still present.
func (r *Relay) newTxnPublisher(ctx context.Context, s *shardRun) (*txnPublisher, error) {
	cl, err := kgo.NewClient(r.clientOpts(s.shard)...)
	if err != nil {
		return nil, fmt.Errorf("outbox: shard %d: client: %w", s.shard, err)
	}
	p := &txnPublisher{r: r, cl: cl, shard: s.shard, key: []byte(r.o.source + "/" + strconv.Itoa(s.shard))}
	if _, _, err := cl.ProducerID(ctx); err != nil {
		cl.Close()
		return nil, fmt.Errorf("outbox: shard %d: init producer id: %w", s.shard, err)
	}
	ids, err := p.lastProgress(ctx)
	if err != nil {
		cl.Close()
		return nil, fmt.Errorf("outbox: shard %d: read progress: %w", s.shard, err)
	}
	if len(ids) > 0 {
		if _, err := r.q.settle(ctx, r.o.db, s.shard, r.cfg.Owner, s.epoch, ids, nil, r.cfg.MaxAttempts); err != nil {
			cl.Close()
			return nil, fmt.Errorf("outbox: shard %d: delete rows of the last progress record: %w", s.shard, err)
		}
	}
	return p, nil
}

func (p *txnPublisher) close() { p.cl.Close() }

func (p *txnPublisher) publish(ctx context.Context, s *shardRun, rows []row, errs []error) error {
	if err := p.cl.BeginTransaction(); err != nil {
		return fmt.Errorf("outbox: shard %d: begin transaction: %w", s.shard, err)
	}
	ids := make([]int64, len(rows))
	recs := make([]*kgo.Record, 0, len(rows)+1)
	for i := range rows {
		ids[i] = rows[i].id
		recs = append(recs, rows[i].record(ctx))
	}
	recs = append(recs, &kgo.Record{
		Topic:   p.r.cfg.ProgressTopic,
		Key:     p.key,
		Value:   encodeProgress(ids),
		Context: context.WithValue(ctx, pinKey{}, int32(s.shard)),
	})
	all := make([]error, len(recs))
	p.r.produceAll(ctx, p.cl, recs, all)
	copy(errs, all)
	if perr := all[len(all)-1]; perr != nil || slices.ContainsFunc(all, func(e error) bool { return e != nil }) {
		if err := p.cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
			return fmt.Errorf("outbox: shard %d: abort: %w", s.shard, err)
		}
		for i := range errs {
			if errs[i] == nil {
				errs[i] = errTxnAborted
			}
		}
		if perr != nil && !slices.ContainsFunc(errs, func(e error) bool { return e != errTxnAborted }) {
			// Only the progress record failed: no row is to blame.
			return fmt.Errorf("outbox: shard %d: progress record: %w", s.shard, perr)
		}
		return nil
	}
	if err := p.cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		// Outcome unknown (or fenced): start over; recovery reads the
		// progress topic to learn whether this batch committed.
		return fmt.Errorf("outbox: shard %d: commit: %w", s.shard, err)
	}
	return nil
}

// endTxnHook calls the inside-end-txn crash point once an EndTxn request
// has been written to the broker.
type endTxnHook struct{ r *Relay }

func (h endTxnHook) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == int16(kmsg.EndTxn) && err == nil {
		h.r.crash(PointInsideEndTxn)
	}
}

// encodeProgress encodes sorted row ids: a version byte (1), the count and
// the deltas between successive ids, as unsigned varints.
func encodeProgress(ids []int64) []byte {
	s := slices.Clone(ids)
	slices.Sort(s)
	b := []byte{1}
	b = binary.AppendUvarint(b, uint64(len(s)))
	prev := int64(0)
	for _, id := range s {
		b = binary.AppendUvarint(b, uint64(id-prev))
		prev = id
	}
	return b
}

func decodeProgress(b []byte) ([]int64, error) {
	if len(b) == 0 || b[0] != 1 {
		return nil, errors.New("outbox: progress record: unknown version")
	}
	b = b[1:]
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return nil, errors.New("outbox: progress record: bad count")
	}
	b = b[k:]
	ids := make([]int64, 0, n)
	prev := int64(0)
	for range n {
		d, k := binary.Uvarint(b)
		if k <= 0 {
			return nil, errors.New("outbox: progress record: truncated")
		}
		b = b[k:]
		prev += int64(d)
		ids = append(ids, prev)
	}
	return ids, nil
}

// ensureProgressTopic creates the progress topic with one partition per
// shard, or checks that the existing one has enough partitions.
func (r *Relay) ensureProgressTopic(ctx context.Context) error {
	cl, err := kgo.NewClient(r.cfg.ClientOpts...)
	if err != nil {
		return fmt.Errorf("outbox: relay: client: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	resp, err := adm.CreateTopic(ctx, int32(r.o.shards), -1, nil, r.cfg.ProgressTopic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("outbox: relay: create progress topic %s: %w", r.cfg.ProgressTopic, err)
	}
	md, err := adm.Metadata(ctx, r.cfg.ProgressTopic)
	if err != nil {
		return fmt.Errorf("outbox: relay: progress topic metadata: %w", err)
	}
	td := md.Topics[r.cfg.ProgressTopic]
	if td.Err != nil {
		return fmt.Errorf("outbox: relay: progress topic %s: %w", r.cfg.ProgressTopic, td.Err)
	}
	if len(td.Partitions) < r.o.shards {
		return fmt.Errorf("outbox: relay: progress topic %s has %d partitions, want >= %d (one per shard)", r.cfg.ProgressTopic, len(td.Partitions), r.o.shards)
	}
	return nil
}

// lastProgress returns the row ids of the shard's last committed progress
// record (nil if there is none). The progress partition belongs to the
// shard, so its last committed record is the shard's; it is found by reading
// a growing window below the last stable offset with read_committed.
func (p *txnPublisher) lastProgress(ctx context.Context) ([]int64, error) {
	topic, part := p.r.cfg.ProgressTopic, int32(p.shard)
	adm := kadm.NewClient(p.cl)
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		return nil, err
	}
	pd, ok := md.Topics[topic].Partitions[part]
	if !ok {
		return nil, fmt.Errorf("progress topic %s has no partition %d", topic, part)
	}
	ends, err := adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	end, eok := ends.Lookup(topic, part)
	start, sok := starts.Lookup(topic, part)
	if !eok || !sok || end.Err != nil || start.Err != nil {
		return nil, fmt.Errorf("list offsets of %s/%d: %v %v", topic, part, end.Err, start.Err)
	}
	lso, logStart := end.Offset, start.Offset
	for window := int64(64); ; window *= 4 {
		from := max(logStart, lso-window)
		var last *kgo.Record
		for off := from; off < lso; {
			recs, next, err := p.fetch(ctx, pd.Leader, md.Topics[topic].ID, topic, part, off)
			if err != nil {
				return nil, err
			}
			for _, rec := range recs {
				if rec.Offset < lso && string(rec.Key) == string(p.key) {
					last = rec
				}
			}
			if next <= off {
				break
			}
			off = next
		}
		if last != nil {
			return decodeProgress(last.Value)
		}
		if from == logStart {
			return nil, nil
		}
	}
}

// fetch reads committed records of one partition from off with a raw Fetch
// (read_committed) and returns them with the offset to fetch next.
func (p *txnPublisher) fetch(ctx context.Context, leader int32, id [16]byte, topic string, part int32, off int64) ([]*kgo.Record, int64, error) {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = 0
	req.MinBytes = 1
	req.MaxBytes = 4 << 20
	req.IsolationLevel = 1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rt.TopicID = id
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = part
	rp.FetchOffset = off
	rp.PartitionMaxBytes = 4 << 20
	rp.CurrentLeaderEpoch = -1
	rp.LogStartOffset = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, p.cl.Broker(int(leader)))
	if err != nil {
		return nil, off, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, off, err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return nil, off, errors.New("fetch: unexpected response shape")
	}
	fp, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
		Offset: off, IsolationLevel: kgo.ReadCommitted(), Topic: topic, Partition: part,
	}, &resp.Topics[0].Partitions[0], kgo.DefaultDecompressor(), nil)
	if fp.Err != nil {
		return nil, off, fp.Err
	}
	return fp.Records, next, nil
}
