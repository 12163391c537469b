package delivery

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// AtLeastOnceOptions tunes NewAtLeastOnce; the zero value is the default:
// 5 attempts with full-jitter backoff, dead letters to "<topic>.DLT", one
// serial lane per partition, no key parking.
type AtLeastOnceOptions struct {
	// Retry is the in-place retry policy.
	Retry RetryPolicy
	// DeadLetterTopic maps a source topic to its dead-letter topic; nil
	// means topic + ".DLT". The topic must exist (the loop does not create
	// it): a dead-letter write that fails stops the loop (Run returns the
	// error) instead of dropping the record.
	DeadLetterTopic func(topic string) string
	// KeyConcurrency > 1 runs up to that many keyed lanes per partition
	// (records hash to a lane by key, so one key stays in order) plus one
	// lane for records with a nil key, which are handled serially. The
	// commit watermark stays contiguous: it never passes a record whose
	// lane has not finished it. 0 or 1: the partition is one serial lane.
	KeyConcurrency int
	// Park, when non-nil, turns on key parking (see ParkOptions).
	Park *ParkOptions
}

// CommitInterval is how often, at most, the at-least-once loop commits its
// watermarks while records keep coming (it also commits on revoke and on
// stop).
const CommitInterval = 500 * time.Millisecond

// maxInFlightPerPoll bounds dispatched-but-unfinished records, in units of
// Config.MaxPollRecords: past it the loop stops polling until workers catch
// up, so memory stays bounded when handlers are slow.
const maxInFlightPerPoll = 10

// NewAtLeastOnce builds the at-least-once loop: records are handled, then
// committed; the committed offset of a partition is the lowest offset not yet
// finished (or one past the last dispatched record when all are), so it never
// passes unfinished work. A failed attempt (error or panic) is retried in
// place per opts.Retry; a record out of attempts or budget is written to the
// dead-letter topic with provenance headers (see HeaderDLT*), acks=all on the
// idempotent producer, and only that acknowledged write finishes it. On
// revoke the loop stops the revoked partitions' work, commits what finished
// and drops the rest (the new owner redelivers it); work finished under a
// partition the member no longer owns is never committed.
func NewAtLeastOnce(cfg Config, h Handler, opts AtLeastOnceOptions) (*Consumer, error) {
	c, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	rt, err := probe(c, true)
	if err != nil {
		return nil, err
	}
	a := &alo{common: c, h: h, opts: opts, parts: map[tp]*partState{}}
	if a.opts.Retry, err = opts.Retry.withDefaults(rt); err != nil {
		return nil, err
	}
	if a.opts.DeadLetterTopic == nil {
		a.opts.DeadLetterTopic = func(t string) string { return t + ".DLT" }
	}
	if a.opts.KeyConcurrency < 1 {
		a.opts.KeyConcurrency = 1
	}
	if opts.Park != nil {
		p := opts.Park.withDefaults()
		a.opts.Park = &p
	}
	a.cl, err = kgo.NewClient(a.groupOpts(kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsRevoked(a.onRevoked), kgo.OnPartitionsLost(a.onLost),
		kgo.RecordPartitioner(samePartition()))...)
	if err != nil {
		return nil, fmt.Errorf("delivery: client: %w", err)
	}
	return &Consumer{run: a.run, close: a.cl.CloseAllowingRebalance}, nil
}

// samePartition writes a dead-letter or park record to its source record's
// partition number when the target topic has it (r.Partition is preset), or
// to that number modulo the partition count, so one source partition maps
// to one target partition and per-key order carries over.
func samePartition() kgo.Partitioner {
	return kgo.BasicConsistentPartitioner(func(string) func(*kgo.Record, int) int {
		return func(r *kgo.Record, n int) int { return int(r.Partition) % n }
	})
}

type tp struct {
	topic     string
	partition int32
}

type alo struct {
	common
	h    Handler
	opts AtLeastOnceOptions
	cl   *kgo.Client

	mu       sync.Mutex
	parts    map[tp]*partState
	inFlight int
	drained  chan struct{} // signalled (non-blocking) when inFlight drops
	fatal    error
	stopRun  context.CancelFunc
}

