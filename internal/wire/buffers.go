package wire

import (
	"math/bits"
	"sync"
)

// Response bytes (record batches read from the log for a Fetch, encoded
// response frames) are large and short-lived: under a catch-up read, fresh
// buffers cost a memclr of every byte plus most of the broker's GC (W7
// profile, issue 10). These pools hand them out again instead. sync.Pool drops
// what stays unused across two GCs, so an idle broker holds none of them.
const (
	minBufferShift = 12 // 4 KiB: smaller buffers are cheap to allocate
	maxBufferShift = 24 // 16 MiB: larger ones are allocated and dropped
)

var bufferPools [maxBufferShift - minBufferShift + 1]sync.Pool

// bufferClass returns the pool index for capacity 1<<(class+minBufferShift)
// that fits n bytes, and false when n is above the largest class.
func bufferClass(n int) (int, bool) {
	if n <= 1<<minBufferShift {
		return 0, true
	}
	shift := bits.Len(uint(n - 1)) // smallest power of two >= n
	if shift > maxBufferShift {
		return 0, false
	}
	return shift - minBufferShift, true
}

// GetBuffer returns a slice of length n whose contents are NOT zeroed (the
// caller overwrites all of it), with capacity rounded up to a power of two
// (at least 4 KiB). n above 16 MiB is a plain allocation. Give it back with
// PutBuffer once nothing refers to it.
func GetBuffer(n int) []byte {
	c, ok := bufferClass(n)
	if !ok {
		return make([]byte, n)
	}
	if p, _ := bufferPools[c].Get().(*[]byte); p != nil {
		return (*p)[:n]
	}
	return make([]byte, n, 1<<(c+minBufferShift))
}

// PutBuffer gives b back to GetBuffer's pools. b must not be used afterwards
// by the caller or anything it handed b to. Buffers whose capacity is not one
// of the pools' sizes (from make or append growth) are filed under the largest
// class they can serve.
func PutBuffer(b []byte) {
	c := cap(b)
	if c < 1<<minBufferShift || c > 1<<maxBufferShift {
		return
	}
	class := bits.Len(uint(c)) - 1 - minBufferShift // largest power of two <= cap
	b = b[: 0 : 1<<(class+minBufferShift)]
	bufferPools[class].Put(&b)
}
