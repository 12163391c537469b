package partition

import (
	"bytes"
	"fmt"
	"path/filepath"
	"time"

	"github.com/kawa-broker/kawa/internal/batch"
	"github.com/kawa-broker/kawa/internal/producer"
	"github.com/kawa-broker/kawa/internal/vfs"
)

// loadProducers rebuilds producer state: the newest snapshot that does not
// run past the recovered log end, then a scan of the batches after it. A
// snapshot beyond the log end (the log lost unsynced data) is skipped.
func (p *Partition) loadProducers(expiration time.Duration) error {
	end := p.log.End()
	from := p.log.Start()
	var st *producer.State
	for _, off := range snapshotOffsets(p.fs, p.dir) {
		if off > end {
			continue
		}
		b, err := vfs.ReadFile(p.fs, filepath.Join(p.dir, snapshotName(off)))
		if err != nil {
			continue
		}
		s, covers, err := producer.Decode(b, expiration)
		if err != nil {
			p.lg.Warn("skipping unreadable producer snapshot", "topic", p.Topic, "partition", p.Index, "offset", off, "err", err)
			continue
		}
		st = s
		if covers > from {
			from = covers
		}
		break
	}
	if st == nil {
		st = producer.NewState(expiration)
	}
	p.producers = st
	aborted, onDisk, err := loadTxnIndex(p.fs, p.dir, end)
	if err != nil {
		return err
	}
	p.aborted = aborted
	p.replaying = true
	err = p.scanFrom(from, end)
	p.replaying = false
	if err != nil {
		return err
	}
	// Make the on-disk index match memory (entries found by the scan, the
	// tail cut by recovery) before new entries are appended to it. An index
	// that already matches (every clean restart) is left alone: rewriting it
	// cost two fsyncs per partition at start.
	if want := p.encodeTxnIndexLocked(); !bytes.Equal(onDisk, want) {
		if err := vfs.WriteFileAtomic(p.fs, filepath.Join(p.dir, txnIndexName), want); err != nil {
			return err
		}
	}
	p.producers.AdvanceEndOffset(end)
	return nil
}

// scanFrom replays batch headers in [from, end) into the producer state.
func (p *Partition) scanFrom(from, end int64) error {
	now := time.Now()
	for from < end {
		r, err := p.log.Read(from, 1<<20, end)
		if err != nil {
			return fmt.Errorf("rebuild producer state at %d: %w", from, err)
		}
		if len(r.Chunks) == 0 {
			return nil
		}
		bs, err := p.log.ReadBytes(r)
		if err != nil {
			return err
		}
		var ferr error
		_, err = batch.Iterate(bs, func(h batch.Header, b []byte) bool {
			ferr = p.replayBatch(h, b, now)
			return ferr == nil
		})
		if ferr != nil {
			return ferr
		}
		if err != nil {
			return fmt.Errorf("rebuild producer state at %d: %w", from, err)
		}
		if r.NextOffset <= from {
			return fmt.Errorf("rebuild producer state: no progress at %d", from)
		}
		from = r.NextOffset
	}
	return nil
}

func (p *Partition) replayBatch(h batch.Header, b []byte, now time.Time) error {
	if h.Control() {
		commit, coordEpoch, err := batch.ParseControl(b)
		if err != nil {
			return fmt.Errorf("control batch at %d: %w", h.BaseOffset, err)
		}
		p.applyMarkerLocked(producer.MarkerInfo{ProducerID: h.ProducerID, Epoch: h.ProducerEpoch, CoordinatorEpoch: coordEpoch, Commit: commit}, h.BaseOffset, now)
		return nil
	}
	appendTime := int64(-1)
	if h.LogAppendTime() {
		appendTime = h.MaxTimestamp
	}
	p.producers.Update(producer.BatchInfo{
		ProducerID: h.ProducerID, Epoch: h.ProducerEpoch,
		FirstSeq: h.BaseSequence, LastSeq: h.LastSequence(), NumRecords: h.NumRecords,
		Transactional: h.Transactional(), MaxTimestamp: h.MaxTimestamp,
	}, h.BaseOffset, h.LastOffset(), appendTime, now)
	return nil
}
