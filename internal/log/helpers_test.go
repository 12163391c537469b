package log

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"slices"
	"sync"
	"testing"

	"github.com/kawa-broker/kawa/internal/batch"
	"github.com/kawa-broker/kawa/internal/vfs"
)

// mkBatch builds a valid v2 batch header with CRC over a payload of n bytes filled with fill. The log never
// decodes records, so the payload does not need to be records.
func mkBatch(lastDelta int32, maxTs int64, n int, fill byte) []byte {
	b := make([]byte, batch.HeaderSize+n)
	binary.BigEndian.PutUint32(b[8:12], uint32(len(b)-12)) // batchLength counts the bytes after it
	b[16] = 2                                              // magic
	binary.BigEndian.PutUint32(b[23:27], uint32(lastDelta))
	binary.BigEndian.PutUint64(b[27:35], uint64(maxTs))
	binary.BigEndian.PutUint64(b[35:43], uint64(maxTs))
	binary.BigEndian.PutUint64(b[43:51], ^uint64(0))          // producerId -1
	binary.BigEndian.PutUint16(b[51:53], 0xffff)              // producerEpoch -1
	binary.BigEndian.PutUint32(b[53:57], ^uint32(0))          // baseSequence -1
	binary.BigEndian.PutUint32(b[57:61], uint32(lastDelta+1)) // recordCount
	for i := batch.HeaderSize; i < len(b); i++ {
		b[i] = fill + byte(i)
	}
	binary.BigEndian.PutUint32(b[17:21], batch.Checksum(b[21:]))
	return b
}

// stored is a batch as the log holds it: with its base offset assigned.
type stored struct {
	base, last int64
	b          []byte
}

// model is the expected content of a log.
type model struct{ batches []stored }

// appendTo appends b and records what the log must hold.
func (m *model) appendTo(t testing.TB, l *Log, b []byte) stored {
	t.Helper()
	base, err := l.Append(b)
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	h, _ := parseHeader(b)
	s := stored{base: base, last: base + int64(h.LastOffsetDelta), b: slices.Clone(b)}
	if n := len(m.batches); n > 0 && m.batches[n-1].last+1 != base {
		t.Fatalf("base %d does not follow %d", base, m.batches[n-1].last)
	}
	m.batches = append(m.batches, s)
	return s
}

// bytes is the concatenation of the batches from index i on, up to (not including) index j.
func (m *model) bytes(i, j int) []byte {
	var out []byte
	for _, s := range m.batches[i:j] {
		out = append(out, s.b...)
	}
	return out
}

// find returns the index of the batch holding offset.
func (m *model) find(offset int64) int {
	for i, s := range m.batches {
		if s.base <= offset && offset <= s.last {
			return i
		}
	}
	return -1
}

func openLog(t testing.TB, dir string, o Options) *Log {
	t.Helper()
	l, err := Open(dir, o)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil && !errors.Is(err, ErrClosed) {
			t.Errorf("Close: %v", err)
		}
	})
	return l
}

// readAll reads every batch from Start() to End() and returns the bytes.
func readAll(t testing.TB, l *Log) []byte {
	t.Helper()
	res, err := l.Read(l.Start(), 1<<30, l.End())
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	b, err := l.ReadBytes(res)
	if err != nil {
		t.Fatalf("ReadBytes: %v", err)
	}
	if len(res.Chunks) > 0 && res.NextOffset != l.End() {
		t.Fatalf("NextOffset = %d, want End %d", res.NextOffset, l.End())
	}
	return b
}

// checkHolds asserts that l holds exactly batches [i, j) of m.
func checkHolds(t testing.TB, l *Log, m *model, i, j int) {
	t.Helper()
	wantEnd := int64(0)
	if j > 0 {
		wantEnd = m.batches[j-1].last + 1
	}
	if l.End() != wantEnd {
		t.Fatalf("End = %d, want %d", l.End(), wantEnd)
	}
	if got, want := readAll(t, l), m.bytes(i, j); !bytes.Equal(got, want) {
		t.Fatalf("log holds %d bytes, want %d (batches %d..%d); equal prefix %d",
			len(got), len(want), i, j, commonPrefix(got, want))
	}
}

func commonPrefix(a, b []byte) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// segmentFiles lists the base offsets of the .log files in dir.
func segmentFiles(t testing.TB, fs vfs.FS, dir string) []int64 {
	t.Helper()
	ents, err := fs.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for _, e := range ents {
		if base, ok := parseSegmentName(e.Name(), logSuffix); ok {
			out = append(out, base)
		}
	}
	return out
}

func fileBytes(t testing.TB, fs vfs.FS, name string) []byte {
	t.Helper()
	f, err := fs.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	b := make([]byte, st.Size())
	if n, _ := f.ReadAt(b, 0); int64(n) != st.Size() {
		t.Fatalf("short read of %s", name)
	}
	return b
}

// writeFileAt overwrites or extends a file behind the log's back (damage, torn writes).
func writeFileAt(t testing.TB, fs vfs.FS, name string, p []byte, off int64) {
	t.Helper()
	f, err := fs.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(p, off); err != nil {
		t.Fatal(err)
	}
}

func segPath(dir string, base int64, suffix string) string {
	return segmentName(dir, base, suffix)
}

// crashPoint serves crash-at-every-step tests: while counting, the step-th file operation through fs first
// takes mem's crash clone (what a power cut just before it would leave). The log's own goroutines go through
// the same hook, hence the mutex.
type crashPoint struct {
	mem  *vfs.MemFS
	step int

	mu       sync.Mutex
	counting bool
	n        int
	clone    *vfs.MemFS
}

func (c *crashPoint) fs() vfs.FS {
	return vfs.NewErrorFS(c.mem, func(op, name string) error {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.counting {
			if c.n++; c.n == c.step {
				c.clone = c.mem.CrashClone()
			}
		}
		return nil
	})
}

func (c *crashPoint) count(on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counting = on
}

// taken returns the clone taken at the step, nil if the operations counted were fewer.
func (c *crashPoint) taken() *vfs.MemFS {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.clone
}
