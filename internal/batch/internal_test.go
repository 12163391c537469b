package batch

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestInternalBatch: an internal batch has a valid CRC, passes CheckRaft, takes no offset (its last offset is
// base-1) and fails Check, so a Kafka log never accepts one; a Kafka batch carrying bit 14 fails CheckRaft.
func TestInternalBatch(t *testing.T) {
	b := NewInternal(7, []byte("payload"))
	SetBaseOffset(b, 42)
	h, err := ParseHeader(b)
	if err != nil || CheckCRC(b) != nil {
		t.Fatalf("ParseHeader %v, CheckCRC %v", err, CheckCRC(b))
	}
	if !h.Internal() || h.CheckRaft() != nil || h.Check() == nil {
		t.Fatalf("Internal %v, CheckRaft %v, Check %v", h.Internal(), h.CheckRaft(), h.Check())
	}
	if h.PartitionLeaderEpoch != 7 || h.LastOffset() != 41 || !bytes.Equal(b[HeaderSize:], []byte("payload")) {
		t.Fatalf("epoch %d last offset %d payload %q", h.PartitionLeaderEpoch, h.LastOffset(), b[HeaderSize:])
	}
	SetPartitionLeaderEpoch(b, 9)
	if h, _ := ParseHeader(b); h.PartitionLeaderEpoch != 9 || CheckCRC(b) != nil {
		t.Fatalf("after SetPartitionLeaderEpoch: epoch %d, CRC %v", h.PartitionLeaderEpoch, CheckCRC(b))
	}
	rec := kmsg.NewRecord()
	rec.Value = []byte("v")
	data := Encode(Header{Attributes: attrInternal, BaseSequence: -1, ProducerID: -1, ProducerEpoch: -1}, []kmsg.Record{rec})
	if h, _ := ParseHeader(data); h.Check() != nil || h.CheckRaft() == nil {
		t.Fatalf("a Kafka batch with bit 14: Check %v, CheckRaft %v; want nil and an error", h.Check(), h.CheckRaft())
	}
	if h, _ := ParseHeader(Encode(Header{BaseSequence: -1}, []kmsg.Record{rec})); h.CheckRaft() != nil {
		t.Fatalf("CheckRaft of a plain Kafka batch: %v", h.CheckRaft())
	}
}
