package batch

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Compress returns the uncompressed v2 batch b (exactly one batch, as Encode and EncodeRetained build) with its
// records section compressed by codec and the header's codec bits, Length and CRC set to match; every other
// header field is kept. The framings are the ones every Kafka client reads: gzip (RFC 1952), one raw snappy
// block (as franz-go and librdkafka write; Java's xerial reader accepts it), the LZ4 frame format, and a zstd
// frame (KIP-110). CodecNone and a batch without records return b itself, uncompressed (Kafka's empty batch has
// no records to compress). b must not be compressed already. Errors: an unknown codec, or a malformed b.
func Compress(b []byte, codec int8) ([]byte, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return nil, err
	}
	if h.Size() != len(b) {
		return nil, corruptf("batch length field says %d bytes, have %d", h.Size(), len(b))
	}
	if h.Codec() != CodecNone {
		return nil, fmt.Errorf("batch: compress: already compressed with codec %d", h.Codec())
	}
	if codec == CodecNone || h.NumRecords == 0 {
		return b, nil
	}
	out := make([]byte, HeaderSize, HeaderSize+len(b)/2)
	if out, err = compressTo(out, codec, b[HeaderSize:]); err != nil {
		return nil, err
	}
	h.Attributes = h.Attributes&^7 | int16(codec)
	h.Length = int32(len(out) - lengthOverhead)
	putHeader(out, h)
	binary.BigEndian.PutUint32(out[offCRC:], crc(out))
	return out, nil
}

// zstdEncoder is shared: EncodeAll is safe for concurrent use.
var zstdEncoder = sync.OnceValues(func() (*zstd.Encoder, error) {
	return zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
})

// compressTo appends src compressed with codec to dst.
func compressTo(dst []byte, codec int8, src []byte) ([]byte, error) {
	switch codec {
	case CodecGzip:
		buf := bytes.NewBuffer(dst)
		return stream(buf, gzip.NewWriter(buf), src)
	case CodecSnappy:
		n := snappy.MaxEncodedLen(len(src))
		at := len(dst)
		dst = append(dst, make([]byte, n)...)
		enc := snappy.Encode(dst[at:], src)
		return dst[:at+len(enc)], nil
	case CodecLz4:
		buf := bytes.NewBuffer(dst)
		return stream(buf, lz4.NewWriter(buf), src)
	case CodecZstd:
		enc, err := zstdEncoder()
		if err != nil {
			return nil, err
		}
		return enc.EncodeAll(src, dst), nil
	}
	return nil, fmt.Errorf("batch: compress: unknown codec %d", codec)
}

// stream writes src through zw, a compressing writer onto buf, closes it and returns buf's bytes.
func stream(buf *bytes.Buffer, zw io.WriteCloser, src []byte) ([]byte, error) {
	if _, err := zw.Write(src); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