// partState is one assigned partition's work: its lanes and its watermark.
// A new assignment of the same partition gets a new partState, so results
// from an old one can never reach a commit.
type partState struct {
	tp
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	lanes  []*lane // keyed lanes; lanes[len-1] is the nil-key lane when KeyConcurrency > 1

	mu        sync.Mutex
	offs      []int64 // dispatched, unfinished-or-not-yet-popped offsets, ascending
	done      []bool
	next      int64 // one past the last dispatched offset
	epoch     int32 // leader epoch of the last dispatched record
	committed int64 // last offset committed for this partState, -1 if none
	park      *parkSet
}

type lane struct {
	mu   sync.Mutex
	q    []*kgo.Record
	wake chan struct{}
}

func (l *lane) push(r *kgo.Record) {
	l.mu.Lock()
	l.q = append(l.q, r)
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

func (l *lane) pop(ctx context.Context) (*kgo.Record, bool) {
	for {
		l.mu.Lock()
		if len(l.q) > 0 {
			r := l.q[0]
			l.q[0] = nil
			l.q = l.q[1:]
			l.mu.Unlock()
			return r, true
		}
		l.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, false
		case <-l.wake:
		}
	}
}

func (a *alo) run(ctx context.Context) error {
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	a.mu.Lock()
	a.stopRun = stop
	a.drained = make(chan struct{}, 1)
	a.mu.Unlock()
	limit := maxInFlightPerPoll * a.MaxPollRecords
	for {
		if err := a.waitCapacity(runCtx, limit); err != nil {
			break
		}
		pctx, cancel := context.WithTimeout(runCtx, CommitInterval)
		fs := a.cl.PollRecords(pctx, a.MaxPollRecords)
		cancel()
		ok, fatal := a.fetchErr(runCtx, fs)
		if fatal != nil {
			a.setFatal(fatal)
		}
		if !ok {
			break
		}
		var err error
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			if err == nil && len(p.Records) > 0 {
				err = a.dispatch(runCtx, p)
			}
		})
		if err != nil {
			a.setFatal(err)
			break
		}
		a.commitAll(runCtx)
		a.cl.AllowRebalance()
	}
	// Stop every partition's work, commit what finished, return the cause.
	a.mu.Lock()
	all := make([]*partState, 0, len(a.parts))
	for k, ps := range a.parts {
		all = append(all, ps)
		delete(a.parts, k)
	}
	a.mu.Unlock()
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	a.stopAndCommit(cctx, all, true)
	a.cl.AllowRebalance()
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.fatal
}

func (a *alo) setFatal(err error) {
	a.mu.Lock()
	if a.fatal == nil {
		a.fatal = err
	}
	stop := a.stopRun
	a.mu.Unlock()
	stop()
}

// waitCapacity blocks while too many records are in flight, committing what
// finishes meanwhile.
func (a *alo) waitCapacity(ctx context.Context, limit int) error {
	for {
		a.mu.Lock()
		n := a.inFlight
		a.mu.Unlock()
		if n < limit {
			return ctx.Err()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-a.drained:
		case <-time.After(CommitInterval):
		}
		a.commitAll(ctx)
	}
}

func (a *alo) addInFlight(n int) {
	a.mu.Lock()
	a.inFlight += n
	a.mu.Unlock()
	a.hooks.OnInFlight(n)
	if n < 0 {
		select {
		case a.drained <- struct{}{}:
		default:
		}
	}
}

