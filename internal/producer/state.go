package producer

import (
	"cmp"
	"math"
	"slices"
	"time"
)

const (
	// NumBatchesToRetain is how many of a producer's most recent batches are
	// kept for duplicate detection (Kafka's
	// ProducerStateEntry.NUM_BATCHES_TO_RETAIN). It matches the client's
	// limit of 5 requests in flight per connection with idempotence on.
	NumBatchesToRetain = 5

	// DefaultExpiration is the default of producer.id.expiration.ms (1 day).
	DefaultExpiration = 24 * time.Hour

	// noEpoch is Kafka's RecordBatch.NO_PRODUCER_EPOCH: the epoch of a
	// producer this partition has no state for.
	noEpoch int16 = -1
	// noSeq is Kafka's RecordBatch.NO_SEQUENCE.
	noSeq int32 = -1
)

// BatchInfo is what the partition knows about an incoming batch, read from
// its v2 header.
type BatchInfo struct {
	ProducerID    int64 // -1 (any negative value): no idempotence
	Epoch         int16
	FirstSeq      int32 // base sequence
	LastSeq       int32 // FirstSeq+NumRecords-1, wrapping past MaxInt32 to 0 (see LastSeq)
	NumRecords    int32
	Transactional bool
	Control       bool  // a COMMIT/ABORT marker; goes through ApplyMarker, never Check/Update
	MaxTimestamp  int64 // ms; the batch's max timestamp after any LogAppendTime rewrite
	// TxnV2 marks a transactional batch sent under transactions version 2
	// (Produce v12+, KIP-890 part 2), for which Kafka requires sequence 0
	// from a producer with no retained batches (KAFKA-18202).
	TxnV2 bool
}

// Entry is one appended batch remembered for duplicate detection. Offsets are
// the final, client-visible ones (BL-04), so the entry answers a retry even
// after the segment holding the batch is gone.
type Entry struct {
	FirstSeq, LastSeq       int32
	FirstOffset, LastOffset int64
	Timestamp               int64 // LogAppendTime in ms, or -1 for CreateTime topics
}

// Verdict is the outcome of Check.
type Verdict struct {
	// Err is nil to append; otherwise a kerr error to answer for this
	// partition, with nothing appended: OutOfOrderSequenceNumber,
	// InvalidProducerEpoch, InvalidTxnState or InvalidRecord. Kafka 4.x
	// returns neither DuplicateSequenceNumber nor UnknownProducerID to a
	// Produce, so Check does not either.
	Err error
	// Duplicate, when non-nil, is the retained batch this one repeats: do not
	// append; answer success with Duplicate.FirstOffset (and its timestamp).
	Duplicate *Entry
}

// ProducerInfo is one producer's state as DescribeProducers (KIP-664)
// reports it.
type ProducerInfo struct {
	ProducerID    int64
	Epoch         int16
	LastSequence  int32 // -1 when no batch is retained (e.g. after an epoch bump by a marker)
	LastTimestamp int64 // ms; max timestamp of the last batch, or the time of the last marker; -1 if none
	// CoordinatorEpoch is that of the last transaction coordinator that
	// wrote a marker for this producer, -1 if none.
	CoordinatorEpoch int32
	// CurrentTxnStartOffset is the first offset of the open transaction on
	// this partition, -1 if none.
	CurrentTxnStartOffset int64
}

// retained is a remembered batch. aborted marks a batch of a transaction
// that was later aborted: it still counts for sequence continuity but never
// answers a duplicate (BL-06).
type retained struct {
	Entry
	aborted bool
}

// producerState is one producer's state on this partition (Kafka's
// ProducerStateEntry).
type producerState struct {
	epoch         int16
	coordEpoch    int32
	lastTimestamp int64     // ms, as DescribeProducers reports it
	lastSeen      time.Time // broker clock at the last Update or marker; drives Expire
	txnFirst      int64     // first offset of the open transaction, -1 if none
	batches       []retained
}

func (p *producerState) lastSeq() int32 {
	if len(p.batches) == 0 {
		return noSeq
	}
	return p.batches[len(p.batches)-1].LastSeq
}

// setEpoch moves the producer to epoch and forgets its batches when the epoch
// changes (Kafka's ProducerStateEntry.maybeUpdateProducerEpoch): sequences
// restart at 0 under a new epoch, so old batches can never be duplicates.
func (p *producerState) setEpoch(epoch int16) {
	if p.epoch != epoch {
		p.epoch = epoch
		p.batches = p.batches[:0]
	}
}

