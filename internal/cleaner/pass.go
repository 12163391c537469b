package cleaner

import (
	"crypto/md5"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/batch"
	"github.com/kawa-broker/kawa/internal/config"
	"github.com/kawa-broker/kawa/internal/log"
)

// readStep is how many bytes one log read of a pass asks for.
const readStep = 1 << 20

// each calls fn with every whole batch whose last offset is in [from, upTo), in log order, reading the log in
// readStep steps. from below the log start reads from the log start.
func each(l *log.Log, from, upTo int64, fn func(h batch.Header, b []byte) error) error {
	for off := max(from, l.Start()); off < upTo; {
		res, err := l.Read(off, readStep, upTo)
		if err != nil {
			return err
		}
		if len(res.Chunks) == 0 {
			return nil
		}
		buf, err := l.ReadBytes(res)
		if err != nil {
			return err
		}
		var ferr error
		if _, err := batch.Iterate(buf, func(h batch.Header, b []byte) bool {
			ferr = fn(h, b)
			return ferr == nil
		}); err != nil {
			return err
		}
		if ferr != nil {
			return ferr
		}
		off = res.NextOffset
	}
	return nil
}

// txnView is what one scan of the log tells a pass about producers and transactions.
type txnView struct {
	lastBatch map[int64]int64      // producer ID → base offset of its last data batch
	lastAny   map[int64]int64      // producer ID → base offset of its last batch, data or marker
	aborted   map[int64]bool       // base offsets of data batches of aborted transactions
	undecided map[int64]bool       // base offsets of transactional batches with no marker below the high watermark
	bare      map[int64]bareMarker // base offset → a COMMIT/ABORT marker none of whose data is left in the log
}

// bareMarker is a transaction marker whose transaction has no data batch left in the log (all cleaned away, or
// below the log start): the marker may go once its delete horizon has passed (KIP-534), unless it is its
// producer's last batch.
type bareMarker struct {
	producerID int64
	commit     bool
	horizon    int64 // the delete horizon stamped on it (ms), or -1 if it has none yet
}

// scanTxns reads the log from its start to hw: each producer's last data batch and the outcome of every
// transactional batch (the next COMMIT/ABORT marker of its producer, KIP-98), and which markers govern no data
// any more (Kafka's CleanedTransactionMetadata.onControlBatchRead: a marker is kept while any batch of its
// transaction is seen, an empty retained one included).
func scanTxns(l *log.Log, hw int64) (txnView, error) {
	v := txnView{lastBatch: map[int64]int64{}, lastAny: map[int64]int64{}, aborted: map[int64]bool{},
		undecided: map[int64]bool{}, bare: map[int64]bareMarker{}}
	open := map[int64][]int64{}
	err := each(l, l.Start(), hw, func(h batch.Header, b []byte) error {
		if h.ProducerID < 0 {
			return nil
		}
		v.lastAny[h.ProducerID] = h.BaseOffset
		if h.Control() {
			commit, _, err := batch.ParseControl(b)
			if err != nil {
				return nil // not a transaction marker: kept, and it ends nothing
			}
			if len(open[h.ProducerID]) == 0 {
				m := bareMarker{producerID: h.ProducerID, commit: commit, horizon: -1}
				if h.HasDeleteHorizon() {
					m.horizon = h.FirstTimestamp
				}
				v.bare[h.BaseOffset] = m
			}
			if !commit {
				for _, base := range open[h.ProducerID] {
					v.aborted[base] = true
				}
			}
			delete(open, h.ProducerID)
			return nil
		}
		v.lastBatch[h.ProducerID] = h.BaseOffset
		if h.Transactional() {
			open[h.ProducerID] = append(open[h.ProducerID], h.BaseOffset)
		}
		return nil
	})
	for _, bases := range open {
		for _, base := range bases {
			v.undecided[base] = true
		}
	}
	return v, err
}

// offsetMap is the pass's bounded map from key hash (MD5, as Kafka's SkimpyOffsetMap) to the latest offset.
type offsetMap struct {
	m   map[[md5.Size]byte]int64
	cap int
}

var errMapFull = errors.New("offset map full")

