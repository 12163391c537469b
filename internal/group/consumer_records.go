package group

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"

	"github.com/kawa-broker/kawa/internal/recfmt"
)

// KIP-848 consumer-group records in __consumer_offsets, byte for byte Kafka's coordinator records
// (group-coordinator/src/main/resources/common/message/ConsumerGroup*.json, Kafka 4.x):
//
//	key   = int16 record type | GroupId string [| MemberId string]    (non-flexible: int16-length strings)
//	value = int16 value version (0) | the value struct, flexible: compact strings and arrays, tagged fields
//
//	type 3 ConsumerGroupMetadata                 (group)          Epoch int32, tag 0 MetadataHash int64 (KIP-1101; tag 1
//	                                                              CreationTimeMs is not written, skipped on read)
//	type 4 ConsumerGroupPartitionMetadata        (group)          Topics [TopicId uuid, TopicName, NumPartitions int32, PartitionMetadata []]:
//	                                                              read only (logs of Kawa before the metadata hash), tombstoned on the
//	                                                              next write, as Kafka 4.1 does once it has the hash
//	type 5 ConsumerGroupMemberMetadata           (group, member)  InstanceId?, RackId?, ClientId, ClientHost, SubscribedTopicNames [],
//	                                                              SubscribedTopicRegex?, RebalanceTimeoutMs int32, ServerAssignor?
//	type 6 ConsumerGroupTargetAssignmentMetadata (group)          AssignmentEpoch int32
//	type 7 ConsumerGroupTargetAssignmentMember   (group, member)  TopicPartitions [TopicId uuid, Partitions []int32]
//	type 8 ConsumerGroupCurrentMemberAssignment  (group, member)  MemberEpoch, PreviousMemberEpoch int32, State int8,
//	                                                              AssignedPartitions [TopicId, Partitions, tag 0 AssignmentEpochs (KIP-1251)],
//	                                                              PartitionsPendingRevocation [same]
//	type 16 ConsumerGroupRegularExpression       (group, regex)   Topics [] string, Version int64, Timestamp int64: the topics a
//	                                                              subscription regex resolved to (KIP-848's server-side regexes)
//
// Each key holds one piece of state and the latest value per key is that state, so a compacted log
// replays to the same group; a tombstone (nil value) deletes the piece. Kafka's ordering is kept: a
// group's records are written together, in one Append, so replay never sees half a change.
// Unknown tagged fields are skipped, as Kafka's readers do.
const (
	cgMetadataType          = 3
	cgPartitionMetadataType = 4
	cgMemberMetadataType    = 5
	cgTargetMetadataType    = 6
	cgTargetMemberType      = 7
	cgCurrentAssignmentType = 8
	cgRegexType             = 16

	cgValueVersion = 0
)

// Kafka's MemberState values (modern/MemberState.java) in the current-assignment record.
const (
	memberStable               int8 = 0
	memberUnrevokedPartitions  int8 = 1
	memberUnreleasedPartitions int8 = 2
)

// decodeKey kinds of the consumer-group records: the record type with the high bit set, so they
// never clash with the kinds of Kawa's version-1 keys.
const (
	kindCGMetadata          byte = 0x80 | cgMetadataType
	kindCGPartitionMetadata byte = 0x80 | cgPartitionMetadataType
	kindCGMember            byte = 0x80 | cgMemberMetadataType
	kindCGTargetMetadata    byte = 0x80 | cgTargetMetadataType
	kindCGTargetMember      byte = 0x80 | cgTargetMemberType
	kindCGCurrent           byte = 0x80 | cgCurrentAssignmentType
	kindCGRegex             byte = 0x80 | cgRegexType
)

// cgKey is the key of record type typ for group (and, for the per-member types, member; for the
// regular-expression type, the regex).
func cgKey(typ int16, group string, member ...string) []byte {
	b := recfmt.AppendString(kbin.AppendInt16(nil, typ), group)
	for _, m := range member {
		b = recfmt.AppendString(b, m)
	}
	return b
}

// cgKeyOf re-encodes a decoded consumer-group key.
func cgKeyOf(k decodedKey) []byte {
	typ := int16(k.kind &^ 0x80)
	switch {
	case perMemberType(typ):
		return cgKey(typ, k.group, k.member)
	case typ == cgRegexType:
		return cgKey(typ, k.group, k.regex)
	}
	return cgKey(typ, k.group)
}

func perMemberType(typ int16) bool {
	return typ == cgMemberMetadataType || typ == cgTargetMemberType || typ == cgCurrentAssignmentType
}

