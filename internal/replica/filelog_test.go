package replica

import (
	"errors"
	"fmt"
	"testing"

	"github.com/kawa-broker/kawa/internal/vfs"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

func ents(first, term uint64, n int) []*pb.Entry {
	out := make([]*pb.Entry, n)
	for i := range out {
		idx := first + uint64(i)
		out[i] = &pb.Entry{Index: new(idx), Term: new(term), Type: pb.EntryNormal.Enum(), Data: fmt.Appendf(nil, "t%d-i%d", term, idx)}
	}
	return out
}

// wantLog checks the log holds exactly terms[i] at index i+1, with ents' data.
func wantLog(t *testing.T, l *FileLog, terms ...uint64) {
	t.Helper()
	last, _ := l.LastIndex()
	if last != uint64(len(terms)) {
		t.Fatalf("last index %d, want %d", last, len(terms))
	}
	if len(terms) == 0 {
		return
	}
	got, err := l.Entries(1, last+1, ^uint64(0))
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range got {
		want := fmt.Sprintf("t%d-i%d", terms[i], i+1)
		if e.GetIndex() != uint64(i+1) || e.GetTerm() != terms[i] || string(e.GetData()) != want {
			t.Fatalf("entry %d: index %d term %d data %q, want term %d data %q", i+1, e.GetIndex(), e.GetTerm(), e.GetData(), terms[i], want)
		}
		if tm, _ := l.Term(uint64(i + 1)); tm != terms[i] {
			t.Fatalf("Term(%d) = %d, want %d", i+1, tm, terms[i])
		}
	}
}

func openLog(t *testing.T, fs vfs.FS) *FileLog {
	t.Helper()
	l, err := OpenFileLog(fs, "/g.log")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func TestFileLogAppendTruncateRecover(t *testing.T) {
	mem := vfs.NewMem()
	l := openLog(t, mem)
	if tm, err := l.Term(0); tm != 0 || err != nil {
		t.Fatalf("Term(0) = %d, %v", tm, err)
	}
	if _, err := l.Term(1); !errors.Is(err, raft.ErrUnavailable) {
		t.Fatalf("Term(1) of an empty log: %v, want ErrUnavailable", err)
	}
	must(t, l.Append(ents(1, 1, 5)))
	must(t, l.Sync())
	// A new leader's entries replace the conflicting suffix from index 3.
	must(t, l.Append(ents(3, 2, 2)))
	wantLog(t, l, 1, 1, 2, 2)
	if err := l.Append(ents(7, 2, 1)); err == nil {
		t.Fatal("append leaving a gap accepted")
	}
	must(t, l.Sync())
	must(t, l.Append(ents(5, 2, 3))) // not synced: a power cut loses it
	wantLog(t, l, 1, 1, 2, 2, 2, 2, 2)

	crashed := mem.CrashClone()
	wantLog(t, openLog(t, crashed), 1, 1, 2, 2)
	// The same file reopened without a crash has everything written.
	wantLog(t, openLog(t, mem), 1, 1, 2, 2, 2, 2, 2)

	// After recovery, appends continue the log and survive the next crash once synced.
	r := openLog(t, crashed)
	must(t, r.Append(ents(5, 3, 1)))
	must(t, r.Sync())
	wantLog(t, openLog(t, crashed.CrashClone()), 1, 1, 2, 2, 3)
}

func TestFileLogEntriesMaxSize(t *testing.T) {
	l := openLog(t, vfs.NewMem())
	must(t, l.Append(ents(1, 1, 10)))
	got, err := l.Entries(1, 11, 0)
	if err != nil || len(got) != 1 {
		t.Fatalf("maxSize 0: %d entries, %v; want 1 (raft's at-least-one rule)", len(got), err)
	}
	got, err = l.Entries(2, 11, 40) // each entry is ~15 bytes as a proto
	if err != nil || len(got) < 2 || len(got) > 3 || got[0].GetIndex() != 2 {
		t.Fatalf("maxSize 40: %d entries from %d, %v", len(got), got[0].GetIndex(), err)
	}
	if _, err := l.Entries(5, 12, 100); !errors.Is(err, raft.ErrUnavailable) {
		t.Fatalf("past the end: %v", err)
	}
	if _, err := l.Entries(0, 2, 100); !errors.Is(err, raft.ErrCompacted) {
		t.Fatalf("index 0: %v", err)
	}
	// Entries handed out stay intact when a later append replaces the suffix they came from.
	held, _ := l.Entries(5, 11, ^uint64(0))
	must(t, l.Append(ents(5, 2, 1)))
	if string(held[0].GetData()) != "t1-i5" || len(held) != 6 {
		t.Fatalf("held entries changed: %q, %d", held[0].GetData(), len(held))
	}
}

func TestFileLogTornTail(t *testing.T) {
	mem := vfs.NewMem()
	l := openLog(t, mem)
	must(t, l.Append(ents(1, 1, 4)))
	must(t, l.Sync())
	good, err := vfs.ReadFile(mem, "/g.log")
	if err != nil {
		t.Fatal(err)
	}
	rec := len(good) / 4
	for name, tc := range map[string]struct {
		b []byte
		n int
	}{
		"short last record": {b: good[:len(good)-3], n: 3},
		"zeros after":       {b: append(append([]byte(nil), good...), make([]byte, 100)...), n: 4},
		"bad last record":   {b: flip(good, len(good)-1), n: 3},
		// Pages written back out of order: the good records after the torn one were never synced either.
		"bad second record": {b: flip(good, rec+10), n: 1},
	} {
		t.Run(name, func(t *testing.T) {
			fs := vfs.NewMem()
			must(t, vfs.WriteFileAtomic(fs, "/g.log", tc.b))
			l, err := OpenFileLog(fs, "/g.log")
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			wantLog(t, l, make1s(tc.n)...)
			// The cut is durable: a crash right after open does not bring the torn bytes back.
			st, _ := fs.CrashClone().Stat("/g.log")
			if st.Size() != int64(tc.n*rec) {
				t.Fatalf("file is %d bytes after recovery, want %d", st.Size(), tc.n*rec)
			}
		})
	}
}

func make1s(n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = 1
	}
	return out
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
