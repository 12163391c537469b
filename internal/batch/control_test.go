package batch

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestNewControlRoundTrip(t *testing.T) {
	t.Parallel()
	for _, commit := range []bool{true, false} {
		b := NewControl(9, 3, commit, 17, 1_700_000_000_123)
		h, err := Validate(b)
		if err != nil {
			t.Fatal(err)
		}
		want := Header{
			Length: h.Length, CRC: h.CRC, // checked by Validate
			PartitionLeaderEpoch: -1, Magic: 2, Attributes: attrTransactional | attrControl,
			FirstTimestamp: 1_700_000_000_123, MaxTimestamp: 1_700_000_000_123,
			ProducerID: 9, ProducerEpoch: 3, BaseSequence: -1, NumRecords: 1,
		}
		if h != want {
			t.Fatalf("header %+v\nwant   %+v", h, want)
		}
		gotCommit, epoch, err := ParseControl(b)
		if err != nil || gotCommit != commit || epoch != 17 {
			t.Fatalf("ParseControl = %v, %d, %v; want %v, 17", gotCommit, epoch, err, commit)
		}
		recs, _ := Records(b)
		// Key: version 0, type; value: version 0, coordinator epoch 17.
		wantKey := []byte{0, 0, 0, 0}
		if commit {
			wantKey[3] = 1
		}
		if string(recs[0].Key) != string(wantKey) || string(recs[0].Value) != "\x00\x00\x00\x00\x00\x11" {
			t.Fatalf("control record key %x value %x", recs[0].Key, recs[0].Value)
		}
	}
}

// controlWith builds a control batch holding one record with key and value.
func controlWith(key, value []byte) []byte {
	rec := kmsg.NewRecord()
	rec.Key, rec.Value = key, value
	return Encode(Header{Attributes: attrTransactional | attrControl, BaseSequence: -1}, []kmsg.Record{rec})
}

func TestParseControlErrors(t *testing.T) {
	t.Parallel()
	marker := []byte{0, 0, 0, 0, 0, 5}
	for _, tc := range []struct {
		name string
		b    []byte
		want *kerr.Error
	}{
		{"short", make([]byte, 10), kerr.CorruptMessage},
		{"data batch", Encode(testHeader(), testRecords(1)), kerr.InvalidRecord},
		{"no records", Encode(Header{Attributes: attrControl}, nil), kerr.InvalidRecord},
		{"null key", controlWith(nil, marker), kerr.InvalidRecord},
		{"short key", controlWith([]byte{0, 0, 0}, marker), kerr.InvalidRecord},
		{"negative key version", controlWith([]byte{0xff, 0xff, 0, 1}, marker), kerr.InvalidRecord},
		{"kraft control type", controlWith([]byte{0, 0, 0, 2}, marker), kerr.InvalidRecord},
		{"short value", controlWith([]byte{0, 0, 0, 1}, []byte{0, 0, 0}), kerr.InvalidRecord},
		{"negative value version", controlWith([]byte{0, 0, 0, 1}, []byte{0x80, 0, 0, 0, 0, 5}), kerr.InvalidRecord},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := ParseControl(tc.b)
			wantKerr(t, err, tc.want)
		})
	}
	// A newer key or value version is read by its version 0 prefix.
	commit, epoch, err := ParseControl(controlWith([]byte{0, 1, 0, 1, 9}, []byte{0, 1, 0, 0, 0, 5, 9}))
	if err != nil || !commit || epoch != 5 {
		t.Fatalf("newer versions: %v, %d, %v", commit, epoch, err)
	}
}