// isCGType reports a consumer-group record type (the key's leading int16).
func isCGType(typ uint16) bool {
	return typ >= cgMetadataType && typ <= cgCurrentAssignmentType || typ == cgRegexType
}

// decodeCGKey decodes the rest of a key of record type typ (3-8, 16); r has read the type.
func decodeCGKey(typ int16, r *recfmt.Reader) (decodedKey, error) {
	k := decodedKey{kind: 0x80 | byte(typ), group: r.Str()}
	switch {
	case perMemberType(typ):
		k.member = r.Str()
	case typ == cgRegexType:
		k.regex = r.Str()
	}
	if !r.Done() {
		return decodedKey{}, fmt.Errorf("%w: consumer group key length", ErrCorrupt)
	}
	return k, nil
}

// cgTopicPartitions is one TopicPartitions entry: a topic by ID and its partitions; epochs, when
// not nil, is aligned with partitions (AssignmentEpochs, current assignment only).
type cgTopicPartitions struct {
	id         [16]byte
	name       string // in memory only (byTopicID), not in the record
	partitions []int32
	epochs     []int32
}

// cgTopicMeta is one ConsumerGroupPartitionMetadata topic.
type cgTopicMeta struct {
	id         [16]byte
	name       string
	partitions int32
}

// cgMemberValue is ConsumerGroupMemberMetadataValue v0.
type cgMemberValue struct {
	instanceID, rackID *string
	clientID, host     string
	names              []string
	regex              *string
	rebalanceTimeoutMs int32
	assignor           *string
}

// cgCurrentValue is ConsumerGroupCurrentMemberAssignmentValue v0.
type cgCurrentValue struct {
	epoch, prevEpoch   int32
	state              int8
	assigned, revoking []cgTopicPartitions
}

// cgGroupValue is ConsumerGroupMetadataValue v0.
type cgGroupValue struct {
	epoch        int32
	metadataHash int64 // tag 0; 0 (Kafka's default, not written) for no subscribed topics
}

// cgRegexValue is ConsumerGroupRegularExpressionValue v0.
type cgRegexValue struct {
	topics    []string // sorted
	version   int64
	timestamp int64 // ms
}

func cgValueHeader() []byte { return kbin.AppendInt16(nil, cgValueVersion) }

// noTags ends a flexible struct without tagged fields.
func noTags(b []byte) []byte { return kbin.AppendUvarint(b, 0) }

func encodeEpochValue(epoch int32) []byte {
	return noTags(kbin.AppendInt32(cgValueHeader(), epoch))
}

func encodeCGGroupValue(v cgGroupValue) []byte {
	b := kbin.AppendInt32(cgValueHeader(), v.epoch)
	if v.metadataHash == 0 {
		return noTags(b) // a tagged field at its default is left out, as Kafka's writers do
	}
	b = kbin.AppendUvarint(b, 1) // one tagged field:
	b = kbin.AppendUvarint(b, 0) // tag 0, MetadataHash
	b = kbin.AppendUvarint(b, 8)
	return kbin.AppendInt64(b, v.metadataHash)
}

func encodeRegexValue(v cgRegexValue) []byte {
	b := kbin.AppendCompactArrayLen(cgValueHeader(), len(v.topics))
	for _, t := range v.topics {
		b = kbin.AppendCompactString(b, t)
	}
	b = kbin.AppendInt64(b, v.version)
	b = kbin.AppendInt64(b, v.timestamp)
	return noTags(b)
}

func encodeMemberValue(v cgMemberValue) []byte {
	b := kbin.AppendCompactNullableString(cgValueHeader(), v.instanceID)
	b = kbin.AppendCompactNullableString(b, v.rackID)
	b = kbin.AppendCompactString(b, v.clientID)
	b = kbin.AppendCompactString(b, v.host)
	b = kbin.AppendCompactArrayLen(b, len(v.names))
	for _, n := range v.names {
		b = kbin.AppendCompactString(b, n)
	}
	b = kbin.AppendCompactNullableString(b, v.regex)
	b = kbin.AppendInt32(b, v.rebalanceTimeoutMs)
	b = kbin.AppendCompactNullableString(b, v.assignor)
	return noTags(b)
}

