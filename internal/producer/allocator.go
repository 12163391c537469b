package producer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"sync"

	"github.com/kawa-broker/kawa/internal/batch"
	"github.com/kawa-broker/kawa/internal/vfs"
)

// Allocator file layout, version 1 (big-endian):
//
//	magic [4]byte "KWPI", version uint16, crc uint32 (CRC-32C of next), next int64
//
// next is the first producer ID not yet reserved. Kafka's controller hands
// out producer IDs in blocks the same way (KIP-730, ProducerIdManager):
// a block is made durable before any ID in it is used, so a restart skips
// the unused rest of the last block instead of reusing it.
const (
	allocMagic   = "KWPI"
	allocVersion = 1
	allocLen     = 4 + 2 + 4 + 8
)

// ErrCorruptAllocator is returned (wrapped) by NewAllocator when the file
// fails its magic, version, length or CRC check. The broker must not start
// from 0 then, or producer IDs would be reused.
var ErrCorruptAllocator = errors.New("producer: corrupt producer ID file")

// Allocator hands out cluster-unique producer IDs in blocks whose end is
// persisted before any ID in the block is used, so IDs strictly increase and
// are never reused after a restart. It is safe for concurrent use.
type Allocator struct {
	mu        sync.Mutex
	fs        vfs.FS
	path      string
	blockSize int64
	next      int64 // next ID to hand out
	limit     int64 // first ID past the persisted block
}

// NewAllocator opens the allocator backed by the file at path in fsys (nil:
// vfs.OS), creating state that starts at ID 0 if the file does not exist.
// blockSize is how many IDs each persisted reservation covers (Kafka uses
// 1000).
func NewAllocator(fsys vfs.FS, path string, blockSize int64) (*Allocator, error) {
	if blockSize <= 0 {
		return nil, fmt.Errorf("producer: block size %d must be positive", blockSize)
	}
	if fsys == nil {
		fsys = vfs.OS
	}
	next, err := readAllocFile(fsys, path)
	if err != nil {
		return nil, err
	}
	return &Allocator{fs: fsys, path: path, blockSize: blockSize, next: next, limit: next}, nil
}

// Next returns a new producer ID. When the current block is used up it first
// persists the next block's end (vfs.WriteFileAtomic: write temp file, fsync,
// rename, fsync the directory); if that fails it returns the error and hands out nothing.
func (a *Allocator) Next() (int64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.next == a.limit {
		if a.next > math.MaxInt64-a.blockSize {
			return 0, errors.New("producer: producer IDs exhausted")
		}
		limit := a.next + a.blockSize
		if err := vfs.WriteFileAtomic(a.fs, a.path, encodeAlloc(limit)); err != nil {
			return 0, fmt.Errorf("producer: persist producer ID block: %w", err)
		}
		a.limit = limit
	}
	id := a.next
	a.next++
	return id, nil
}

func readAllocFile(fsys vfs.FS, path string) (int64, error) {
	b, err := vfs.ReadFile(fsys, path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("producer: read %s: %w", path, err)
	}
	if len(b) != allocLen || string(b[:4]) != allocMagic {
		return 0, fmt.Errorf("%w: %s: bad magic or length", ErrCorruptAllocator, path)
	}
	// Readers accept version N and N-1; 1 is the first version.
	if v := binary.BigEndian.Uint16(b[4:]); v != allocVersion {
		return 0, fmt.Errorf("%w: %s: unknown version %d", ErrCorruptAllocator, path, v)
	}
	if binary.BigEndian.Uint32(b[6:]) != batch.Checksum(b[10:]) {
		return 0, fmt.Errorf("%w: %s: crc mismatch", ErrCorruptAllocator, path)
	}
	next := int64(binary.BigEndian.Uint64(b[10:]))
	if next < 0 {
		return 0, fmt.Errorf("%w: %s: negative next ID %d", ErrCorruptAllocator, path, next)
	}
	return next, nil
}

func encodeAlloc(next int64) []byte {
	b := make([]byte, allocLen)
	copy(b, allocMagic)
	binary.BigEndian.PutUint16(b[4:], allocVersion)
	binary.BigEndian.PutUint64(b[10:], uint64(next))
	binary.BigEndian.PutUint32(b[6:], batch.Checksum(b[10:]))
	return b
}

// Issued reports whether id could have been handed out by this allocator
// (in this process or before a restart): 0 <= id < the next ID.
func (a *Allocator) Issued(id int64) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return id >= 0 && id < a.next
}
