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
	return Recompress(h, b[HeaderSize:], codec, DefaultLevel(codec))
}

// DefaultLevel is Kafka's default compression level of codec (KIP-390: gzip -1, the codec's own
// default; lz4 9; zstd 3); 0 for snappy and none, which have no levels.
func DefaultLevel(codec int8) int {
	switch codec {
	case CodecGzip:
		return -1
	case CodecLz4:
		return 9
	case CodecZstd:
		return 3
	}
	return 0
}

// Recompress builds a v2 batch from h and records, the decompressed records section of a batch
// (ValidateRecords returns it), compressed with codec at level (KIP-390's compression.gzip.level
// -1 or 1-9, compression.lz4.level 1-17, compression.zstd.level -131072-22; snappy and none take none).
// Every header field of h is kept (base offset, producer ID, epoch and base sequence, timestamps,
// transactional, control and timestamp-type bits, LastOffsetDelta, NumRecords) except the codec bits,
// Length and CRC, which are set to match: Kafka's LogValidator rebuilds a batch the same way when a
// topic's compression.type differs from the producer's codec. CodecNone stores the records uncompressed.
// Levels map onto the libraries' own: gzip's as is; lz4 9 is pierrec/lz4's default (fast), other lz4
// levels its high-compression levels 1-9 (10-17 use 9); zstd's through klauspost's
// EncoderLevelFromZstd. Errors: an unknown codec.
func Recompress(h Header, records []byte, codec int8, level int) ([]byte, error) {
	out := make([]byte, HeaderSize, HeaderSize+len(records)/2)
	var err error
	if codec == CodecNone {
		out = append(out, records...)
	} else if out, err = compressTo(out, codec, level, records); err != nil {
		return nil, err
	}
	h.Magic = magicV2
	h.Attributes = h.Attributes&^7 | int16(codec)
	h.Length = int32(len(out) - lengthOverhead)
	putHeader(out, h)
	binary.BigEndian.PutUint32(out[offCRC:], crc(out))
	return out, nil
}

// zstdEncoders are shared, one per klauspost encoder level: EncodeAll is safe for concurrent use, and
// with nil output an encoder starts no goroutines.
var zstdEncoders struct {
	mu  sync.Mutex
	enc map[zstd.EncoderLevel]*zstd.Encoder
}

func zstdEncoder(level int) (*zstd.Encoder, error) {
	l := zstd.EncoderLevelFromZstd(level)
	zstdEncoders.mu.Lock()
	defer zstdEncoders.mu.Unlock()
	if e := zstdEncoders.enc[l]; e != nil {
		return e, nil
	}
	e, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(l))
	if err != nil {
		return nil, err
	}
	if zstdEncoders.enc == nil {
		zstdEncoders.enc = map[zstd.EncoderLevel]*zstd.Encoder{}
	}
	zstdEncoders.enc[l] = e
	return e, nil
}

// lz4Level maps a Kafka lz4 level onto pierrec/lz4's (see Recompress).
func lz4Level(level int) lz4.CompressionLevel {
	if level == 9 || level < 1 {
		return lz4.Fast
	}
	return lz4.CompressionLevel(1 << (8 + min(level, 9))) // Level1 is 1<<9 (iota 1 in its const block)
}

// compressTo appends src compressed with codec at level to dst.
func compressTo(dst []byte, codec int8, level int, src []byte) ([]byte, error) {
	switch codec {
	case CodecGzip:
		buf := bytes.NewBuffer(dst)
		zw, err := gzip.NewWriterLevel(buf, level)
		if err != nil {
			return nil, err
		}
		return stream(buf, zw, src)
	case CodecSnappy:
		n := snappy.MaxEncodedLen(len(src))
		at := len(dst)
		dst = append(dst, make([]byte, n)...)
		enc := snappy.Encode(dst[at:], src)
		return dst[:at+len(enc)], nil
	case CodecLz4:
		buf := bytes.NewBuffer(dst)
		zw := lz4.NewWriter(buf)
		if err := zw.Apply(lz4.CompressionLevelOption(lz4Level(level))); err != nil {
			return nil, err
		}
		return stream(buf, zw, src)
	case CodecZstd:
		enc, err := zstdEncoder(level)
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
