package replica

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/kawa-broker/kawa/internal/vfs"
	pb "go.etcd.io/raft/v3/raftpb"
)

func hsOf(term, vote, commit uint64) *pb.HardState {
	return &pb.HardState{Term: new(term), Vote: new(vote), Commit: new(commit)}
}

func wantHS(t *testing.T, h *hardStates, g GroupID, term, vote, commit uint64) {
	t.Helper()
	st := h.get(g)
	if st.GetTerm() != term || st.GetVote() != vote || st.GetCommit() != commit {
		t.Fatalf("group %d: hardstate %v, want term %d vote %d commit %d", g, st, term, vote, commit)
	}
}

func TestHardStatesSurviveCrash(t *testing.T) {
	mem := vfs.NewMem()
	if err := vfs.MkdirAllDurable(mem, "/r"); err != nil {
		t.Fatal(err)
	}
	h, err := openHardStates(mem, "/r")
	if err != nil {
		t.Fatal(err)
	}
	if h.get(1) != nil {
		t.Fatal("fresh file has a hardstate")
	}
	if err := h.save(map[GroupID]*pb.HardState{1: hsOf(1, 2, 0), 2: hsOf(3, 3, 7)}); err != nil {
		t.Fatal(err)
	}
	if err := h.save(map[GroupID]*pb.HardState{1: hsOf(2, 1, 5)}); err != nil {
		t.Fatal(err)
	}
	// save returned: a power cut keeps all of it, the last record of a group winning.
	h, err = openHardStates(mem.CrashClone(), "/r")
	if err != nil {
		t.Fatal(err)
	}
	wantHS(t, h, 1, 2, 1, 5)
	wantHS(t, h, 2, 3, 3, 7)
	if h.get(3) != nil {
		t.Fatal("group 3 has a hardstate")
	}
}

func TestHardStatesTornTail(t *testing.T) {
	mem := vfs.NewMem()
	h, err := openHardStates(mem, "/")
	if err != nil {
		t.Fatal(err)
	}
	for i := range uint64(3) {
		if err := h.save(map[GroupID]*pb.HardState{1: hsOf(i+1, 1, i)}); err != nil {
			t.Fatal(err)
		}
	}
	good, err := vfs.ReadFile(mem, "/"+HardStateFile)
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		b    []byte
		term uint64
	}{
		"short last record":  {b: good[:len(good)-5], term: 2},
		"zeroed last record": {b: append(good[:2*hsRecordSize:2*hsRecordSize], make([]byte, hsRecordSize)...), term: 2},
		// Pages written back out of order: a good record after a torn one was never fsynced either.
		"bad middle record": {b: flip(good, hsRecordSize+3), term: 1},
		"intact":            {b: good, term: 3},
	} {
		t.Run(name, func(t *testing.T) {
			fs := vfs.NewMem()
			if err := vfs.WriteFileAtomic(fs, "/"+HardStateFile, tc.b); err != nil {
				t.Fatal(err)
			}
			h, err := openHardStates(fs, "/")
			if err != nil {
				t.Fatal(err)
			}
			wantHS(t, h, 1, tc.term, 1, tc.term-1)
			// The torn tail is gone from the file, so the next append follows good records.
			if err := h.save(map[GroupID]*pb.HardState{1: hsOf(9, 1, 8)}); err != nil {
				t.Fatal(err)
			}
			h, err = openHardStates(fs, "/")
			if err != nil {
				t.Fatal(err)
			}
			wantHS(t, h, 1, 9, 1, 8)
		})
	}
}

func flip(b []byte, i int) []byte {
	c := append([]byte(nil), b...)
	c[i] ^= 0xff
	return c
}

func TestHardStatesCompact(t *testing.T) {
	mem := vfs.NewMem()
	h, err := openHardStates(mem, "/")
	if err != nil {
		t.Fatal(err)
	}
	for i := range uint64(hsCompactMin + 10) {
		if err := h.save(map[GroupID]*pb.HardState{GroupID(i % 3): hsOf(i, 0, i)}); err != nil {
			t.Fatal(err)
		}
	}
	st, err := mem.Stat(filepath.Join("/", HardStateFile))
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() > 20*hsRecordSize {
		t.Fatalf("file holds %d bytes after compaction, want a few records", st.Size())
	}
	h, err = openHardStates(mem.CrashClone(), "/")
	if err != nil {
		t.Fatal(err)
	}
	last := uint64(hsCompactMin + 9)
	for g := range GroupID(3) {
		i := last - (last-uint64(g))%3
		wantHS(t, h, g, i, 0, i)
	}
	if _, err := mem.Stat("/" + HardStateFile + vfs.TempSuffix); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temp file left behind: %v", err)
	}
}

// TestHardStatesCommitOnlyUnsynced: a change of the commit index alone is written but not fsynced (a power cut
// may take it back); a term or vote change is fsynced, and with it every earlier record.
func TestHardStatesCommitOnlyUnsynced(t *testing.T) {
	mem := vfs.NewMem()
	h, err := openHardStates(mem, "/")
	must(t, err)
	must(t, h.save(map[GroupID]*pb.HardState{1: hsOf(1, 1, 0), 2: hsOf(1, 2, 0)}))
	must(t, h.save(map[GroupID]*pb.HardState{1: hsOf(1, 1, 4)}))
	c, err := openHardStates(mem.CrashClone(), "/")
	must(t, err)
	wantHS(t, c, 1, 1, 1, 0) // the commit-only record was not fsynced
	wantHS(t, h, 1, 1, 1, 4) // but is in memory and in the file
	must(t, h.save(map[GroupID]*pb.HardState{2: hsOf(2, 0, 0)}))
	c, err = openHardStates(mem.CrashClone(), "/")
	must(t, err)
	wantHS(t, c, 1, 1, 1, 4)
	wantHS(t, c, 2, 2, 0, 0)
}
