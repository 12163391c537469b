package txn

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

// FuzzDecodeRecord feeds arbitrary __transaction_state keys and values to
// the decoders Load uses. They must not panic and must report bad bytes as
// errCorrupt; a decoded key re-encodes to the same bytes, and a decoded
// value re-encodes to bytes that decode to the same Metadata (the encoding
// sorts partitions and groups, so the bytes themselves may differ) within
// the states and epochs the coordinator can hold.
func FuzzDecodeRecord(f *testing.F) {
	m := Metadata{
		ProducerID: 7, PrevProducerID: -1, NextProducerID: -1, Epoch: 3, LastEpoch: -1,
		TimeoutMs: 60000, State: Ongoing, TxnVersion: 2, StartMs: 100, UpdateMs: 200,
	}.clone()
	m.Partitions[TopicPartition{Topic: "t", Partition: 1}] = struct{}{}
	m.Groups["g"] = struct{}{}
	f.Add(encodeKey("tx"), encodeValue(m))
	m.State, m.Fenced = PrepareAbort, true
	f.Add(encodeKey(""), encodeValue(m))
	f.Add([]byte{0, 9}, []byte{0, 0})
	f.Fuzz(func(t *testing.T, key, value []byte) {
		if id, err := decodeKey(key); err == nil {
			if got := encodeKey(id); !bytes.Equal(got, key) {
				t.Fatalf("key %x decodes to %q, which encodes to %x", key, id, got)
			}
		} else if !errors.Is(err, errCorrupt) {
			t.Fatalf("key error %v is not errCorrupt", err)
		}
		m, err := decodeValue(value)
		if err != nil {
			if !errors.Is(err, errCorrupt) {
				t.Fatalf("value error %v is not errCorrupt", err)
			}
			return
		}
		if m.State < Empty || m.State > PrepareEpochFence || m.Epoch < -1 {
			t.Fatalf("accepted state %d epoch %d", m.State, m.Epoch)
		}
		m2, err := decodeValue(encodeValue(m))
		if err != nil || !reflect.DeepEqual(m2, m) {
			t.Fatalf("round trip of %+v: %+v, %v", m, m2, err)
		}
	})
}
