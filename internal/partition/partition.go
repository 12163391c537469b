package partition

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kawa-broker/kawa/internal/batch"
	"github.com/kawa-broker/kawa/internal/invariants"
	"github.com/kawa-broker/kawa/internal/log"
	"github.com/kawa-broker/kawa/internal/producer"
	"github.com/kawa-broker/kawa/internal/vfs"
)

// Isolation levels of a Fetch / ListOffsets request (KIP-98).
const (
	ReadUncommitted int8 = 0
	ReadCommitted   int8 = 1
)

// snapshotEvery is the default of Options.SnapshotBytes.
const snapshotEvery = 64 << 20

// Options configures a partition.
type Options struct {
	Log                log.Options
	ProducerExpiration time.Duration // producer.id.expiration.ms
	Logger             *slog.Logger
	// SnapshotBytes is how many bytes may be appended between producer-state
	// snapshots (0 = 64 MiB); it bounds the log scan needed on restart.
	SnapshotBytes int64
}

// Partition is one partition of one topic. Safe for concurrent use.
type Partition struct {
	Topic string
	Index int32
	dir   string
	fs    vfs.FS // the log's FS; every partition file goes through it
	lg    *slog.Logger

	mu            sync.Mutex
	log           *log.Log
	producers     *producer.State
	sinceSnapshot int64        // bytes appended since the last snapshot
	snapshotBytes int64        // Options.SnapshotBytes, defaulted
	aborted       []AbortedTxn // sorted by LastOffset; persisted in txnindex.go
	replaying     bool         // Open's log scan: index entries are re-derived, not appended
	offlineLogged atomic.Bool  // the partition went offline (sticky log error) and said so
	durableAlways bool

	// pubMu is a leaf lock: it orders publications of offs, guards unstable
	// and wake, and is never held while calling out. The log's notifier
	// publishes under it alone, never under mu (Close holds mu and waits for
	// the notifier).
	pubMu    sync.Mutex
	unstable int64                   // first offset of an undecided transaction, math.MaxInt64 if none
	offs     atomic.Pointer[offsets] // the published {HW, LSO}, replaced whole
	wake     chan struct{}           // closed and replaced at each change of offs
}

// offsets is one publication of the high watermark and the last stable offset
// (LSO = min(HW, first undecided transaction offset) <= HW). Readers load both
// with one atomic load, so they never see an LSO above the HW.
type offsets struct{ hw, lso int64 }

// AbortedTxn is one aborted transaction in this partition: its producer and
// the range from its first data offset to its ABORT marker (inclusive).
type AbortedTxn struct {
	ProducerID  int64
	FirstOffset int64
	LastOffset  int64
}

// Open opens (or creates) the partition stored in dir.
func Open(topic string, index int32, dir string, o Options) (*Partition, error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Log.FS == nil {
		o.Log.FS = vfs.OS
	}
	p := &Partition{
		Topic: topic, Index: index, dir: dir, fs: o.Log.FS, lg: o.Logger,
		wake:          make(chan struct{}),
		durableAlways: o.Log.Fsync == log.FsyncAlways,
		snapshotBytes: o.SnapshotBytes,
		unstable:      0, // nothing is stable until loadProducers has run
	}
	if p.snapshotBytes <= 0 {
		p.snapshotBytes = snapshotEvery
	}
	p.offs.Store(&offsets{})
	lo := o.Log
	lo.Logger = o.Logger
	lo.OnDurable = p.onDurable
	l, err := log.Open(dir, lo)
	if err != nil {
		return nil, fmt.Errorf("partition %s-%d: %w", topic, index, err)
	}
	p.log = l
	if err := p.loadProducers(o.ProducerExpiration); err != nil {
		l.Close()
		return nil, fmt.Errorf("partition %s-%d: %w", topic, index, err)
	}
	p.mu.Lock()
	p.publishLocked(l.DurableEnd())
	p.mu.Unlock()
	return p, nil
}