func appendTopicPartitions(b []byte, ts []cgTopicPartitions, withEpochs bool) []byte {
	b = kbin.AppendCompactArrayLen(b, len(ts))
	for _, t := range ts {
		b = kbin.AppendUuid(b, t.id)
		b = kbin.AppendCompactArrayLen(b, len(t.partitions))
		for _, p := range t.partitions {
			b = kbin.AppendInt32(b, p)
		}
		if !withEpochs || t.epochs == nil {
			b = noTags(b)
			continue
		}
		var tag []byte
		tag = kbin.AppendCompactNullableArrayLen(tag, len(t.epochs), false)
		for _, e := range t.epochs {
			tag = kbin.AppendInt32(tag, e)
		}
		b = kbin.AppendUvarint(b, 1) // one tagged field:
		b = kbin.AppendUvarint(b, 0) // tag 0, AssignmentEpochs
		b = kbin.AppendUvarint(b, uint32(len(tag)))
		b = append(b, tag...)
	}
	return b
}

func encodeTargetMemberValue(ts []cgTopicPartitions) []byte {
	return noTags(appendTopicPartitions(cgValueHeader(), ts, false))
}

func encodeCurrentValue(v cgCurrentValue) []byte {
	b := kbin.AppendInt32(cgValueHeader(), v.epoch)
	b = kbin.AppendInt32(b, v.prevEpoch)
	b = kbin.AppendInt8(b, v.state)
	b = appendTopicPartitions(b, v.assigned, true)
	b = appendTopicPartitions(b, v.revoking, true)
	return noTags(b)
}

// cgValueReader checks the value version and returns a reader positioned after it.
func cgValueReader(b []byte, what string) (*kbin.Reader, error) {
	r := &kbin.Reader{Src: b}
	if v := r.Int16(); !r.Ok() || v != cgValueVersion {
		return nil, fmt.Errorf("%w: %s value version %d", ErrCorrupt, what, v)
	}
	return r, nil
}

// skipTags skips a tagged-field section; each tag is handed to fn (may be nil) with its bytes.
func skipTags(r *kbin.Reader, fn func(tag uint32, data []byte)) {
	n := r.Uvarint()
	for i := uint32(0); i < n && r.Ok(); i++ {
		tag, size := r.Uvarint(), r.Uvarint()
		data := r.Span(int(size))
		if fn != nil && r.Ok() {
			fn(tag, data)
		}
	}
}

// cgValueDone reports a value that did not decode whole.
func cgValueDone(r *kbin.Reader, what string) error {
	if r.Complete() != nil || len(r.Src) != 0 {
		return fmt.Errorf("%w: %s value", ErrCorrupt, what)
	}
	return nil
}

// compactLen reads the length of a non-nullable compact array; kbin marks the reader bad for a
// length longer than the bytes left (every element is at least one byte), and so does null here.
func compactLen(r *kbin.Reader) int {
	n := int(r.CompactArrayLen())
	if n < 0 {
		r.Span(-1) // sets the reader bad
		return 0
	}
	return n
}

func decodeEpochValue(b []byte, what string) (int32, error) {
	r, err := cgValueReader(b, what)
	if err != nil {
		return 0, err
	}
	e := r.Int32()
	skipTags(r, nil)
	return e, cgValueDone(r, what)
}

func decodeCGGroupValue(b []byte) (cgGroupValue, error) {
	const what = "consumer group metadata"
	r, err := cgValueReader(b, what)
	if err != nil {
		return cgGroupValue{}, err
	}
	v := cgGroupValue{epoch: r.Int32()}
	skipTags(r, func(tag uint32, data []byte) {
		if tag != 0 {
			return // tag 1 CreationTimeMs (KIP-1282): not kept
		}
		if len(data) != 8 {
			r.Span(len(r.Src) + 1) // a MetadataHash that is not an int64: the value is corrupt
			return
		}
		v.metadataHash = int64(binary.BigEndian.Uint64(data))
	})
	return v, cgValueDone(r, what)
}

func decodeRegexValue(b []byte) (cgRegexValue, error) {
	const what = "consumer group regular expression"
	r, err := cgValueReader(b, what)
	if err != nil {
		return cgRegexValue{}, err
	}
	v := cgRegexValue{topics: []string{}}
	for n := compactLen(r); n > 0 && r.Ok(); n-- {
		v.topics = append(v.topics, r.CompactString())
	}
	v.version, v.timestamp = r.Int64(), r.Int64()
	skipTags(r, nil)
	return v, cgValueDone(r, what)
}

func decodePartitionMetadataValue(b []byte) ([]cgTopicMeta, error) {
	const what = "consumer group partition metadata"
	r, err := cgValueReader(b, what)
	if err != nil {
		return nil, err
	}
	var out []cgTopicMeta
	for n := compactLen(r); n > 0 && r.Ok(); n-- {
		t := cgTopicMeta{id: r.Uuid(), name: r.CompactString(), partitions: r.Int32()}
		for np := compactLen(r); np > 0 && r.Ok(); np-- { // PartitionMetadata: skipped
			r.Int32()
			for nr := compactLen(r); nr > 0 && r.Ok(); nr-- {
				r.CompactString()
			}
			skipTags(r, nil)
		}
		skipTags(r, nil)
		out = append(out, t)
	}
	skipTags(r, nil)
	return out, cgValueDone(r, what)
}

