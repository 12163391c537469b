package batch

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Control record types that end a transaction (protocol guide "Control
// Batches"); other types (KRaft's) are not markers.
const (
	controlAbort  kmsg.ControlRecordKeyType = 0
	controlCommit kmsg.ControlRecordKeyType = 1
)

// NewControl builds the transaction marker a partition leader writes when a
// transaction ends (KIP-98): an uncompressed batch with attributes
// transactional|control, BaseOffset 0 (the log assigns it),
// PartitionLeaderEpoch -1 (Kawa has no leader epochs yet),
// BaseSequence -1, both timestamps ts (ms) and one record whose key is the
// control record key (version 0, type 1 COMMIT or 0 ABORT) and whose value is
// the end transaction marker (version 0, coordinatorEpoch).
func NewControl(producerID int64, epoch int16, commit bool, coordinatorEpoch int32, ts int64) []byte {
	key := kmsg.ControlRecordKey{Version: 0, Type: controlAbort}
	if commit {
		key.Type = controlCommit
	}
	value := kmsg.EndTxnMarker{Version: 0, CoordinatorEpoch: coordinatorEpoch}
	rec := kmsg.NewRecord()
	rec.Key = key.AppendTo(nil)
	rec.Value = value.AppendTo(nil)
	return Encode(Header{
		PartitionLeaderEpoch: -1,
		Attributes:           attrTransactional | attrControl,
		FirstTimestamp:       ts,
		MaxTimestamp:         ts,
		ProducerID:           producerID,
		ProducerEpoch:        epoch,
		BaseSequence:         -1,
	}, []kmsg.Record{rec})
}

// ParseControl decodes the transaction marker in control batch b (exactly one
// batch; the CRC is not checked). It returns whether the marker commits and
// the coordinator epoch that wrote it. A batch without the control bit, with
// no records, with a negative key or value version, or whose control type is
// neither ABORT nor COMMIT is an error wrapping kerr.InvalidRecord; framing
// errors are those of Records. Like Kafka, newer key and value versions are
// read by their version 0 prefix.
func ParseControl(b []byte) (commit bool, coordinatorEpoch int32, err error) {
	h, err := ParseHeader(b)
	if err != nil {
		return false, 0, err
	}
	if !h.Control() {
		return false, 0, invalidf("not a control batch (attributes %#x)", h.Attributes)
	}
	recs, err := Records(b)
	if err != nil {
		return false, 0, err
	}
	if len(recs) == 0 {
		return false, 0, invalidf("control batch without records")
	}
	var key kmsg.ControlRecordKey
	if err := key.ReadFrom(recs[0].Key); err != nil || key.Version < 0 {
		return false, 0, invalidf("bad control record key %x", recs[0].Key)
	}
	if key.Type != controlAbort && key.Type != controlCommit {
		return false, 0, invalidf("control record type %d is not a transaction marker", key.Type)
	}
	var value kmsg.EndTxnMarker
	if err := value.ReadFrom(recs[0].Value); err != nil || value.Version < 0 {
		return false, 0, invalidf("bad end transaction marker %x", recs[0].Value)
	}
	return key.Type == controlCommit, value.CoordinatorEpoch, nil
}