// onDurable runs on the log's notifier goroutine. It takes only pubMu.
func (p *Partition) onDurable(end int64) { p.publish(end) }

// publish raises the HW to hw (never lowers it), recomputes the LSO from the
// first unstable offset last set under mu, and wakes fetch waiters if either
// changed. It takes only the leaf lock pubMu.
func (p *Partition) publish(hw int64) {
	p.pubMu.Lock()
	defer p.pubMu.Unlock()
	cur := p.offs.Load()
	next := offsets{hw: max(cur.hw, hw)}
	next.lso = min(next.hw, p.unstable)
	if next == *cur {
		return
	}
	if invariants.Enabled {
		checkPublication(*cur, next)
	}
	p.offs.Store(&next)
	close(p.wake)
	p.wake = make(chan struct{})
}

// publishLocked is publish after refreshing the first unstable offset from
// the producer state, which mu guards. The caller holds mu.
func (p *Partition) publishLocked(hw int64) {
	unstable := int64(math.MaxInt64)
	if first, ok := p.producers.FirstUndecidedOffset(); ok {
		unstable = first
	}
	p.pubMu.Lock()
	p.unstable = unstable
	p.pubMu.Unlock()
	p.publish(hw)
}

// pinUnstable lowers the first unstable offset to off (never raises it)
// without publishing: the published LSO is already <= HW <= off. A
// transaction's first offset must be known to every publisher before its data
// is in the log, since the notifier publishes without mu. publishLocked then
// sets the exact value from the producer state (the same offset, or an
// earlier one if the producer's transaction began before). The caller holds mu.
func (p *Partition) pinUnstable(off int64) {
	p.pubMu.Lock()
	p.unstable = min(p.unstable, off)
	p.pubMu.Unlock()
}

// Wake returns a channel closed at the next HW or LSO advance.
func (p *Partition) Wake() <-chan struct{} {
	p.pubMu.Lock()
	defer p.pubMu.Unlock()
	return p.wake
}

// HighWatermark is the offset below which records are visible to
// read_uncommitted consumers.
func (p *Partition) HighWatermark() int64 { return p.offs.Load().hw }

// LastStableOffset is the offset below which every transaction is decided.
func (p *Partition) LastStableOffset() int64 { return p.offs.Load().lso }

// LogStart is the log start offset.
func (p *Partition) LogStart() int64 { return p.log.Start() }

// LogEnd is the log end offset (next offset to assign).
func (p *Partition) LogEnd() int64 { return p.log.End() }

// LogStats are the partition log's fsync counters since it was opened.
func (p *Partition) LogStats() log.Stats { return p.log.Stats() }

// Size is the partition's size on disk in bytes.
func (p *Partition) Size() int64 { return p.log.Size() }

// AppendResult is the outcome of a successful Append.
type AppendResult struct {
	BaseOffset int64
	LastOffset int64
	AppendTime int64 // LogAppendTime, or -1 for CreateTime topics
	Duplicate  bool  // the batch was a retry; nothing new was written
}