// dispatch hands a partition's polled records to its lanes, creating the
// partition's state on first sight.
func (a *alo) dispatch(ctx context.Context, p kgo.FetchTopicPartition) error {
	k := tp{p.Topic, p.Partition}
	a.mu.Lock()
	ps := a.parts[k]
	a.mu.Unlock()
	if ps == nil {
		var err error
		if ps, err = a.newPart(ctx, k); err != nil {
			return err
		}
		a.mu.Lock()
		a.parts[k] = ps
		a.mu.Unlock()
	}
	ps.mu.Lock()
	for _, r := range p.Records {
		ps.offs = append(ps.offs, r.Offset)
		ps.done = append(ps.done, false)
		ps.next = r.Offset + 1
		ps.epoch = r.LeaderEpoch
	}
	ps.mu.Unlock()
	a.addInFlight(len(p.Records))
	for _, r := range p.Records {
		ps.lanes[a.laneOf(r)].push(r)
	}
	return nil
}

func (a *alo) laneOf(r *kgo.Record) int {
	n := a.opts.KeyConcurrency
	if n == 1 {
		return 0
	}
	if r.Key == nil {
		return n // the nil-key lane
	}
	h := fnv.New32a()
	h.Write(r.Key)
	return int(h.Sum32() % uint32(n))
}

func (a *alo) newPart(ctx context.Context, k tp) (*partState, error) {
	pctx, cancel := context.WithCancel(ctx)
	ps := &partState{tp: k, ctx: pctx, cancel: cancel, committed: -1}
	if a.opts.Park != nil {
		set, err := a.loadParked(pctx, k)
		if err != nil {
			cancel()
			return nil, err
		}
		ps.park = set
	}
	n := 1
	if a.opts.KeyConcurrency > 1 {
		n = a.opts.KeyConcurrency + 1
	}
	for range n {
		l := &lane{wake: make(chan struct{}, 1)}
		ps.lanes = append(ps.lanes, l)
		ps.wg.Add(1)
		go a.work(ps, l)
	}
	return ps, nil
}

// work is one lane's goroutine; it exits when its partState is cancelled
// (revoke, loss, stop) or a record fails fatally.
func (a *alo) work(ps *partState, l *lane) {
	defer ps.wg.Done()
	for {
		r, ok := l.pop(ps.ctx)
		if !ok {
			return
		}
		if err := a.process(ps, r); err != nil {
			if ps.ctx.Err() == nil {
				a.setFatal(err)
			}
			return
		}
		a.crash(CrashAfterHandlerBeforeCommit)
		ps.finish(r.Offset)
		a.addInFlight(-1)
	}
}

// finish marks offset done and pops the finished prefix.
func (ps *partState) finish(off int64) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	i := sort.Search(len(ps.offs), func(i int) bool { return ps.offs[i] >= off })
	if i < len(ps.offs) && ps.offs[i] == off {
		ps.done[i] = true
	}
	j := 0
	for j < len(ps.offs) && ps.done[j] {
		j++
	}
	ps.offs, ps.done = ps.offs[j:], ps.done[j:]
}

// watermark is the offset to commit: the lowest unfinished offset, or one
// past the last dispatched record when nothing is unfinished.
func (ps *partState) watermark() (kgo.EpochOffset, bool) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	w := ps.next
	if len(ps.offs) > 0 {
		w = ps.offs[0]
	}
	if w <= ps.committed {
		return kgo.EpochOffset{}, false
	}
	return kgo.EpochOffset{Epoch: ps.epoch, Offset: w}, true
}

// process runs one record to completion: handled, dead-lettered, parked or
// released. A returned error means the record is not finished.
func (a *alo) process(ps *partState, r *kgo.Record) error {
	if ps.park != nil {
		if done, err := a.parkStep(ps, r); done || err != nil {
			return err
		}
	}
	res := a.attempts(ps.ctx, r)
	if res.err == nil {
		a.hooks.OnProcessed(r)
		return nil
	}
	if ps.ctx.Err() != nil {
		return ps.ctx.Err()
	}
	if err := a.deadLetter(ps.ctx, r, res); err != nil {
		return err
	}
	if ps.park != nil && r.Key != nil {
		return a.parkKey(ps, r)
	}
	return nil
}

// outcome is the last failure of a record that ran out of attempts.
type outcome struct {
	err         error
	attempts    int
	first, last time.Time
}

