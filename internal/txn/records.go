package txn

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/kawa-broker/kawa/internal/recfmt"
)

// Record is one entry of the __transaction_state log: the key names the
// transactional.id, the value is its Metadata; Value nil is a tombstone
// (the transactional.id expired). The encoding is this package's own:
//
//	key   = u16 version (0) | str transactional.id
//	value = u16 version (0) | i64 producerID | i64 prevProducerID
//	        | i64 nextProducerID | i16 epoch | i16 lastEpoch | i32 timeoutMs
//	        | u8 state | u8 txnVersion | u8 flags (bit 0: fenced)
//	        | i64 startMs | i64 updateMs
//	        | u32 n | n × (str topic | i32 partition) | u32 m | m × str group
//
// str is a u16 length and the bytes; integers are big-endian. Readers accept
// version N and N-1; an unknown version is an error, never a guess.
type Record struct {
	Key, Value []byte
}

const (
	keyVersion   = 0
	valueVersion = 0
	flagFenced   = 1
)

// errCorrupt reports a record this version cannot read.
var errCorrupt = errors.New("txn: corrupt __transaction_state record")

func encodeKey(id string) []byte {
	return recfmt.AppendString(binary.BigEndian.AppendUint16(nil, keyVersion), id)
}

func encodeValue(m Metadata) []byte {
	b := binary.BigEndian.AppendUint16(make([]byte, 0, 64), valueVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(m.ProducerID))
	b = binary.BigEndian.AppendUint64(b, uint64(m.PrevProducerID))
	b = binary.BigEndian.AppendUint64(b, uint64(m.NextProducerID))
	b = binary.BigEndian.AppendUint16(b, uint16(m.Epoch))
	b = binary.BigEndian.AppendUint16(b, uint16(m.LastEpoch))
	b = binary.BigEndian.AppendUint32(b, uint32(m.TimeoutMs))
	var flags byte
	if m.Fenced {
		flags |= flagFenced
	}
	b = append(b, byte(m.State), byte(m.TxnVersion), flags)
	b = binary.BigEndian.AppendUint64(b, uint64(m.StartMs))
	b = binary.BigEndian.AppendUint64(b, uint64(m.UpdateMs))
	b = binary.BigEndian.AppendUint32(b, uint32(len(m.Partitions)))
	for _, tp := range m.SortedPartitions() {
		b = recfmt.AppendString(b, tp.Topic)
		b = binary.BigEndian.AppendUint32(b, uint32(tp.Partition))
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(m.Groups)))
	for _, g := range m.SortedGroups() {
		b = recfmt.AppendString(b, g)
	}
	return b
}

func decodeKey(b []byte) (string, error) {
	r := recfmt.NewReader(b)
	if v := r.U16(); v != keyVersion {
		return "", fmt.Errorf("%w: key version %d", errCorrupt, v)
	}
	id := r.Str()
	if r.Bad() || r.Len() != 0 {
		return "", fmt.Errorf("%w: key", errCorrupt)
	}
	return id, nil
}

func decodeValue(b []byte) (Metadata, error) {
	r := recfmt.NewReader(b)
	if v := r.U16(); v != valueVersion {
		return Metadata{}, fmt.Errorf("%w: value version %d", errCorrupt, v)
	}
	m := Metadata{
		ProducerID: int64(r.U64()), PrevProducerID: int64(r.U64()), NextProducerID: int64(r.U64()),
		Epoch: int16(r.U16()), LastEpoch: int16(r.U16()), TimeoutMs: int32(r.U32()),
	}
	m.State, m.TxnVersion = State(r.U8()), int16(r.U8())
	m.Fenced = r.U8()&flagFenced != 0
	m.StartMs, m.UpdateMs = int64(r.U64()), int64(r.U64())
	m = m.clone()
	n := r.U32()
	for i := uint32(0); i < n && !r.Bad(); i++ {
		tp := TopicPartition{Topic: r.Str()}
		tp.Partition = int32(r.U32())
		m.Partitions[tp] = struct{}{}
	}
	n = r.U32()
	for i := uint32(0); i < n && !r.Bad(); i++ {
		m.Groups[r.Str()] = struct{}{}
	}
	if r.Bad() || r.Len() != 0 {
		return Metadata{}, fmt.Errorf("%w: value", errCorrupt)
	}
	if m.State < Empty || m.State > PrepareEpochFence || m.Epoch < -1 {
		return Metadata{}, fmt.Errorf("%w: state %d epoch %d", errCorrupt, m.State, m.Epoch)
	}
	return m, nil
}