// Append validates producer state and appends one batch (already checked by
// batch.Validate). logAppendTime rewrites the batch timestamp (topics with
// message.timestamp.type=LogAppendTime). Errors are kerr errors (the
// per-partition error code of the Produce response) or a storage error.
// Append does not wait for durability: see WaitDurable.
func (p *Partition) Append(b []byte, h batch.Header, logAppendTime bool, now time.Time) (AppendResult, error) {
	info := producer.BatchInfo{
		ProducerID: h.ProducerID, Epoch: h.ProducerEpoch,
		FirstSeq: h.BaseSequence, LastSeq: h.LastSequence(), NumRecords: h.NumRecords,
		Transactional: h.Transactional(), Control: h.Control(), MaxTimestamp: h.MaxTimestamp,
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	v := p.producers.Check(info)
	if v.Err != nil {
		return AppendResult{}, v.Err
	}
	if d := v.Duplicate; d != nil {
		return AppendResult{BaseOffset: d.FirstOffset, LastOffset: d.LastOffset, AppendTime: d.Timestamp, Duplicate: true}, nil
	}
	appendTime := int64(-1)
	if logAppendTime {
		appendTime = now.UnixMilli()
		batch.SetLogAppendTime(b, appendTime)
	}
	if info.Transactional {
		// The log's notifier (or a WaitDurable) may publish a HW covering this
		// batch as soon as it is written and fsynced, before publishLocked
		// below refreshes the first unstable offset from the producer state.
		// So the LSO is pinned at the batch's base before the write.
		p.pinUnstable(p.log.End())
	}
	base, err := p.log.Append(b)
	if err != nil {
		return AppendResult{}, p.offline(err)
	}
	last := base + int64(h.LastOffsetDelta)
	p.producers.Update(info, base, last, appendTime, now)
	p.afterAppendLocked(int64(len(b)))
	return AppendResult{BaseOffset: base, LastOffset: last, AppendTime: appendTime}, nil
}

func (p *Partition) afterAppendLocked(n int64) {
	p.sinceSnapshot += n
	if p.sinceSnapshot >= p.snapshotBytes {
		if err := p.snapshotLocked(); err != nil {
			p.lg.Warn("producer snapshot failed", "topic", p.Topic, "partition", p.Index, "err", err)
		}
	}
	// FsyncAlways: the HW moves on the log's notifier once the fsync covers
	// the batch; the LSO may still move now (a marker decided a transaction).
	hw := p.offs.Load().hw
	if !p.durableAlways {
		hw = p.log.End()
	}
	p.publishLocked(hw)
}

// WaitDurable blocks until offsets below end are durable per the flush policy
// (acks=all), or ctx ends.
func (p *Partition) WaitDurable(ctx context.Context, end int64) error {
	if err := p.log.WaitDurable(ctx, end); err != nil {
		return p.offline(err)
	}
	// The log's OnDurable callback may not have run yet; raise the HW here
	// so that an acknowledged acks=all write is visible to a Fetch or
	// ListOffsets sent right after the acknowledgement.
	if p.HighWatermark() < end {
		p.publish(p.log.DurableEnd())
	}
	return nil
}

// WriteMarker appends a COMMIT or ABORT control batch for producerID and
// returns its offset. Used by the transaction coordinator (KIP-98 markers).
func (p *Partition) WriteMarker(m producer.MarkerInfo, now time.Time) (int64, error) {
	b := batch.NewControl(m.ProducerID, m.Epoch, m.Commit, m.CoordinatorEpoch, now.UnixMilli())
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.producers.CheckMarker(m); err != nil {
		return 0, err
	}
	off, err := p.log.Append(b)
	if err != nil {
		return 0, p.offline(err)
	}
	p.applyMarkerLocked(m, off, now)
	p.afterAppendLocked(int64(len(b)))
	return off, nil
}

func (p *Partition) applyMarkerLocked(m producer.MarkerInfo, off int64, now time.Time) {
	first, had := p.producers.ApplyMarker(m, off, now)
	if had && !m.Commit {
		p.addAbortedLocked(AbortedTxn{ProducerID: m.ProducerID, FirstOffset: first, LastOffset: off}, !p.replaying)
	}
}

// ReadResult is what Read returns: whole batches as bytes plus the offsets a
// Fetch response reports.
type ReadResult struct {
	Records          []byte
	HighWatermark    int64
	LastStableOffset int64
	LogStart         int64
	Aborted          []AbortedTxn // read_committed only: aborted txns overlapping the returned range
	// Files (ReadFiles only) holds the batches instead of Records: pinned
	// ranges of segment files, in log order, to be released by the caller.
	Files []log.Pinned
}

// ErrOffsetOutOfRange is returned by Read for offsets outside [log start, log end].
var ErrOffsetOutOfRange = kerr.OffsetOutOfRange

// Read returns whole batches from offset, up to maxBytes (the first batch is
// returned whole even if larger, KIP-74), bounded by the HW (read_uncommitted)
// or the LSO (read_committed).
func (p *Partition) Read(offset int64, maxBytes int, isolation int8) (ReadResult, error) {
	return p.ReadWith(nil, offset, maxBytes, isolation)
}

// ReadWith is Read with the buffer for Records taken from alloc(n), which
// must return a slice of length n whose contents may be anything (a reused
// buffer: every byte is overwritten). A nil alloc allocates. The fetch path
// passes pooled buffers and recycles them once the response is encoded; on
// an error the buffer is dropped.
func (p *Partition) ReadWith(alloc func(n int) []byte, offset int64, maxBytes int, isolation int8) (ReadResult, error) {
	return p.read(alloc, offset, maxBytes, isolation, 0)
}

// ReadFiles is ReadWith for a caller that can send bytes straight from the
// segment files (a Fetch on a plaintext connection, splice(2)): when the
// batches found total at least minFileBytes, Records stays nil and Files
// holds them as pinned file ranges in log order (log.Pinned: the caller must
// Release each once sent); a smaller result is copied through alloc as
// ReadWith does. minFileBytes <= 0 pins every non-empty result.
//
// NB: batches left in the files are not CRC-checked on the way out (ReadWith
// checks every batch it copies): reading them into memory is the copy this
// path exists to avoid. Their CRCs were checked when they were produced and
// when the segment was recovered, Read still checks every batch header it
// walks (length, magic, offsets), and clients check CRCs, as with Kafka,
// which never re-checks on fetch.
func (p *Partition) ReadFiles(alloc func(n int) []byte, offset int64, maxBytes int, isolation int8, minFileBytes int) (ReadResult, error) {
	return p.read(alloc, offset, maxBytes, isolation, max(minFileBytes, 1))
}

// read is ReadWith, or ReadFiles when minFileBytes > 0.
func (p *Partition) read(alloc func(n int) []byte, offset int64, maxBytes int, isolation int8, minFileBytes int) (ReadResult, error) {
	if err := p.log.Err(); err != nil {
		return ReadResult{HighWatermark: -1, LastStableOffset: -1, LogStart: -1}, p.offline(err)
	}
	o := p.offs.Load()
	hw, lso := o.hw, o.lso
	res := ReadResult{HighWatermark: hw, LastStableOffset: lso, LogStart: p.log.Start()}
	upTo := hw
	if isolation == ReadCommitted {
		upTo = lso
	}
	if offset < res.LogStart || offset > p.log.End() {
		return res, ErrOffsetOutOfRange
	}
	if offset >= upTo {
		return res, nil
	}
	r, err := p.log.Read(offset, maxBytes, upTo)
	if errors.Is(err, log.ErrOffsetOutOfRange) {
		return res, ErrOffsetOutOfRange
	}
	if err != nil {
		return res, storageError(err)
	}
	if len(r.Chunks) == 0 {
		return res, nil
	}
	if isolation == ReadCommitted {
		res.Aborted = p.abortedIn(r.FirstOffset, r.NextOffset)
	}
	if minFileBytes > 0 && r.Size() >= int64(minFileBytes) {
		files, err := r.Pin()
		if err != nil {
			return res, storageError(err)
		}
		res.Files = files
		return res, nil
	}
	var bs []byte
	if alloc == nil {
		bs = make([]byte, r.Size())
	} else {
		bs = alloc(int(r.Size()))
	}
	if err := p.log.ReadInto(bs, r); err != nil {
		return res, storageError(err)
	}
	// Verify lengths and CRCs on the way out too (BL-25): bit rot after
	// recovery is reported, never served. CRC-32C runs at memory speed.
	if _, err := batch.Iterate(bs, nil); err != nil {
		p.lg.Error("corrupt batch on read", "topic", p.Topic, "partition", p.Index, "offset", offset, "err", err)
		return res, storageError(fmt.Errorf("corrupt batch at or after offset %d: %w", offset, err))
	}
	res.Records = bs
	return res, nil
}

// abortedIn lists aborted transactions overlapping [from, to).
func (p *Partition) abortedIn(from, to int64) []AbortedTxn {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []AbortedTxn
	for _, a := range p.aborted {
		if a.LastOffset >= from && a.FirstOffset < to {
			out = append(out, a)
		}
	}
	return out
}

// ListOffset answers ListOffsets for one partition: timestamp -1 latest (HW,
// or LSO for read_committed), -2 earliest, -3 max timestamp (KIP-734), -4
// earliest local (KIP-405; same as earliest here), else the first offset
// whose timestamp is >= ts. By timestamp and -3 it returns the matching
// record's offset and timestamp; offset -1 with timestamp -1 when no record
// matches.
func (p *Partition) ListOffset(ts int64, isolation int8) (offset, timestamp int64) {
	switch ts {
	case -1:
		if isolation == ReadCommitted {
			return p.LastStableOffset(), -1
		}
		return p.HighWatermark(), -1
	case -2, -4:
		return p.log.Start(), -1
	case -3:
		mts, off := p.log.MaxTimestamp()
		if off < 0 || off >= p.HighWatermark() {
			return -1, -1
		}
		return p.recordForTime(off, mts)
	}
	off, ok := p.log.OffsetForTime(ts)
	if !ok || off >= p.HighWatermark() {
		return -1, -1
	}
	// The log answers per batch; Kafka answers per record (offset_time.go).
	if off, ts = p.recordForTime(off, ts); off >= p.HighWatermark() {
		return -1, -1
	}
	return off, ts
}

// DeleteRecords raises the log start offset to offset (-1 = HW) and returns
// the new log start. OFFSET_OUT_OF_RANGE beyond the HW.
func (p *Partition) DeleteRecords(offset int64) (int64, error) {
	hw := p.HighWatermark()
	if offset == -1 {
		offset = hw
	}
	if offset < 0 || offset > hw {
		return -1, kerr.OffsetOutOfRange
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.log.Err(); err != nil {
		return -1, p.offline(err)
	}
	if offset <= p.log.Start() {
		return p.log.Start(), nil
	}
	if err := p.snapshotBeforeTruncateLocked(); err != nil {
		return -1, storageError(fmt.Errorf("producer snapshot: %w", err))
	}
	if err := p.log.SetStart(offset); err != nil {
		return -1, storageError(err)
	}
	p.producers.AdvanceEndOffset(p.log.End())
	return p.log.Start(), nil
}

// EnforceRetention applies time/size retention and expires idle producers.
func (p *Partition) EnforceRetention(now time.Time) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.producers.Expire(now)
	if err := p.snapshotBeforeTruncateLocked(); err != nil {
		// NB: retention still runs, or a full disk would never free
		// space; the state stays in memory, at risk only until the next
		// snapshot succeeds.
		p.lg.Warn("producer snapshot before retention failed", "topic", p.Topic, "partition", p.Index, "err", err)
	}
	_, err := p.log.EnforceRetention(now)
	p.producers.AdvanceEndOffset(p.log.End())
	start := p.log.Start()
	i := sort.Search(len(p.aborted), func(i int) bool { return p.aborted[i].LastOffset >= start })
	p.aborted = p.aborted[i:]
	return err
}

// SetConfig applies changed topic configs to the log.
func (p *Partition) SetConfig(retentionMs, retentionBytes, segmentBytes int64) {
	p.log.SetConfig(retentionMs, retentionBytes, segmentBytes)
}

// Producers returns the producer state for DescribeProducers (KIP-664).
func (p *Partition) Producers() []producer.ProducerInfo {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.producers.All()
}

// Close snapshots producer state, flushes and closes the log.
func (p *Partition) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	serr := p.snapshotLocked()
	if err := p.log.Close(); err != nil {
		return err
	}
	return serr
}