func decodeMemberValue(b []byte) (cgMemberValue, error) {
	const what = "consumer group member metadata"
	r, err := cgValueReader(b, what)
	if err != nil {
		return cgMemberValue{}, err
	}
	v := cgMemberValue{instanceID: r.CompactNullableString(), rackID: r.CompactNullableString()}
	v.clientID, v.host = r.CompactString(), r.CompactString()
	v.names = []string{}
	for n := compactLen(r); n > 0 && r.Ok(); n-- {
		v.names = append(v.names, r.CompactString())
	}
	v.regex = r.CompactNullableString()
	v.rebalanceTimeoutMs = r.Int32()
	v.assignor = r.CompactNullableString()
	skipTags(r, nil) // tag 0 ClassicMemberMetadata: Kawa's consumer groups have no classic members
	return v, cgValueDone(r, what)
}

// readTopicPartitions reads a TopicPartitions array; with epochs, tag 0 is AssignmentEpochs (the
// current-assignment form), else every tag is unknown and skipped.
func readTopicPartitions(r *kbin.Reader, withEpochs bool) []cgTopicPartitions {
	var out []cgTopicPartitions
	for n := compactLen(r); n > 0 && r.Ok(); n-- {
		t := cgTopicPartitions{id: r.Uuid()}
		for np := compactLen(r); np > 0 && r.Ok(); np-- {
			t.partitions = append(t.partitions, r.Int32())
		}
		skipTags(r, func(tag uint32, data []byte) {
			if tag != 0 || !withEpochs {
				return
			}
			tr := &kbin.Reader{Src: data}
			ne := int(tr.CompactArrayLen())
			if ne < 0 {
				return
			}
			t.epochs = []int32{}
			for ; ne > 0 && tr.Ok(); ne-- {
				t.epochs = append(t.epochs, tr.Int32())
			}
			if tr.Complete() != nil || len(tr.Src) != 0 || len(t.epochs) != len(t.partitions) {
				r.Span(len(r.Src) + 1) // a torn or misaligned AssignmentEpochs: the value is corrupt
			}
		})
		if t.partitions == nil {
			t.partitions = []int32{}
		}
		out = append(out, t)
	}
	return out
}

func decodeTargetMemberValue(b []byte) ([]cgTopicPartitions, error) {
	const what = "consumer group target assignment member"
	r, err := cgValueReader(b, what)
	if err != nil {
		return nil, err
	}
	ts := readTopicPartitions(r, false)
	skipTags(r, nil)
	return ts, cgValueDone(r, what)
}

func decodeCurrentValue(b []byte) (cgCurrentValue, error) {
	const what = "consumer group current member assignment"
	r, err := cgValueReader(b, what)
	if err != nil {
		return cgCurrentValue{}, err
	}
	v := cgCurrentValue{epoch: r.Int32(), prevEpoch: r.Int32(), state: r.Int8()}
	v.assigned = readTopicPartitions(r, true)
	v.revoking = readTopicPartitions(r, true)
	skipTags(r, nil)
	return v, cgValueDone(r, what)
}

// decodeCGValue decodes a consumer-group value of kind into its Go form (for replay and tests).
func decodeCGValue(kind byte, b []byte) (any, error) {
	switch kind {
	case kindCGMetadata:
		return decodeCGGroupValue(b)
	case kindCGRegex:
		return decodeRegexValue(b)
	case kindCGTargetMetadata:
		return decodeEpochValue(b, "consumer group target assignment metadata")
	case kindCGPartitionMetadata:
		return decodePartitionMetadataValue(b)
	case kindCGMember:
		return decodeMemberValue(b)
	case kindCGTargetMember:
		return decodeTargetMemberValue(b)
	case kindCGCurrent:
		return decodeCurrentValue(b)
	}
	return nil, fmt.Errorf("%w: kind %d", ErrCorrupt, kind)
}

// isCGKind reports a consumer-group record kind.
func isCGKind(kind byte) bool { return kind&0x80 != 0 && isCGType(uint16(kind&^0x80)) }

// sameBytes is bytes.Equal that tells a nil (tombstone, or never written) from an empty value.
func sameBytes(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }
