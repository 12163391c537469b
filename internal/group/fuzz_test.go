package group

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
	"time"
)

// FuzzReplay feeds one arbitrary __consumer_offsets record (key, value; a
// nil value is a tombstone) to replay, which Load runs on startup. Replay
// must not panic, must report an undecodable record as ErrCorrupt and accept
// every record that decodes; a decoded key re-encodes to the same bytes, and
// a decoded value re-encodes to bytes that decode to the same value.
func FuzzReplay(f *testing.F) {
	now := time.UnixMilli(1_700_000_000_000)
	tp := topicPartition{topic: "t", partition: 3}
	o := offset{offset: 42, leaderEpoch: 1, metadata: "m", commitTime: now, expireTime: now.Add(time.Hour)}
	f.Add(offsetKey("g", tp), encodeOffsetValue(o), false)
	f.Add(stagedKey("g", 7, tp), encodeStagedValue(2, o), false)
	f.Add(markerKey("g", 7), encodeMarkerValue(true), false)
	f.Add(groupKey("g"), encodeGroupValue(groupValue{protocolType: "consumer", generation: 3, stateSince: now, members: 1}), false)
	f.Add(offsetKey("g", tp), []byte(nil), true)
	inst, rx := "i", "t.*"
	tps := []cgTopicPartitions{{id: [16]byte{1}, partitions: []int32{0, 2}, epochs: []int32{3, 4}}}
	f.Add(cgKey(cgMetadataType, "g"), encodeEpochValue(7), false)
	f.Add(cgKey(cgMetadataType, "g"), encodeCGGroupValue(cgGroupValue{epoch: 7, metadataHash: -5}), false)
	f.Add(cgKey(cgRegexType, "g", "t.*"), encodeRegexValue(cgRegexValue{topics: []string{"t", "tt"}, version: 2, timestamp: 1_700_000_000_000}), false)
	f.Add(cgKey(cgPartitionMetadataType, "g"), encodePartitionMetadataValue([]cgTopicMeta{{id: [16]byte{1}, name: "t", partitions: 4}}), false)
	f.Add(cgKey(cgMemberMetadataType, "g", "m"), encodeMemberValue(cgMemberValue{instanceID: &inst, clientID: "c", host: "/h", names: []string{"t"}, regex: &rx, rebalanceTimeoutMs: 1}), false)
	f.Add(cgKey(cgTargetMetadataType, "g"), encodeEpochValue(7), false)
	f.Add(cgKey(cgTargetMemberType, "g", "m"), encodeTargetMemberValue(tps), false)
	f.Add(cgKey(cgCurrentAssignmentType, "g", "m"), encodeCurrentValue(cgCurrentValue{epoch: 7, prevEpoch: 6, state: 1, assigned: tps, revoking: tps}), false)
	f.Add(cgKey(cgCurrentAssignmentType, "g", "m"), []byte(nil), true)
	f.Fuzz(func(t *testing.T, key, value []byte, tombstone bool) {
		if tombstone {
			value = nil
		} else if value == nil {
			value = []byte{}
		}
		_, replayErr := replay([]Record{{Key: key, Value: value}}, now, func(id [16]byte) (string, bool) { return "t", id == [16]byte{1} })
		if replayErr != nil && !errors.Is(replayErr, ErrCorrupt) {
			t.Fatalf("replay error %v is not ErrCorrupt", replayErr)
		}
		k, err := decodeKey(key)
		if err != nil {
			if replayErr == nil {
				t.Fatalf("replay accepted a key decodeKey rejects: %v", err)
			}
			return
		}
		if got := encodeKey(k); !bytes.Equal(got, key) {
			t.Fatalf("key %x decodes to %+v, which encodes to %x", key, k, got)
		}
		if tombstone {
			if replayErr != nil {
				t.Fatalf("tombstone of a valid key: %v", replayErr)
			}
			return
		}
		err = valueRoundTrip(k.kind, value)
		if (err == nil) != (replayErr == nil) {
			t.Fatalf("value decode %v but replay %v", err, replayErr)
		}
		if err != nil && !errors.Is(err, ErrCorrupt) && !errors.Is(err, errRoundTrip) {
			t.Fatalf("value error %v is not ErrCorrupt", err)
		}
		if errors.Is(err, errRoundTrip) {
			t.Fatal(err)
		}
	})
}

var errRoundTrip = errors.New("re-encoded value decodes differently")

// valueRoundTrip decodes value as kind, re-encodes and decodes it again.
func valueRoundTrip(kind byte, value []byte) error {
	if isCGKind(kind) {
		v, err := decodeCGValue(kind, value)
		if err != nil {
			return err
		}
		var again []byte
		switch v := v.(type) {
		case int32:
			again = encodeEpochValue(v)
		case cgGroupValue:
			again = encodeCGGroupValue(v)
		case cgRegexValue:
			again = encodeRegexValue(v)
		case []cgTopicMeta:
			again = encodePartitionMetadataValue(v)
		case cgMemberValue:
			again = encodeMemberValue(v)
		case []cgTopicPartitions:
			again = encodeTargetMemberValue(v)
		case cgCurrentValue:
			again = encodeCurrentValue(v)
		}
		if v2, err := decodeCGValue(kind, again); err != nil || !reflect.DeepEqual(v2, v) {
			return errRoundTrip
		}
		return nil
	}
	switch kind {
	case kindOffset:
		o, err := decodeOffsetValue(value)
		if err != nil {
			return err
		}
		if o2, err := decodeOffsetValue(encodeOffsetValue(o)); err != nil || o2 != o {
			return errRoundTrip
		}
	case kindStaged:
		e, o, err := decodeStagedValue(value)
		if err != nil {
			return err
		}
		if e2, o2, err := decodeStagedValue(encodeStagedValue(e, o)); err != nil || e2 != e || o2 != o {
			return errRoundTrip
		}
	case kindMarker:
		c, err := decodeMarkerValue(value)
		if err != nil {
			return err
		}
		if !bytes.Equal(encodeMarkerValue(c), value) {
			return errRoundTrip
		}
	case kindGroupMetadata:
		v, err := decodeGroupMetadataValue(value)
		if err != nil {
			return err
		}
		v2, err := decodeGroupMetadataValue(v.AppendTo(nil))
		if err != nil || !reflect.DeepEqual(v2, v) {
			return errRoundTrip
		}
	case kindGroup:
		v, err := decodeGroupValue(value)
		if err != nil {
			return err
		}
		if v2, err := decodeGroupValue(encodeGroupValue(v)); err != nil || v2 != v {
			return errRoundTrip
		}
	}
	return nil
}

// encodeKey is the inverse of decodeKey.
func encodeKey(k decodedKey) []byte {
	if isCGKind(k.kind) {
		return cgKeyOf(k)
	}
	switch k.kind {
	case kindOffset:
		return offsetKey(k.group, k.tp)
	case kindStaged:
		return stagedKey(k.group, k.producerID, k.tp)
	case kindMarker:
		return markerKey(k.group, k.producerID)
	case kindGroupMetadata:
		return groupMetadataKey(k.group)
	}
	return groupKey(k.group)
}