// Delete closes the partition and removes its directory.
func (p *Partition) Delete() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.Delete()
}

// Err returns the sticky storage error that took the partition offline (a
// failed write or fsync of its log), or nil while it serves. It wraps
// kerr.KafkaStorageError and the cause.
func (p *Partition) Err() error {
	if err := p.log.Err(); err != nil {
		return storageError(err)
	}
	return nil
}

// offline reports a log error as KAFKA_STORAGE_ERROR and, when the log's
// write or fsync failed (a sticky error), logs once that the partition went
// offline.
// From then on Append, WriteMarker, Read and DeleteRecords fail with it until
// a restart recovers the log from what is on disk; other partitions keep
// serving.
func (p *Partition) offline(err error) error {
	if p.log.Err() != nil && p.offlineLogged.CompareAndSwap(false, true) {
		p.lg.Error("partition offline after a storage error; restart to recover it from disk",
			"topic", p.Topic, "partition", p.Index, "err", p.log.Err())
	}
	return storageError(err)
}

// storageError reports err as KAFKA_STORAGE_ERROR (the per-partition code the
// broker answers) while keeping err's chain, so errors.Is(err, log.ErrCorruption)
// and the like still hold above the partition.
func storageError(err error) error { return fmt.Errorf("%w: %w", kerr.KafkaStorageError, err) }

