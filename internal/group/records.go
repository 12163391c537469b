package group

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/kawa-broker/kawa/internal/recfmt"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Record layout in __consumer_offsets. Kafka's own layout is not required (issue 4), so the bytes are
// Kawa's, in the spirit of Kafka's versioned key/value schemas:
//
//	key   = int16 key version (1) | int8 kind | fields
//	        kind offset:  group, topic, partition int32
//	        kind group:   group
//	        kind staged:  group, producer ID int64, topic, partition int32
//	        kind marker:  group, producer ID int64
//	value = int16 value version (1) | fields
//	        offset: offset int64, leader epoch int32, metadata, commit ms int64, expire ms int64 (-1 none)
//	        group:  protocol type, generation int32, state-since ms int64, member count int32
//	        staged: producer epoch int16, then the offset fields
//	        marker: int8 1 commit / 0 abort (Kafka's transaction marker for the producer's staged offsets)
//
// Strings are a uint16 length and bytes (Kafka strings are int16-sized on the wire, so they fit).
// Integers are big-endian. An unknown version is an error, never a guess.
//
// Group metadata is Kafka's own record: key version 2 (GroupMetadataKey: int16 2 | group) and a
// GroupMetadataValue (v3: protocol type, generation, protocol, leader, state timestamp, members with
// their subscription and assignment), encoded by kmsg. It is written in two forms:
//   - after a generation change, without members: an Empty group (protocol null), or a group whose
//     members have joined but not yet got their assignment (protocol set). A restart brings either
//     back Empty at that generation, and members rejoin;
//   - once the leader's SyncGroup assignment is stored, with every member and its assignment (Kafka's
//     storeGroup). A restart brings it back Stable, and members carry on through heartbeats.
//
// The version-1 kind-group record (below) was written before; it is still read.
//
// KIP-848 consumer groups use Kafka's coordinator records, key versions (record types) 3-8: see
// consumer_records.go.
const (
	keyVersion   = 1
	valueVersion = 1

	kindOffset byte = 1
	kindGroup  byte = 2
	kindStaged byte = 3
	kindMarker byte = 4

	// groupMetadataKeyVersion is Kafka's GroupMetadataKey version. Its keys have no kind byte; decodeKey
	// reports them as kindGroupMetadata, which never appears on the wire.
	groupMetadataKeyVersion        = 2
	groupMetadataValueVersion      = 3
	kindGroupMetadata         byte = 0xff
)

// ErrCorrupt marks a record this package cannot decode.
var ErrCorrupt = errors.New("group: corrupt __consumer_offsets record")

func keyHeader(kind byte) []byte {
	return append(binary.BigEndian.AppendUint16(nil, keyVersion), kind)
}

func offsetKey(group string, tp topicPartition) []byte {
	b := recfmt.AppendString(keyHeader(kindOffset), group)
	b = recfmt.AppendString(b, tp.topic)
	return binary.BigEndian.AppendUint32(b, uint32(tp.partition))
}

func groupMetadataKey(group string) []byte {
	k := kmsg.NewGroupMetadataKey()
	k.Version, k.Group = groupMetadataKeyVersion, group
	return k.AppendTo(nil)
}

// groupMetadataValue is g's GroupMetadataValue. With assignments nil the members are left out (the
// generation-change form, see the layout above); otherwise every member is written with
// assignments[member ID]. stateSince is the group's CurrentStateTimestamp.
func groupMetadataValue(g *group, assignments map[string][]byte, stateSince time.Time) []byte {
	v := kmsg.NewGroupMetadataValue()
	v.Version = groupMetadataValueVersion
	v.ProtocolType, v.Generation, v.Protocol = g.protocolType, g.generation, strPtr(g.protocol)
	v.CurrentStateTimestamp = stateSince.UnixMilli()
	if assignments != nil {
		v.Leader = strPtr(g.leader)
		for _, m := range g.sortedMembers() {
			vm := kmsg.NewGroupMetadataValueMember()
			vm.MemberID, vm.InstanceID, vm.ClientID, vm.ClientHost = m.id, m.instanceID, m.clientID, m.clientHost
			vm.RebalanceTimeoutMillis = int32(m.rebalanceTimeout.Milliseconds())
			vm.SessionTimeoutMillis = int32(m.sessionTimeout.Milliseconds())
			vm.Subscription = m.metadata(g.protocol)
			vm.Assignment = assignments[m.id]
			v.Members = append(v.Members, vm)
		}
	}
	return v.AppendTo(nil)
}

