package log

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/kawa-broker/kawa/internal/batch"
	"github.com/kawa-broker/kawa/internal/vfs"
)

// FuzzRecover feeds arbitrary bytes to recovery as the only segment of a log
// (the parser recovery uses is batch.ParseHeader, Header.Check and
// batch.CheckCRC). Open must never panic and either fail with ErrCorruption
// or recover a log that holds a prefix of the file made of whole valid
// batches numbered from 0 without gaps, ending at End(); recovering again
// gives the same log, and an append after recovery survives a reopen.
func FuzzRecover(f *testing.F) {
	f.Fuzz(func(t *testing.T, seg []byte) {
		fs := vfs.NewMem()
		if err := fs.MkdirAll("/p", 0o755); err != nil {
			t.Fatal(err)
		}
		writeFileAt(t, fs, createFile(t, fs, segPath("/p", 0, logSuffix)), seg, 0)
		l, err := Open("/p", Options{FS: fs})
		if err != nil {
			if !errors.Is(err, ErrCorruption) {
				t.Fatalf("Open: %v, want nil or ErrCorruption", err)
			}
			return
		}
		got := readAll(t, l)
		if !bytes.Equal(got, seg[:min(len(got), len(seg))]) || len(got) > len(seg) {
			t.Fatalf("recovered %d bytes that are not a prefix of the %d byte segment", len(got), len(seg))
		}
		wantWholeBatches(t, got, 0, l.End())
		extra := mkBatch(1, 5, 10, 'x')
		if _, err := l.Append(extra); err != nil {
			t.Fatalf("Append after recovery: %v", err)
		}
		if err := l.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		again := openLog(t, "/p", Options{FS: fs})
		if want := append(got, extra...); !bytes.Equal(readAll(t, again), want) {
			t.Fatal("a second recovery changed the log")
		}
	})
}

// FuzzRecoverMiddle feeds arbitrary bytes to recovery as the first of two
// segments; the second holds one valid batch at offset 10 (where the "whole"
// seed ends). Damage outside the last segment is corruption, never cut off
// or renumbered: Open must never panic and either fail with ErrCorruption or
// recover exactly both files, whole valid batches without gaps.
func FuzzRecoverMiddle(f *testing.F) {
	f.Fuzz(func(t *testing.T, seg []byte) {
		fs := vfs.NewMem()
		if err := fs.MkdirAll("/p", 0o755); err != nil {
			t.Fatal(err)
		}
		tail := mkBatch(0, 200, 10, 't')
		batch.SetBaseOffset(tail, 10)
		writeFileAt(t, fs, createFile(t, fs, segPath("/p", 0, logSuffix)), seg, 0)
		writeFileAt(t, fs, createFile(t, fs, segPath("/p", 10, logSuffix)), tail, 0)
		l, err := Open("/p", Options{FS: fs})
		if err != nil {
			if !errors.Is(err, ErrCorruption) {
				t.Fatalf("Open: %v, want nil or ErrCorruption", err)
			}
			return
		}
		defer l.Close()
		got := readAll(t, l)
		if want := append(bytes.Clone(seg), tail...); !bytes.Equal(got, want) {
			t.Fatalf("recovered %d bytes, want the %d of both segments whole", len(got), len(want))
		}
		if l.End() != 11 {
			t.Fatalf("End() = %d, want 11", l.End())
		}
		wantWholeBatches(t, got, l.Start(), l.End())
	})
}

// wantWholeBatches requires b to be whole valid batches numbered from first
// without gaps, ending at end.
func wantWholeBatches(t *testing.T, b []byte, first, end int64) {
	t.Helper()
	next := first
	valid, err := batch.Iterate(b, func(h batch.Header, _ []byte) bool {
		if h.BaseOffset != next {
			t.Fatalf("recovered batch at base offset %d, want %d", h.BaseOffset, next)
		}
		next = h.LastOffset() + 1
		return true
	})
	if err != nil || valid != len(b) || next != end {
		t.Fatalf("recovered log: %d of %d bytes valid (%v), batches end at %d, want %d", valid, len(b), err, next, end)
	}
}

// createFile creates name empty in fs and returns it.
func createFile(t *testing.T, fs vfs.FS, name string) string {
	t.Helper()
	f, err := fs.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return name
}

var updateCorpus = flag.Bool("update-corpus", false, "rewrite the committed fuzz seed corpus under testdata/fuzz")

// TestRecoverSeedCorpus regenerates testdata/fuzz/FuzzRecover{,Middle} with
// -update-corpus; without it, it checks the seeds are present.
func TestRecoverSeedCorpus(t *testing.T) {
	seeds := recoverSeeds()
	for _, fuzz := range []string{"FuzzRecover", "FuzzRecoverMiddle"} {
		dir := filepath.Join("testdata", "fuzz", fuzz)
		if !*updateCorpus {
			if ents, err := os.ReadDir(dir); err != nil || len(ents) < len(seeds) {
				t.Fatalf("%s: %d seeds (%v); run go test -run TestRecoverSeedCorpus -update-corpus", dir, len(ents), err)
			}
			continue
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, b := range seeds {
			data := fmt.Appendf(nil, "go test fuzz v1\n[]byte(%q)\n", b)
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// recoverSeeds returns named segment files: whole logs, a torn tail, a bad
// CRC, a wrong base offset, a short length and trailing garbage.
func recoverSeeds() map[string][]byte {
	var whole []byte
	next := int64(0)
	for i := range 4 {
		b := mkBatch(int32(i), int64(100+i), 20+10*i, byte(i))
		batch.SetBaseOffset(b, next)
		next += int64(i) + 1
		whole = append(whole, b...)
	}
	badCRC := bytes.Clone(whole)
	badCRC[len(badCRC)-3] ^= 0x40
	gap := bytes.Clone(whole)
	batch.SetBaseOffset(gap[len(mkBatch(0, 0, 20, 0)):], 7)
	short := bytes.Clone(whole)
	copy(short[len(short)-len(mkBatch(3, 0, 50, 0))+8:], []byte{0, 0, 0, 1})
	return map[string][]byte{
		"empty":    {},
		"whole":    whole,
		"torn":     whole[:len(whole)-5],
		"torn-hdr": whole[:len(whole)-len(mkBatch(3, 0, 50, 0))+30],
		"bad-crc":  badCRC,
		"gap":      gap,
		"short":    short,
		"garbage":  append(bytes.Clone(whole), 0xde, 0xad, 0xbe, 0xef),
	}
}