// addBatch remembers e, dropping the oldest batch beyond NumBatchesToRetain
// (Kafka's ProducerStateEntry.addBatchMetadata).
func (p *producerState) addBatch(e Entry) {
	if len(p.batches) == NumBatchesToRetain {
		copy(p.batches, p.batches[1:])
		p.batches = p.batches[:NumBatchesToRetain-1]
	}
	p.batches = append(p.batches, retained{Entry: e})
}

// State holds every producer of one partition. It is not safe for concurrent
// use: the partition calls it under its own lock.
type State struct {
	expiration time.Duration
	endOffset  int64 // Kafka's mapEndOffset: log offset seen up to, exclusive
	producers  map[int64]*producerState
	// open holds the producers of producers whose transaction is open here
	// (txnFirst >= 0), as Kafka's ongoingTxns: the partition asks for the
	// first undecided offset after every append, and a scan of every
	// producer made that O(producers) per append (W6 with 1,000 producer
	// IDs: 19 % of the broker's CPU, issue 10). Changed only through
	// beginTxn and endTxn.
	open map[int64]*producerState
}

// NewState returns empty state for a partition whose producers expire after
// expiration of idleness (producer.id.expiration.ms); expiration <= 0 means
// DefaultExpiration.
func NewState(expiration time.Duration) *State {
	if expiration <= 0 {
		expiration = DefaultExpiration
	}
	return &State{expiration: expiration, producers: make(map[int64]*producerState), open: make(map[int64]*producerState)}
}

// beginTxn opens producerID's transaction on this partition at first.
func (s *State) beginTxn(producerID int64, p *producerState, first int64) {
	p.txnFirst = first
	s.open[producerID] = p
}

// endTxn closes producerID's transaction on this partition, if one is open.
func (s *State) endTxn(producerID int64, p *producerState) {
	p.txnFirst = -1
	delete(s.open, producerID)
}

// EndOffset returns the log offset this state has seen up to (exclusive).
func (s *State) EndOffset() int64 { return s.endOffset }

// AdvanceEndOffset raises the end offset to off if it is lower. The partition
// calls it after recovery with the log end offset, and when the log start
// offset moves past the end offset (Kafka's onLogStartOffsetIncremented), so
// that a partition that once held records never counts as never-written.
func (s *State) AdvanceEndOffset(off int64) {
	if off > s.endOffset {
		s.endOffset = off
	}
}

// Get returns the state of producerID on this partition.
func (s *State) Get(producerID int64) (ProducerInfo, bool) {
	p, ok := s.producers[producerID]
	if !ok {
		return ProducerInfo{}, false
	}
	return p.info(producerID), true
}

// All returns every producer with state on this partition, by producer ID.
func (s *State) All() []ProducerInfo {
	out := make([]ProducerInfo, 0, len(s.producers))
	for id, p := range s.producers {
		out = append(out, p.info(id))
	}
	slices.SortFunc(out, func(a, b ProducerInfo) int { return cmp.Compare(a.ProducerID, b.ProducerID) })
	return out
}

func (p *producerState) info(id int64) ProducerInfo {
	return ProducerInfo{
		ProducerID:            id,
		Epoch:                 p.epoch,
		LastSequence:          p.lastSeq(),
		LastTimestamp:         p.lastTimestamp,
		CoordinatorEpoch:      p.coordEpoch,
		CurrentTxnStartOffset: p.txnFirst,
	}
}

// OngoingTxnFirstOffsets maps each producer with an open transaction on this
// partition to the first offset of that transaction. The minimum is the
// first unstable offset, from which the partition derives the LSO.
func (s *State) OngoingTxnFirstOffsets() map[int64]int64 {
	out := make(map[int64]int64, len(s.open))
	for id, p := range s.open {
		out[id] = p.txnFirst
	}
	return out
}

// FirstUndecidedOffset returns the smallest first offset of any open
// transaction (Kafka's ProducerStateManager.firstUndecidedOffset). It costs
// O(open transactions), not O(producers).
func (s *State) FirstUndecidedOffset() (int64, bool) {
	first := int64(math.MaxInt64)
	for _, p := range s.open {
		first = min(first, p.txnFirst)
	}
	return first, first != math.MaxInt64
}

// Expire drops every producer with no open transaction that has been idle
// for at least the expiration, and returns how many it dropped.
//
// The >= comparison and the open-transaction exemption are Kafka's
// (ProducerStateManager.isProducerExpired). NB: Kafka measures idleness from
// the last batch's max timestamp, which is the client's clock on CreateTime
// topics; Kawa uses the broker clock at the last append or marker, so a
// client whose clock lags cannot get its state (and its duplicate
// protection) expired early.
func (s *State) Expire(now time.Time) int {
	n := 0
	for id, p := range s.producers {
		if p.txnFirst < 0 && now.Sub(p.lastSeen) >= s.expiration {
			delete(s.producers, id)
			n++
		}
	}
	return n
}