func decodeGroupMetadataValue(b []byte) (kmsg.GroupMetadataValue, error) {
	var v kmsg.GroupMetadataValue
	if err := v.ReadFrom(b); err != nil {
		return v, fmt.Errorf("%w: group metadata value: %v", ErrCorrupt, err)
	}
	return v, nil
}

// groupKey is the version-1 group record's key, no longer written; removal still tombstones it.
func groupKey(group string) []byte {
	return recfmt.AppendString(keyHeader(kindGroup), group)
}

func stagedKey(group string, producerID int64, tp topicPartition) []byte {
	b := recfmt.AppendString(keyHeader(kindStaged), group)
	b = binary.BigEndian.AppendUint64(b, uint64(producerID))
	b = recfmt.AppendString(b, tp.topic)
	return binary.BigEndian.AppendUint32(b, uint32(tp.partition))
}

func markerKey(group string, producerID int64) []byte {
	b := recfmt.AppendString(keyHeader(kindMarker), group)
	return binary.BigEndian.AppendUint64(b, uint64(producerID))
}

func encodeMarkerValue(commit bool) []byte {
	b := binary.BigEndian.AppendUint16(nil, valueVersion)
	if commit {
		return append(b, 1)
	}
	return append(b, 0)
}

func decodeMarkerValue(b []byte) (commit bool, err error) {
	r, err := valueReader(b)
	if err != nil {
		return false, err
	}
	v := r.Take(1)[0]
	if !r.Done() || v > 1 {
		return false, fmt.Errorf("%w: marker value", ErrCorrupt)
	}
	return v == 1, nil
}

func appendOffsetFields(b []byte, o offset) []byte {
	b = binary.BigEndian.AppendUint64(b, uint64(o.offset))
	b = binary.BigEndian.AppendUint32(b, uint32(o.leaderEpoch))
	b = recfmt.AppendString(b, o.metadata)
	b = binary.BigEndian.AppendUint64(b, uint64(o.commitTime.UnixMilli()))
	expire := int64(-1)
	if !o.expireTime.IsZero() {
		expire = o.expireTime.UnixMilli()
	}
	return binary.BigEndian.AppendUint64(b, uint64(expire))
}

func encodeOffsetValue(o offset) []byte {
	return appendOffsetFields(binary.BigEndian.AppendUint16(nil, valueVersion), o)
}

func encodeStagedValue(epoch int16, o offset) []byte {
	b := binary.BigEndian.AppendUint16(nil, valueVersion)
	b = binary.BigEndian.AppendUint16(b, uint16(epoch))
	return appendOffsetFields(b, o)
}

// groupValue is what survives a restart of a group besides its offsets.
type groupValue struct {
	protocolType string
	generation   int32
	stateSince   time.Time
	members      int32 // members when written; >0 means the group was not Empty
}

func encodeGroupValue(v groupValue) []byte {
	b := binary.BigEndian.AppendUint16(nil, valueVersion)
	b = recfmt.AppendString(b, v.protocolType)
	b = binary.BigEndian.AppendUint32(b, uint32(v.generation))
	b = binary.BigEndian.AppendUint64(b, uint64(v.stateSince.UnixMilli()))
	return binary.BigEndian.AppendUint32(b, uint32(v.members))
}

