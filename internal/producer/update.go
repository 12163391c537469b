package producer

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Update records a batch the partition has just appended at
// [firstOffset, lastOffset]; appendTime is its LogAppendTime in ms, or -1 on
// CreateTime topics. Call it only after Check allowed the batch.
//
// Every appended batch moves the end offset (Kafka's updateMapEndOffset); a
// batch with no producer ID changes nothing else, and a control batch must go
// through ApplyMarker instead.
func (s *State) Update(b BatchInfo, firstOffset, lastOffset int64, appendTime int64, now time.Time) {
	s.AdvanceEndOffset(lastOffset + 1)
	if b.ProducerID < 0 || b.Control {
		return
	}
	p := s.producer(b.ProducerID)
	// ProducerStateEntry.addBatch: a new epoch forgets the old batches.
	p.setEpoch(b.Epoch)
	p.addBatch(Entry{
		FirstSeq:    b.FirstSeq,
		LastSeq:     b.LastSeq,
		FirstOffset: firstOffset,
		LastOffset:  lastOffset,
		Timestamp:   appendTime,
	})
	// Kafka keeps the batch's max timestamp, which a LogAppendTime topic
	// has already rewritten to the append time.
	p.lastTimestamp = b.MaxTimestamp
	if appendTime >= 0 {
		p.lastTimestamp = appendTime
	}
	p.lastSeen = now
	// ProducerAppendInfo.appendDataBatch: the first transactional batch
	// with no transaction open begins one; its offset bounds the LSO.
	if b.Transactional && p.txnFirst < 0 {
		s.beginTxn(b.ProducerID, p, firstOffset)
	}
}

// producer returns producerID's state, creating an empty one (Kafka's
// ProducerStateEntry.empty) if there is none.
func (s *State) producer(producerID int64) *producerState {
	p, ok := s.producers[producerID]
	if !ok {
		p = &producerState{epoch: noEpoch, coordEpoch: -1, lastTimestamp: -1, txnFirst: -1}
		s.producers[producerID] = p
	}
	return p
}

// MarkerInfo describes a COMMIT or ABORT marker (control batch) about to be
// written for one producer.
type MarkerInfo struct {
	ProducerID       int64
	Epoch            int16 // the marker batch's producer epoch
	CoordinatorEpoch int32 // from the marker's value (WriteTxnMarkers)
	Commit           bool  // false: ABORT
	// TxnVersion is the transaction version the coordinator sent with
	// WriteTxnMarkers (0 or 1 legacy, 2 for KIP-890 part 2); it decides
	// how strictly the epoch is checked.
	TxnVersion int16
}

// CheckMarker validates a marker before it is written, without changing any
// state (ProducerAppendInfo.appendEndTxnMarker's checks, Kafka 4.x):
//
//   - TV2 markers always carry an epoch bumped past the producer's current
//     one, so a marker epoch <= current is stale: INVALID_PRODUCER_EPOCH.
//     Exception (KAFKA-19999): the same epoch with no open transaction is a
//     retry of a marker already written (coordinator reload, lost response)
//     and is accepted.
//   - TV0/TV1 markers carry the transaction's epoch: only a lower one is
//     stale.
//   - A coordinator epoch lower than the last one seen for the producer is a
//     zombie coordinator: TRANSACTION_COORDINATOR_FENCED.
func (s *State) CheckMarker(m MarkerInfo) error {
	epoch, coordEpoch, open := noEpoch, int32(-1), false
	if p, ok := s.producers[m.ProducerID]; ok {
		epoch, coordEpoch, open = p.epoch, p.coordEpoch, p.txnFirst >= 0
	}
	if m.TxnVersion >= 2 {
		if m.Epoch < epoch || (m.Epoch == epoch && open) {
			return kerr.InvalidProducerEpoch
		}
	} else if m.Epoch < epoch {
		return kerr.InvalidProducerEpoch
	}
	if coordEpoch > m.CoordinatorEpoch {
		return kerr.TransactionCoordinatorFenced
	}
	return nil
}

// ApplyMarker records a marker the partition has just written at offset,
// after CheckMarker allowed it. It closes the producer's open transaction and
// returns its first offset (hadTxn false if none was open, e.g. a marker for a
// transaction that wrote nothing here or a retried marker); the partition
// uses it for the .txnindex entry of an abort and to move the LSO.
//
// As in Kafka's ProducerStateEntry.update, the producer takes the marker's
// epoch (a TV2 marker carries a bumped one, which forgets the retained
// batches) and coordinator epoch.
func (s *State) ApplyMarker(m MarkerInfo, offset int64, now time.Time) (firstOffset int64, hadTxn bool) {
	s.AdvanceEndOffset(offset + 1)
	p := s.producer(m.ProducerID)
	firstOffset, hadTxn = p.txnFirst, p.txnFirst >= 0
	if hadTxn && !m.Commit {
		p.markAborted(firstOffset)
	}
	p.setEpoch(m.Epoch)
	p.coordEpoch = m.CoordinatorEpoch
	s.endTxn(m.ProducerID, p)
	// Kafka keeps the marker record's timestamp, the time it was written.
	p.lastTimestamp = now.UnixMilli()
	p.lastSeen = now
	if !hadTxn {
		firstOffset = -1
	}
	return firstOffset, hadTxn
}

// Marker records a marker written at offset when the caller does not know
// its coordinator epoch or control type: the coordinator epoch is kept, and
// the transaction's batches are treated as aborted, which is safe for either
// outcome (a committed batch is never legitimately retried after its commit
// marker). Prefer ApplyMarker.
func (s *State) Marker(producerID int64, epoch int16, offset int64, now time.Time) (firstOffset int64, hadTxn bool) {
	coordEpoch := int32(-1)
	if p, ok := s.producers[producerID]; ok {
		coordEpoch = p.coordEpoch
	}
	return s.ApplyMarker(MarkerInfo{ProducerID: producerID, Epoch: epoch, CoordinatorEpoch: coordEpoch}, offset, now)
}

// markAborted flags the retained batches of the transaction that began at
// txnFirst, so they keep sequence continuity but never answer a duplicate
// (BL-06). A producer's batches from txnFirst on all belong to that
// transaction: a non-transactional batch while it is open is refused.
func (p *producerState) markAborted(txnFirst int64) {
	for i := range p.batches {
		if p.batches[i].FirstOffset >= txnFirst {
			p.batches[i].aborted = true
		}
	}
}
