package txn

import (
	"encoding/binary"
	"errors"
	"fmt"
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

func appendStr(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

func encodeKey(id string) []byte {
	return appendStr(binary.BigEndian.AppendUint16(nil, keyVersion), id)
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
		b = appendStr(b, tp.Topic)
		b = binary.BigEndian.AppendUint32(b, uint32(tp.Partition))
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(m.Groups)))
	for _, g := range m.SortedGroups() {
		b = appendStr(b, g)
	}
	return b
}

// reader is a sticky bounds-checked decoder: after the first short read
// every read returns zeros and bad stays set.
type reader struct {
	b   []byte
	bad bool
}

func (r *reader) take(n int) []byte {
	if r.bad || n > len(r.b) {
		r.bad = true
		return make([]byte, n)
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) u8() byte    { return r.take(1)[0] }
func (r *reader) u16() uint16 { return binary.BigEndian.Uint16(r.take(2)) }
func (r *reader) u32() uint32 { return binary.BigEndian.Uint32(r.take(4)) }
func (r *reader) u64() uint64 { return binary.BigEndian.Uint64(r.take(8)) }
func (r *reader) str() string { return string(r.take(int(r.u16()))) }

func decodeKey(b []byte) (string, error) {
	r := &reader{b: b}
	if v := r.u16(); v != keyVersion {
		return "", fmt.Errorf("%w: key version %d", errCorrupt, v)
	}
	id := r.str()
	if r.bad || len(r.b) != 0 {
		return "", fmt.Errorf("%w: key", errCorrupt)
	}
	return id, nil
}

func decodeValue(b []byte) (Metadata, error) {
	r := &reader{b: b}
	if v := r.u16(); v != valueVersion {
		return Metadata{}, fmt.Errorf("%w: value version %d", errCorrupt, v)
	}
	m := Metadata{
		ProducerID: int64(r.u64()), PrevProducerID: int64(r.u64()), NextProducerID: int64(r.u64()),
		Epoch: int16(r.u16()), LastEpoch: int16(r.u16()), TimeoutMs: int32(r.u32()),
	}
	m.State, m.TxnVersion = State(r.u8()), int16(r.u8())
	m.Fenced = r.u8()&flagFenced != 0
	m.StartMs, m.UpdateMs = int64(r.u64()), int64(r.u64())
	m = m.clone()
	n := r.u32()
	for i := uint32(0); i < n && !r.bad; i++ {
		tp := TopicPartition{Topic: r.str()}
		tp.Partition = int32(r.u32())
		m.Partitions[tp] = struct{}{}
	}
	n = r.u32()
	for i := uint32(0); i < n && !r.bad; i++ {
		m.Groups[r.str()] = struct{}{}
	}
	if r.bad || len(r.b) != 0 {
		return Metadata{}, fmt.Errorf("%w: value", errCorrupt)
	}
	if m.State < Empty || m.State > PrepareEpochFence || m.Epoch < -1 {
		return Metadata{}, fmt.Errorf("%w: state %d epoch %d", errCorrupt, m.State, m.Epoch)
	}
	return m, nil
}