// decodedKey is a parsed key; which fields are set depends on kind.
type decodedKey struct {
	kind       byte
	group      string
	producerID int64
	tp         topicPartition
	member     string // consumer-group member records (kindCGMember, kindCGTargetMember, kindCGCurrent)
	regex      string // consumer-group regular-expression records (kindCGRegex)
}

func decodeKey(b []byte) (decodedKey, error) {
	r := recfmt.NewReader(b)
	if v := r.U16(); v == groupMetadataKeyVersion {
		var k kmsg.GroupMetadataKey
		if err := k.ReadFrom(b); err != nil {
			return decodedKey{}, fmt.Errorf("%w: group metadata key: %v", ErrCorrupt, err)
		}
		// kmsg's ReadFrom ignores trailing bytes; a key with any is not one
		// this broker (or Kafka) wrote, and accepting it would let two byte
		// strings name one group.
		if !bytes.Equal(groupMetadataKey(k.Group), b) {
			return decodedKey{}, fmt.Errorf("%w: group metadata key length", ErrCorrupt)
		}
		return decodedKey{kind: kindGroupMetadata, group: k.Group}, nil
	} else if isCGType(v) && !r.Bad() {
		return decodeCGKey(int16(v), r)
	} else if v != keyVersion {
		return decodedKey{}, fmt.Errorf("%w: key version %d", ErrCorrupt, v)
	}
	k := decodedKey{kind: r.Take(1)[0], group: r.Str()}
	switch k.kind {
	case kindGroup:
	case kindOffset:
		k.tp.topic, k.tp.partition = r.Str(), int32(r.U32())
	case kindStaged:
		k.producerID = int64(r.U64())
		k.tp.topic, k.tp.partition = r.Str(), int32(r.U32())
	case kindMarker:
		k.producerID = int64(r.U64())
	default:
		return decodedKey{}, fmt.Errorf("%w: key kind %d", ErrCorrupt, k.kind)
	}
	if !r.Done() {
		return decodedKey{}, fmt.Errorf("%w: key length", ErrCorrupt)
	}
	return k, nil
}

func valueReader(b []byte) (*recfmt.Reader, error) {
	r := recfmt.NewReader(b)
	if v := r.U16(); v != valueVersion {
		return nil, fmt.Errorf("%w: value version %d", ErrCorrupt, v)
	}
	return r, nil
}

func readOffsetFields(r *recfmt.Reader) offset {
	o := offset{offset: int64(r.U64()), leaderEpoch: int32(r.U32()), metadata: r.Str()}
	o.commitTime = time.UnixMilli(int64(r.U64()))
	if exp := int64(r.U64()); exp >= 0 {
		o.expireTime = time.UnixMilli(exp)
	}
	return o
}

func decodeOffsetValue(b []byte) (offset, error) {
	r, err := valueReader(b)
	if err != nil {
		return offset{}, err
	}
	o := readOffsetFields(r)
	if !r.Done() {
		return offset{}, fmt.Errorf("%w: offset value length", ErrCorrupt)
	}
	return o, nil
}

func decodeStagedValue(b []byte) (int16, offset, error) {
	r, err := valueReader(b)
	if err != nil {
		return 0, offset{}, err
	}
	epoch := int16(r.U16())
	o := readOffsetFields(r)
	if !r.Done() {
		return 0, offset{}, fmt.Errorf("%w: staged value length", ErrCorrupt)
	}
	return epoch, o, nil
}

func decodeGroupValue(b []byte) (groupValue, error) {
	r, err := valueReader(b)
	if err != nil {
		return groupValue{}, err
	}
	v := groupValue{protocolType: r.Str(), generation: int32(r.U32())}
	v.stateSince = time.UnixMilli(int64(r.U64()))
	v.members = int32(r.U32())
	if !r.Done() {
		return groupValue{}, fmt.Errorf("%w: group value length", ErrCorrupt)
	}
	return v, nil
}