// buildMap maps the keys of the committed and non-transactional data in [from, upTo). When the map is full it
// stops before the batch that would overflow it and returns that batch's base offset as the mapped end (at
// least one batch is always mapped, so every pass makes progress).
func buildMap(l *log.Log, from, upTo int64, tv txnView, capacity int) (offsetMap, int64, error) {
	om := offsetMap{m: map[[md5.Size]byte]int64{}, cap: capacity}
	end := upTo
	mapped := false
	err := each(l, from, upTo, func(h batch.Header, b []byte) error {
		if h.Control() || h.Transactional() && (tv.aborted[h.BaseOffset] || tv.undecided[h.BaseOffset]) {
			return nil
		}
		recs, err := batch.Records(b)
		if err != nil {
			return err
		}
		if mapped && len(om.m)+len(recs) > om.cap {
			end = h.BaseOffset
			return errMapFull
		}
		for _, r := range recs {
			if r.Key != nil {
				om.m[md5.Sum(r.Key)] = h.BaseOffset + int64(r.OffsetDelta)
			}
		}
		mapped = true
		return nil
	})
	if errors.Is(err, errMapFull) {
		err = nil
	}
	return om, end, err
}

// removableMarkers returns the base offsets of the markers in [from, to) that this pass removes (their
// transaction has no data left, their delete horizon is at or before nowMs, and they are not their producer's
// last batch, which holds its epoch) and, of those, the ABORT markers.
func (v txnView) removableMarkers(from, to, nowMs int64) (all map[int64]bool, aborts []int64) {
	all = map[int64]bool{}
	for base, m := range v.bare {
		if base < from || base >= to || m.horizon < 0 || nowMs < m.horizon || v.lastAny[m.producerID] == base {
			continue
		}
		all[base] = true
		if !m.commit {
			aborts = append(aborts, base)
		}
	}
	return all, aborts
}

// rewriter turns a segment's batches into its cleaned batches.
type rewriter struct {
	tv      txnView
	om      offsetMap
	nowMs   int64
	cfg     config.Topic
	removed int64
	markers int64          // transaction markers removed
	gone    map[int64]bool // base offsets of the markers this pass removes (the partition forgot them first)
	// horizon is when the next pass is due for expiry (ms): the earliest delete horizon stamped or kept on a
	// tombstone or marker, or now when a transaction's data went (its marker gets stamped next); math.MaxInt64 if none.
	horizon int64

	gap    bool         // a run of removed batches is pending
	gapHdr batch.Header // its filler: offsets [BaseOffset, LastOffset()]
}

// batch returns what replaces the batch h/b: the same bytes, a rewritten batch, or nil when it is removed (and
// joins the pending filler).
func (w *rewriter) batch(h batch.Header, b []byte) ([]byte, error) {
	if h.Control() {
		return w.marker(h, b)
	}
	if h.Transactional() && w.tv.undecided[h.BaseOffset] {
		return b, nil // an undecided transaction is not touched
	}
	aborted := h.Transactional() && w.tv.aborted[h.BaseOffset]
	var recs []kmsg.Record
	if !aborted {
		var err error
		if recs, err = batch.Records(b); err != nil {
			return nil, err
		}
	}
	horizonPassed := h.HasDeleteHorizon() && w.nowMs >= h.FirstTimestamp
	kept := make([]kmsg.Record, 0, len(recs))
	tombstones := false
	for _, r := range recs {
		off := h.BaseOffset + int64(r.OffsetDelta)
		if r.Key != nil {
			if latest, ok := w.om.m[md5.Sum(r.Key)]; ok && latest > off {
				continue // superseded
			}
			if r.Value == nil {
				if horizonPassed {
					continue // a tombstone past its delete horizon
				}
				tombstones = true
			}
		}
		kept = append(kept, r)
	}
	removed := int64(h.NumRecords) - int64(len(kept))
	w.removed += removed
	stamp := tombstones && !h.HasDeleteHorizon()
	if tombstones {
		hz := h.FirstTimestamp
		if stamp {
			hz = w.nowMs + w.cfg.DeleteRetentionMs
		}
		w.horizon = min(w.horizon, hz)
	}
	switch {
	case removed == 0 && !stamp:
		return b, nil
	case len(kept) == 0 && h.ProducerID >= 0 && w.tv.lastBatch[h.ProducerID] == h.BaseOffset:
		// The producer's last sequence lives in this header (KIP-98): keep it as an empty batch.
		return batch.EncodeRetained(h, nil), nil
	case len(kept) == 0:
		if h.Transactional() {
			w.horizon = min(w.horizon, w.nowMs) // its marker may be bare now: the next round stamps it
		}
		return nil, nil
	}
	if stamp {
		return w.stamped(h, kept)
	}
	return retained(h, kept)
}

// retained encodes the kept records of h as Kafka's cleaner does (MemoryRecords.filterTo): offsets, deltas and
// header kept, and compressed again with the batch's own codec, so a compressed topic stays compressed.
func retained(h batch.Header, kept []kmsg.Record) ([]byte, error) {
	return batch.Compress(batch.EncodeRetained(h, kept), h.Codec())
}

