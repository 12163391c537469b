package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Bounds on decompressed records. A batch may expand to decompressRatio times
// its size, but never less than decompressFloor (small batches of repetitive
// records compress very well) nor more than decompressCeiling. The bound keeps
// a small "zip bomb" batch from costing the broker more than a bounded amount
// of memory per request.
const (
	decompressRatio   = 64
	decompressFloor   = 1 << 20
	decompressCeiling = 256 << 20

	// zstdMaxWindow bounds the history a zstd frame may ask the decoder to
	// keep. Producers' windows are at most 8 MiB (zstd level 19 and below);
	// 64 MiB leaves room for higher levels on large batches.
	zstdMaxWindow = 64 << 20
)

// decompressLimit returns the most bytes the records of a batchSize-byte
// batch may decompress to.
func decompressLimit(batchSize int) int {
	return min(max(batchSize*decompressRatio, decompressFloor), decompressCeiling)
}

// decompress returns src decompressed with codec, or an error wrapping
// kerr.CorruptMessage when the codec is unknown, the data does not decode or
// it decodes to more than limit bytes.
func decompress(codec int8, src []byte, limit int) ([]byte, error) {
	var out []byte
	var err error
	switch codec {
	case CodecGzip:
		out, err = ungzip(src, limit)
	case CodecSnappy:
		out, err = unsnappy(src, limit)
	case CodecLz4:
		out, err = unlz4(src, limit)
	case CodecZstd:
		out, err = unzstd(src, limit)
	default:
		return nil, corruptf("unknown compression codec %d", codec)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: batch: decompress codec %d: %w", kerr.CorruptMessage, codec, err)
	}
	return out, nil
}

type tooLargeError int

func (e tooLargeError) Error() string {
	return "records decompress to more than " + strconv.Itoa(int(e)) + " bytes"
}

// readLimited reads r to EOF, failing once it yields more than limit bytes.
func readLimited(r io.Reader, limit int) ([]byte, error) {
	out, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
	if err != nil {
		return nil, err
	}
	if len(out) > limit {
		return nil, tooLargeError(limit)
	}
	return out, nil
}

// Decoders are pooled with the bytes.Reader they read from, which is emptied
// before the decoder goes back to the pool so that no batch stays reachable.
type (
	gzipDecoder struct {
		src bytes.Reader
		zr  gzip.Reader
	}
	lz4Decoder struct {
		src bytes.Reader
		zr  *lz4.Reader
	}
	zstdDecoder struct {
		src bytes.Reader
		zr  *zstd.Decoder
	}
)

var (
	gzipPool = sync.Pool{New: func() any { return new(gzipDecoder) }}
	lz4Pool  = sync.Pool{New: func() any { return &lz4Decoder{zr: lz4.NewReader(nil)} }}
	// zstd decoders are costly to build, hence the pool. With concurrency 1
	// a decoder runs no goroutines, so one the pool drops needs no Close.
	zstdPool sync.Pool // *zstdDecoder
)

func ungzip(src []byte, limit int) ([]byte, error) {
	d := gzipPool.Get().(*gzipDecoder)
	defer func() { d.src.Reset(nil); gzipPool.Put(d) }()
	d.src.Reset(src)
	if err := d.zr.Reset(&d.src); err != nil {
		return nil, err
	}
	return readLimited(&d.zr, limit)
}

func unlz4(src []byte, limit int) ([]byte, error) {
	d := lz4Pool.Get().(*lz4Decoder)
	defer func() { d.src.Reset(nil); lz4Pool.Put(d) }()
	d.src.Reset(src)
	d.zr.Reset(&d.src)
	return readLimited(d.zr, limit)
}

func unzstd(src []byte, limit int) ([]byte, error) {
	d, _ := zstdPool.Get().(*zstdDecoder)
	if d == nil {
		zr, err := zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxWindow(zstdMaxWindow))
		if err != nil {
			return nil, err
		}
		d = &zstdDecoder{zr: zr}
	}
	defer func() { d.src.Reset(nil); zstdPool.Put(d) }()
	d.src.Reset(src)
	// NB: a *bytes.Buffer would make Reset decode in one shot, bypassing the
	// streaming path that readLimited bounds; a *bytes.Reader does not.
	if err := d.zr.Reset(&d.src); err != nil {
		return nil, err
	}
	return readLimited(d.zr, limit)
}

// xerialMagic opens the xerial snappy-java stream the Java producer writes:
// the magic, then version and minimum compatible version (int32 each), then
// blocks of a big-endian int32 length and a raw snappy block.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

const xerialHeaderSize = 16

var errXerial = errors.New("malformed xerial snappy framing")

// unsnappy decodes either framing Kafka clients send: xerial (Java) or a
// single raw snappy block (franz-go's one-shot path, librdkafka).
func unsnappy(src []byte, limit int) ([]byte, error) {
	if len(src) >= xerialHeaderSize && bytes.HasPrefix(src, xerialMagic) {
		return unxerial(src[xerialHeaderSize:], limit)
	}
	return appendSnappyBlock(nil, src, limit)
}

func unxerial(src []byte, limit int) ([]byte, error) {
	var out []byte
	for len(src) > 0 {
		if len(src) < 4 {
			return nil, errXerial
		}
		n := binary.BigEndian.Uint32(src)
		src = src[4:]
		if uint64(n) > uint64(len(src)) {
			return nil, errXerial
		}
		var err error
		if out, err = appendSnappyBlock(out, src[:n], limit); err != nil {
			return nil, err
		}
		src = src[n:]
	}
	return out, nil
}

// appendSnappyBlock appends the decoded raw snappy block to dst, checking the
// block's declared length against limit before allocating for it.
func appendSnappyBlock(dst, block []byte, limit int) ([]byte, error) {
	n, err := snappy.DecodedLen(block)
	if err != nil {
		return nil, err
	}
	if n > limit-len(dst) {
		return nil, tooLargeError(limit)
	}
	dst = slices.Grow(dst, n)
	at := len(dst)
	// With room for exactly n bytes, Decode writes in place into dst.
	if _, err := snappy.Decode(dst[at:at+n:at+n], block); err != nil {
		return nil, err
	}
	return dst[:at+n], nil
}