// attempts calls the handler until it succeeds, attempts or budget run out,
// or ctx ends.
func (a *alo) attempts(ctx context.Context, r *kgo.Record) outcome {
	p := a.opts.Retry
	start := time.Now()
	var o outcome
	for n := 1; ; n++ {
		err := a.call(ctx, a.h, r, n)
		if err == nil {
			return outcome{}
		}
		now := time.Now()
		if o.first.IsZero() {
			o.first = now
		}
		o.err, o.attempts, o.last = err, n, now
		if ctx.Err() != nil || n >= p.Attempts || !p.retryable(err) {
			return o
		}
		wait := backoff(n, p.Base, p.Max)
		if now.Add(wait).Sub(start) >= p.Budget {
			return o
		}
		a.hooks.OnRetry(r, n, err, wait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return o
		case <-t.C:
		}
	}
}

// commitAll commits every owned partition's watermark that moved. It runs in
// the poll goroutine between a poll and AllowRebalance, so no revoke runs
// concurrently with it.
func (a *alo) commitAll(ctx context.Context) {
	a.mu.Lock()
	var parts []*partState
	for _, ps := range a.parts {
		parts = append(parts, ps)
	}
	a.mu.Unlock()
	a.commitParts(ctx, parts)
}

func (a *alo) commitParts(ctx context.Context, parts []*partState) {
	offs := map[string]map[int32]kgo.EpochOffset{}
	var moved []*partState
	for _, ps := range parts {
		if eo, ok := ps.watermark(); ok {
			if offs[ps.topic] == nil {
				offs[ps.topic] = map[int32]kgo.EpochOffset{}
			}
			offs[ps.topic][ps.partition] = eo
			moved = append(moved, ps)
		}
	}
	if len(moved) == 0 {
		return
	}
	if err := a.commitSync(ctx, a.cl, offs); err != nil {
		// Not fatal: the watermark is kept and committed next time; a
		// rebalance error means the partitions moved and the new owner
		// redelivers from the last commit.
		return
	}
	for _, ps := range moved {
		ps.mu.Lock()
		ps.committed = offs[ps.topic][ps.partition].Offset
		ps.mu.Unlock()
	}
}

// stopAndCommit cancels the partitions' work, waits for their lanes and, when
// commit is set, commits what finished. Unfinished records leave the
// in-flight gauge: the partition's next owner handles them again.
func (a *alo) stopAndCommit(ctx context.Context, parts []*partState, commit bool) {
	for _, ps := range parts {
		ps.cancel()
	}
	for _, ps := range parts {
		ps.wg.Wait()
	}
	if commit {
		a.commitParts(ctx, parts)
	}
	for _, ps := range parts {
		ps.mu.Lock()
		n := 0
		for _, d := range ps.done {
			if !d {
				n++
			}
		}
		ps.offs, ps.done = nil, nil
		ps.mu.Unlock()
		if n > 0 {
			a.addInFlight(-n)
		}
	}
}

func (a *alo) take(m map[string][]int32) []*partState {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []*partState
	for t, ps := range m {
		for _, p := range ps {
			k := tp{t, p}
			if s := a.parts[k]; s != nil {
				out = append(out, s)
				delete(a.parts, k)
			}
		}
	}
	return out
}

// onRevoked (Kafka's onPartitionsRevoked): commit what finished in the
// revoked partitions, drop the rest. It runs while the member still owns the
// partitions, so the commit is in the current generation.
func (a *alo) onRevoked(ctx context.Context, _ *kgo.Client, rev map[string][]int32) {
	a.stopAndCommit(ctx, a.take(rev), true)
}

// onLost: the generation is gone (session expired, fenced), so a commit would
// be refused or, worse, land after another member's; drop everything.
func (a *alo) onLost(ctx context.Context, _ *kgo.Client, lost map[string][]int32) {
	a.stopAndCommit(ctx, a.take(lost), false)
}

// errDeadLetter wraps a failed dead-letter or park write.
var errDeadLetter = errors.New("delivery: dead-letter write failed, partition stopped")