// stamped re-encodes the kept records of h with a delete horizon of now + delete.retention.ms (KIP-534:
// attribute bit 6, the horizon in the base timestamp, the records' timestamp deltas re-based on it).
func (w *rewriter) stamped(h batch.Header, kept []kmsg.Record) ([]byte, error) {
	hz := w.nowMs + w.cfg.DeleteRetentionMs
	for i := range kept {
		d := h.FirstTimestamp + kept[i].TimestampDelta64 - hz
		kept[i].TimestampDelta64, kept[i].TimestampDelta = d, int32(d) // kmsg reads the int32 when the int64 is 0
	}
	h.SetDeleteHorizon(hz)
	return retained(h, kept)
}

// marker returns what replaces the control batch h/b (Kafka's Cleaner.checkBatchRetention for control batches,
// KIP-98 and KIP-534): kept while its transaction has data in the log or it is its producer's last batch;
// once bare, stamped with a delete horizon; after the horizon, removed (when the pass planned it: the
// partition forgot an ABORT marker's aborted-transaction entry before the swap).
func (w *rewriter) marker(h batch.Header, b []byte) ([]byte, error) {
	m, bare := w.tv.bare[h.BaseOffset]
	if !bare || w.tv.lastAny[h.ProducerID] == h.BaseOffset {
		return b, nil
	}
	switch {
	case w.gone[h.BaseOffset]:
		w.markers++
		return nil, nil
	case m.horizon >= 0:
		w.horizon = min(w.horizon, m.horizon)
		return b, nil
	}
	recs, err := batch.Records(b)
	if err != nil {
		return nil, err
	}
	w.horizon = min(w.horizon, w.nowMs+w.cfg.DeleteRetentionMs)
	return w.stamped(h, recs)
}

// drop adds the offsets of a removed batch (or a gap) to the pending filler.
func (w *rewriter) drop(base, last, maxTs int64, leaderEpoch int32) {
	if !w.gap {
		w.gap = true
		w.gapHdr = batch.Header{BaseOffset: base, PartitionLeaderEpoch: leaderEpoch, FirstTimestamp: maxTs,
			MaxTimestamp: maxTs, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
	}
	w.gapHdr.LastOffsetDelta = int32(last - w.gapHdr.BaseOffset)
	w.gapHdr.MaxTimestamp = max(w.gapHdr.MaxTimestamp, maxTs)
	w.gapHdr.FirstTimestamp = w.gapHdr.MaxTimestamp
}

// flush emits the pending filler: one empty batch covering the removed batches' offsets, so the segment's
// offsets stay contiguous.
func (w *rewriter) flush(add func([]byte) error) error {
	if !w.gap {
		return nil
	}
	w.gap = false
	return add(batch.EncodeRetained(w.gapHdr, nil))
}

// isFiller reports whether h is an empty batch of no producer (a filler of an earlier pass, or Kafka's): it
// joins the pending filler instead of being kept on its own.
func isFiller(h batch.Header) bool {
	return h.NumRecords == 0 && h.ProducerID < 0 && !h.Control()
}

// rewriteSegment replaces one segment by its cleaned batches.
func (w *rewriter) rewriteSegment(l *log.Log, s log.SegmentInfo) (read, written int64, err error) {
	err = l.ReplaceSegment(s.Base, func(add func([]byte) error) error {
		next := s.Base
		err := each(l, s.Base, s.End, func(h batch.Header, b []byte) error {
			read += int64(len(b))
			if h.BaseOffset > next { // below the log start inside this segment: unreadable anyway
				w.drop(next, h.BaseOffset-1, h.MaxTimestamp, h.PartitionLeaderEpoch)
			}
			next = h.LastOffset() + 1
			if isFiller(h) {
				w.drop(h.BaseOffset, h.LastOffset(), h.MaxTimestamp, h.PartitionLeaderEpoch)
				return nil
			}
			out, err := w.batch(h, b)
			if err != nil {
				return fmt.Errorf("batch at offset %d: %w", h.BaseOffset, err)
			}
			if out == nil {
				w.drop(h.BaseOffset, h.LastOffset(), h.MaxTimestamp, h.PartitionLeaderEpoch)
				return nil
			}
			if err := w.flush(add); err != nil {
				return err
			}
			written += int64(len(out))
			return add(out)
		})
		if err != nil {
			return err
		}
		if next < s.End {
			w.drop(next, s.End-1, -1, -1)
		}
		if w.gap {
			written += batch.HeaderSize
		}
		return w.flush(add)
	})
	return read, written, err
}
