package producer

import (
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
)

// LastSeq returns the sequence of the last record of a batch whose base
// sequence is firstSeq and which holds numRecords records. Sequences wrap
// from MaxInt32 to 0 (Kafka's DefaultRecordBatch.incrementSequence, as fixed
// by KAFKA-7692). numRecords must be at least 1.
func LastSeq(firstSeq, numRecords int32) int32 {
	delta := numRecords - 1
	if firstSeq > math.MaxInt32-delta {
		return delta - (math.MaxInt32 - firstSeq) - 1
	}
	return firstSeq + delta
}

// inSequence reports whether next directly follows last: last+1, or 0 after
// MaxInt32 (Kafka's ProducerAppendInfo.inSequence). The sum is taken in
// int64 so MaxInt32 is never followed by MinInt32.
func inSequence(last, next int32) bool {
	return int64(next) == int64(last)+1 || (next == 0 && last == math.MaxInt32)
}

// Check decides what to do with an incoming client batch, without changing
// any state. The order is Kafka's: batch sanity (LogValidator), duplicate
// lookup (UnifiedLog.analyzeAndValidateProducerState), then epoch, then
// sequence (ProducerAppendInfo.maybeValidateDataBatch), then the
// transaction-state check of ProducerAppendInfo.appendDataBatch.
func (s *State) Check(b BatchInfo) Verdict {
	// RecordBatch.hasProducerId is producerId > -1: without a producer ID
	// the batch is not idempotent and nothing here applies.
	if b.ProducerID < 0 {
		return Verdict{}
	}
	if err := checkBatch(b); err != nil {
		return Verdict{Err: err}
	}
	p := s.producers[b.ProducerID]
	if d := p.duplicate(b); d != nil {
		return Verdict{Duplicate: d}
	}
	if err := checkEpoch(p, b); err != nil {
		return Verdict{Err: err}
	}
	if err := s.checkSequence(p, b); err != nil {
		return Verdict{Err: err}
	}
	// ProducerAppendInfo.appendDataBatch: a non-transactional batch while
	// this producer has a transaction open on the partition.
	if p != nil && p.txnFirst >= 0 && !b.Transactional {
		return Verdict{Err: kerr.InvalidTxnState}
	}
	return Verdict{}
}

// checkBatch holds the header rules Kafka's LogValidator.validateBatch
// applies to idempotent client batches.
func checkBatch(b BatchInfo) error {
	switch {
	case b.Control:
		// "Clients are not allowed to write control records".
		return kerr.InvalidRecord
	case b.FirstSeq < 0:
		// "Invalid sequence number ... in record batch with producerId".
		return kerr.InvalidRecord
	case b.NumRecords <= 0 || b.LastSeq != LastSeq(b.FirstSeq, b.NumRecords):
		// Kafka derives the last sequence from the header, so it cannot
		// disagree; a caller that passes one that does gets the
		// "inconsistent batch offset range and count" answer.
		return kerr.InvalidRecord
	}
	return nil
}

// duplicate returns a copy of the retained batch b repeats, or nil
// (ProducerStateEntry.findDuplicateBatch): same epoch, and the same first and
// last sequence as one of the last NumBatchesToRetain batches. A retry of an
// older batch is not found here and fails the sequence check with
// OUT_OF_ORDER_SEQUENCE_NUMBER, never a silent duplicate.
func (p *producerState) duplicate(b BatchInfo) *Entry {
	if p == nil || p.epoch != b.Epoch {
		return nil
	}
	for i := range p.batches {
		r := &p.batches[i]
		// NB: Kafka would also answer from a batch of an aborted
		// transaction; that acknowledges a new record with an offset
		// read_committed never shows, i.e. loses it (BL-06). Such a
		// batch is left to the sequence check instead, which refuses
		// it as out of order.
		if r.aborted {
			continue
		}
		if r.FirstSeq == b.FirstSeq && r.LastSeq == b.LastSeq {
			e := r.Entry
			return &e
		}
	}
	return nil
}

// checkEpoch is ProducerAppendInfo.checkProducerEpoch for data batches: an
// epoch lower than the producer's is fenced with INVALID_PRODUCER_EPOCH.
// Kafka answers that code (not PRODUCER_FENCED) in Produce responses since
// 2.7 (KIP-588), so the client can abort and carry on.
func checkEpoch(p *producerState, b BatchInfo) error {
	if p != nil && b.Epoch < p.epoch {
		return kerr.InvalidProducerEpoch
	}
	return nil
}

// checkSequence is ProducerAppendInfo.checkSequence for a single client
// batch.
func (s *State) checkSequence(p *producerState, b BatchInfo) error {
	noBatches := p == nil || len(p.batches) == 0
	// KAFKA-18202 (Kafka 4.1): a transactions-v2 batch from a producer
	// with no retained batches must start at sequence 0.
	if b.TxnV2 && noBatches && b.FirstSeq != 0 {
		return kerr.OutOfOrderSequenceNumber
	}
	if p == nil {
		// KAFKA-15591 (Kafka trunk, 4.5): on a partition that has never
		// held a record, a producer with no state must start at 0;
		// otherwise two produces in flight to a just-created partition
		// can land out of order and the earlier one is lost.
		if s.endOffset == 0 && b.FirstSeq != 0 {
			return kerr.OutOfOrderSequenceNumber
		}
		// KIP-360 (Kafka 2.5+): otherwise a producer with no state
		// (never seen, or expired) may start at any sequence; state
		// starts fresh. Before 2.5 this was UNKNOWN_PRODUCER_ID
		// (BL-03 variant B).
		return nil
	}
	if b.Epoch != p.epoch {
		// A new (higher) epoch restarts sequences at 0, unless the
		// producer's epoch is unknown (NO_PRODUCER_EPOCH).
		if b.FirstSeq != 0 && p.epoch != noEpoch {
			return kerr.OutOfOrderSequenceNumber
		}
		return nil
	}
	// Same epoch: continue from the last retained sequence, or start at 0
	// when none is retained (inSequence(-1, 0)). An entry whose epoch is
	// NO_PRODUCER_EPOCH accepts any sequence, as in Kafka.
	if p.epoch != noEpoch && !inSequence(p.lastSeq(), b.FirstSeq) {
		return kerr.OutOfOrderSequenceNumber
	}
	return nil
}
