package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// testRecords returns n records with distinct keys, values and one header.
func testRecords(n int) []kmsg.Record {
	recs := make([]kmsg.Record, n)
	for i := range recs {
		recs[i] = kmsg.NewRecord()
		recs[i].TimestampDelta64 = int64(i * 10)
		recs[i].Key = []byte{'k', byte('0' + i%10)}
		recs[i].Value = []byte("value-" + string(rune('a'+i%26)))
		recs[i].Headers = []kmsg.Header{{Key: "h", Value: []byte{byte(i)}}}
	}
	return recs
}

// testHeader is a producer's header as franz-go fills it for an idempotent batch.
func testHeader() Header {
	return Header{
		PartitionLeaderEpoch: -1,
		FirstTimestamp:       1_700_000_000_000,
		MaxTimestamp:         1_700_000_000_040,
		ProducerID:           7,
		ProducerEpoch:        2,
		BaseSequence:         100,
	}
}

// reseal rewrites the length field to match len(b) and recomputes the CRC,
// so a test can corrupt one thing and keep the rest valid.
func reseal(b []byte) []byte {
	binary.BigEndian.PutUint32(b[offLength:], uint32(len(b)-lengthOverhead))
	binary.BigEndian.PutUint32(b[offCRC:], crc(b))
	return b
}

// withRecordsSection returns a copy of batch b with its records replaced by
// data and codec bits set to codec, resealed.
func withRecordsSection(b []byte, codec int8, data []byte) []byte {
	out := append(append([]byte(nil), b[:HeaderSize]...), data...)
	attrs := binary.BigEndian.Uint16(out[offAttributes:])&^7 | uint16(codec)
	binary.BigEndian.PutUint16(out[offAttributes:], attrs)
	return reseal(out)
}

// wantKerr fails t unless err wraps want.
func wantKerr(t *testing.T, err error, want *kerr.Error) {
	t.Helper()
	var ke *kerr.Error
	if !errors.As(err, &ke) || ke != want {
		t.Fatalf("err = %v, want one wrapping %s", err, want.Message)
	}
}

// compressForTest compresses data with codec the way Kafka clients do; snappy
// here is one raw block (franz-go's one-shot path).
func compressForTest(t testing.TB, codec int8, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	var w io.WriteCloser
	switch codec {
	case CodecGzip:
		w = gzip.NewWriter(&buf)
	case CodecLz4:
		w = lz4.NewWriter(&buf)
	case CodecSnappy:
		return snappy.Encode(nil, data)
	case CodecZstd:
		enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
		if err != nil {
			t.Fatal(err)
		}
		defer enc.Close()
		return enc.EncodeAll(data, nil)
	default:
		t.Fatalf("no test compressor for codec %d", codec)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// xerialForTest frames data as the Java producer's snappy stream does:
// header, then blocks of at most chunk input bytes.
func xerialForTest(data []byte, chunk int) []byte {
	out := append([]byte(nil), xerialMagic...)
	out = binary.BigEndian.AppendUint32(out, 1)
	out = binary.BigEndian.AppendUint32(out, 1)
	for len(data) > 0 {
		n := min(chunk, len(data))
		block := snappy.Encode(nil, data[:n])
		out = binary.BigEndian.AppendUint32(out, uint32(len(block)))
		out = append(out, block...)
		data = data[n:]
	}
	return out
}
