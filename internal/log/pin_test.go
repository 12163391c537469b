package log

import (
	"bytes"
	"errors"
	"os"
	"testing"
)

// TestPinOutlivesDeletion: chunks pinned before their segment is deleted with no delay (closed at once) and
// before Close stay readable until released, on the real file system with 16 open files for the whole log
// (idle descriptors are closed all along); unpinned chunks of the deleted segment fail, wrapping os.ErrClosed.
func TestPinOutlivesDeletion(t *testing.T) {
	t.Parallel()
	fs, dir := osDir(t)
	l := openLog(t, dir, Options{FS: fs, SegmentBytes: 1000, FileDeleteDelay: -1, Files: NewFileCache(16)})
	var m model
	for i := range 40 {
		m.appendTo(t, l, mkBatch(0, int64(i), 200-61, byte(i)))
	}
	res, err := l.Read(0, 800, l.End())
	if err != nil {
		t.Fatal(err)
	}
	pinned, err := res.Pin()
	if err != nil {
		t.Fatal(err)
	}
	if err := l.SetStart(30); err != nil {
		t.Fatal(err)
	}
	if _, err := l.ReadBytes(res); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("unpinned read of a deleted segment: %v, want os.ErrClosed", err)
	}
	readPinned := func() []byte {
		var got []byte
		for _, p := range pinned {
			b := make([]byte, p.Size)
			if _, err := p.File.ReadAt(b, p.Pos); err != nil {
				t.Fatalf("pinned read: %v", err)
			}
			got = append(got, b...)
		}
		return got
	}
	if got := readPinned(); !bytes.Equal(got, m.bytes(0, 4)) {
		t.Fatalf("pinned chunks after deletion: %d bytes, want the first 4 batches", len(got))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got := readPinned(); !bytes.Equal(got, m.bytes(0, 4)) {
		t.Fatalf("pinned chunks after Close: %d bytes, want the first 4 batches", len(got))
	}
	for _, p := range pinned {
		p.Release()
	}
	if n := l.o.Files.Open(); n != 0 {
		t.Fatalf("%d descriptors open after Close and the last release", n)
	}
}
