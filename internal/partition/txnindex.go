package partition

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/kawa-broker/kawa/internal/batch"
	"github.com/kawa-broker/kawa/internal/invariants"
	"github.com/kawa-broker/kawa/internal/vfs"
)

// The aborted-transaction index (Kafka's .txnindex, one file per partition
// here): every aborted transaction's producer ID, first offset and ABORT
// marker offset, so a read_committed fetch can return the aborted
// transactions overlapping its range (KIP-98) without scanning the log.
//
// Durability: entries are appended (vfs.AppendFile, fsynced) when an ABORT
// marker is written, and the file is rewritten (vfs.WriteFileAtomic) with
// every producer-state snapshot. Entries for markers
// after the newest snapshot are re-derived on Open by the log scan that
// rebuilds producer state, so a crash between a marker's fsync and the
// index's never loses an entry. Each entry carries a CRC; a torn last entry
// is ignored.
const (
	txnIndexName  = "aborted.txnindex"
	txnEntrySize  = 8 + 8 + 8 + 4
	txnIndexMagic = "KAWATXN1"
)

func encodeTxnEntry(dst []byte, a AbortedTxn) []byte {
	start := len(dst)
	dst = binary.BigEndian.AppendUint64(dst, uint64(a.ProducerID))
	dst = binary.BigEndian.AppendUint64(dst, uint64(a.FirstOffset))
	dst = binary.BigEndian.AppendUint64(dst, uint64(a.LastOffset))
	return binary.BigEndian.AppendUint32(dst, batch.Checksum(dst[start:]))
}

// loadTxnIndex reads the index, keeping entries whose marker lies below end
// (a recovered log may have lost the tail) and stopping at the first torn or
// corrupt entry. It also returns the file's bytes (nil when it is missing), so
// Open rewrites the file only when it differs from memory.
func loadTxnIndex(fsys vfs.FS, dir string, end int64) ([]AbortedTxn, []byte, error) {
	raw, err := vfs.ReadFile(fsys, filepath.Join(dir, txnIndexName))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	b := raw
	if len(b) < len(txnIndexMagic) || string(b[:len(txnIndexMagic)]) != txnIndexMagic {
		return nil, nil, fmt.Errorf("partition: %s has an unknown format", txnIndexName)
	}
	var out []AbortedTxn
	for b = b[len(txnIndexMagic):]; len(b) >= txnEntrySize; b = b[txnEntrySize:] {
		if batch.Checksum(b[:24]) != binary.BigEndian.Uint32(b[24:]) {
			break
		}
		a := AbortedTxn{
			ProducerID:  int64(binary.BigEndian.Uint64(b)),
			FirstOffset: int64(binary.BigEndian.Uint64(b[8:])),
			LastOffset:  int64(binary.BigEndian.Uint64(b[16:])),
		}
		if a.LastOffset < end {
			out = append(out, a)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].LastOffset < out[j].LastOffset })
	return out, raw, nil
}

// addAbortedLocked records an aborted transaction once (replays may see the
// same marker again) and appends it to the index file.
func (p *Partition) addAbortedLocked(a AbortedTxn, persist bool) {
	for i := len(p.aborted) - 1; i >= 0; i-- {
		if p.aborted[i].LastOffset == a.LastOffset {
			return
		}
		if p.aborted[i].LastOffset < a.LastOffset {
			break
		}
	}
	p.aborted = append(p.aborted, a)
	if invariants.Enabled {
		p.checkAbortedLocked()
	}
	if !persist {
		return
	}
	if err := vfs.AppendFile(p.fs, filepath.Join(p.dir, txnIndexName), encodeTxnEntry(nil, a)); err != nil {
		p.lg.Warn("aborted-txn index append failed; the next snapshot rewrites it", "topic", p.Topic, "partition", p.Index, "err", err)
	}
}

// writeTxnIndexLocked rewrites the whole index atomically (at snapshots),
// dropping entries below the log start.
func (p *Partition) writeTxnIndexLocked() error {
	return vfs.WriteFileAtomic(p.fs, filepath.Join(p.dir, txnIndexName), p.encodeTxnIndexLocked())
}

// encodeTxnIndexLocked drops the entries below the log start and returns the
// index file's contents for the rest.
func (p *Partition) encodeTxnIndexLocked() []byte {
	start := p.log.Start()
	kept := p.aborted[:0]
	for _, a := range p.aborted {
		if a.LastOffset >= start {
			kept = append(kept, a)
		}
	}
	p.aborted = kept
	b := []byte(txnIndexMagic)
	for _, a := range p.aborted {
		b = encodeTxnEntry(b, a)
	}
	return b
}

// ForgetMarkers prepares the partition for the log cleaner's removal of transaction markers at offsets below
// upTo (internal/cleaner; Kafka removes a marker once no data of its transaction is left and its delete
// horizon has passed, KIP-98, KIP-534). The ABORT markers at offsets aborts lose their aborted-transaction
// entries: a read_committed client told of an aborted transaction whose ABORT marker it never sees would drop
// every later batch of that producer (committed data hidden). And unless the newest producer-state snapshot
// already covers upTo, one is written at the log end: a restart replays the log only after its snapshot, and a
// snapshot taken while one of those transactions was open would otherwise leave it open, pinning the last
// stable offset, once its marker is gone. Errors are storage errors; on one nothing is removed by the caller.
func (p *Partition) ForgetMarkers(aborts []int64, upTo int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(aborts) > 0 {
		drop := make(map[int64]bool, len(aborts))
		for _, off := range aborts {
			drop[off] = true
		}
		kept := p.aborted[:0]
		for _, a := range p.aborted {
			if !drop[a.LastOffset] {
				kept = append(kept, a)
			}
		}
		p.aborted = kept
	}
	if offs := snapshotOffsets(p.fs, p.dir); len(offs) == 0 || offs[0] < upTo {
		return p.snapshotLocked() // rewrites the aborted-transaction index too
	}
	return p.writeTxnIndexLocked()
}
