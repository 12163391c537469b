package txn

import (
	"cmp"
	"maps"
	"slices"
)

// State is a transactional.id's transaction state. The values and names are
// Kafka's (TransactionState ids 0-7); the names are what DescribeTransactions
// and ListTransactions report and filter on (KIP-664).
type State int8

const (
	// Empty: a producer ID and epoch are assigned, no transaction is open.
	Empty State = iota
	// Ongoing: partitions or a group were added; the transaction is open.
	Ongoing
	// PrepareCommit: the commit decision is durable; markers are being written.
	PrepareCommit
	// PrepareAbort: the abort decision is durable; markers are being written.
	PrepareAbort
	// CompleteCommit: every COMMIT marker is written.
	CompleteCommit
	// CompleteAbort: every ABORT marker is written.
	CompleteAbort
	// Dead: the transactional.id expired and is being removed.
	Dead
	// PrepareEpochFence: the coordinator is bumping the epoch to fence the
	// current producer before aborting its transaction. Only ever a pending
	// state: the record written for it is PrepareAbort.
	PrepareEpochFence

	noState State = -1
)

var stateNames = [...]string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence"}

func (s State) String() string {
	if s < 0 || int(s) >= len(stateNames) {
		return "Unknown"
	}
	return stateNames[s]
}

// ParseState returns the state named s (Kafka's names), or false.
func ParseState(s string) (State, bool) {
	for i, n := range stateNames {
		if n == s {
			return State(i), true
		}
	}
	return noState, false
}

// validPrevious lists, per target state, the states a transition may start
// from (Kafka's TransactionState.validPreviousStates). A request asking for
// any other transition is answered INVALID_TXN_STATE.
var validPrevious = map[State][]State{
	Empty:          {Empty, CompleteCommit, CompleteAbort},
	Ongoing:        {Ongoing, Empty, CompleteCommit, CompleteAbort},
	PrepareCommit:  {Ongoing},
	PrepareAbort:   {Ongoing, Empty, CompleteCommit, CompleteAbort}, // the last three: TV2 abort of no transaction
	CompleteCommit: {PrepareCommit},
	CompleteAbort:  {PrepareAbort},
	Dead:           {Empty, CompleteCommit, CompleteAbort},
}

func canTransit(from, to State) bool { return slices.Contains(validPrevious[to], from) }

// TopicPartition names one partition of a transaction.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func compareTP(a, b TopicPartition) int {
	return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
}

// Metadata is one transactional.id's durable state: exactly what its last
// __transaction_state record holds (Kafka's TransactionMetadata, without the
// in-memory pending state).
type Metadata struct {
	ProducerID int64
	// PrevProducerID is the producer ID before the last rotation on epoch
	// exhaustion (-1 if none): a retry from it is recognised, anything else
	// from it is fenced.
	PrevProducerID int64
	// NextProducerID is set while a TV2 PrepareCommit/PrepareAbort exhausted
	// the epoch: the ID the transactional.id moves to on completion, -1
	// otherwise.
	NextProducerID int64
	// Epoch is the current producer epoch, -1 before the first
	// InitProducerId completed. It never exceeds MaxEpoch.
	Epoch int16
	// LastEpoch is the epoch a recognised previous holder had (KIP-360
	// retries and KIP-588 recovery after a timeout), -1 if none.
	LastEpoch int16
	TimeoutMs int32 // transaction.timeout.ms
	State     State
	// TxnVersion is the transaction version of the markers of the current
	// (or last) PrepareCommit/PrepareAbort: 2 when their epoch is bumped past
	// the data's (TV2 EndTxn, fences), 1 otherwise.
	TxnVersion int16
	// Fenced marks a PrepareAbort/CompleteAbort the coordinator started
	// itself (timeout or InitProducerId), so a TV2 EndTxn of the old epoch
	// is not mistaken for a retry of its own.
	Fenced     bool
	Partitions map[TopicPartition]struct{}
	Groups     map[string]struct{}
	StartMs    int64 // first AddPartitions/AddOffsets of the transaction, -1 if none
	UpdateMs   int64 // last transition
}

// clone returns m with its own partition and group sets.
func (m Metadata) clone() Metadata {
	m.Partitions = maps.Clone(m.Partitions)
	m.Groups = maps.Clone(m.Groups)
	if m.Partitions == nil {
		m.Partitions = map[TopicPartition]struct{}{}
	}
	if m.Groups == nil {
		m.Groups = map[string]struct{}{}
	}
	return m
}

// SortedPartitions returns the transaction's partitions in topic, partition order.
func (m Metadata) SortedPartitions() []TopicPartition {
	out := slices.Collect(maps.Keys(m.Partitions))
	slices.SortFunc(out, compareTP)
	return out
}

// SortedGroups returns the transaction's groups in order.
func (m Metadata) SortedGroups() []string {
	return slices.Sorted(maps.Keys(m.Groups))
}

// MaxEpoch is the largest producer epoch. Clients are never handed it: an
// epoch at or above MaxEpoch-1 is exhausted (Kafka's isEpochExhausted), so
// the coordinator can always bump once more to fence (KAFKA-5283).
const MaxEpoch int16 = 32767

func exhausted(epoch int16) bool { return epoch >= MaxEpoch-1 }

// bump returns epoch+1, never past MaxEpoch.
func bump(epoch int16) int16 {
	if epoch >= MaxEpoch {
		return MaxEpoch
	}
	return epoch + 1
}