// snapshotName is the Kafka-style producer snapshot file for offset.
func snapshotName(offset int64) string { return fmt.Sprintf("%020d.snapshot", offset) }

// snapshotOffsets lists the offsets of snapshot files in dir, newest first.
func snapshotOffsets(fsys vfs.FS, dir string) []int64 {
	ents, _ := fsys.ReadDir(dir)
	var offs []int64
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".snapshot")
		if !ok {
			continue
		}
		if n, err := strconv.ParseInt(name, 10, 64); err == nil {
			offs = append(offs, n)
		}
	}
	sort.Slice(offs, func(i, j int) bool { return offs[i] > offs[j] })
	return offs
}

// snapshotBeforeTruncateLocked writes a producer snapshot unless the newest
// one already covers the log end. It runs before the log start may move:
// recovery replays only the batches that are left, so without it a crash
// after DeleteRecords or retention loses every producer whose batches were
// deleted, and their retries are appended a second time (BL-03, BL-04
// across a restart).
func (p *Partition) snapshotBeforeTruncateLocked() error {
	if offs := snapshotOffsets(p.fs, p.dir); len(offs) > 0 && offs[0] == p.log.End() {
		return nil
	}
	return p.snapshotLocked()
}

// snapshotLocked syncs the log (so the snapshot never covers data a crash
// could take back), writes the producer state, and keeps the two newest
// snapshots.
func (p *Partition) snapshotLocked() error {
	p.sinceSnapshot = 0
	if err := p.log.Sync(); err != nil {
		return err
	}
	if err := p.writeTxnIndexLocked(); err != nil {
		return err
	}
	end := p.log.End()
	data := p.producers.Encode(end)
	path := filepath.Join(p.dir, snapshotName(end))
	if err := vfs.WriteFileAtomic(p.fs, path, data); err != nil {
		return err
	}
	for i, off := range snapshotOffsets(p.fs, p.dir) {
		if i >= 2 {
			// NB: not made durable: an old snapshot back after a crash is
			// only skipped for a newer one.
			p.fs.Remove(filepath.Join(p.dir, snapshotName(off)))
		}
	}
	return nil
}

// Log returns the partition's log, for the log cleaner (internal/cleaner), which reads it and replaces closed
// segments through it; the partition's producer state and aborted-transaction index are not changed by it.
func (p *Partition) Log() *log.Log { return p.log }
