package replica

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/kawa-broker/kawa/internal/batch"
	"github.com/kawa-broker/kawa/internal/vfs"
	pb "go.etcd.io/raft/v3/raftpb"
)

// HardStateFile is the name, in the scheduler's directory, of the node-wide file holding the raft HardState
// (term, vote, commit) of every group.
const HardStateFile = "raft-hardstate"

// hsRecordSize is one record: group uint64, term uint64, vote uint64, commit uint64 (big-endian), then the
// CRC-32C of those 32 bytes.
const hsRecordSize = 36

// hsCompactMin is the number of records the file may hold before it is rewritten with only the latest
// record of each group; the rewrite also happens when records exceed 4× the groups.
const hsCompactMin = 4096

// hardStates is the node-wide HardState file: an append-only sequence of fixed-size records, one per changed
// group per scheduler cycle, the last record of a group winning. One fsync per cycle covers every group that
// changed in it (vfs.AppendFile), and none when only commit indexes changed (see save). When the file holds many stale records it is replaced, through
// vfs.WriteFileAtomic, by one record per live group.
//
// The file ends at its first record that is short or fails its CRC: a crash can leave any mix of the bytes
// appended since the last fsync (the kernel writes pages back in any order), good records after a bad one
// included, and none of them was relied on (vote and term records are fsynced before anything depends on
// them; commit-only records may be lost). Open cuts that tail off by rewriting the file.
//
// Only the scheduler's cycle goroutine uses a hardStates; it has no lock.
type hardStates struct {
	fs      vfs.FS
	path    string
	cur     map[GroupID]*pb.HardState // as durable on disk
	records int                       // records in the file
}

func openHardStates(fsys vfs.FS, dir string) (*hardStates, error) {
	h := &hardStates{fs: fsys, path: filepath.Join(dir, HardStateFile), cur: map[GroupID]*pb.HardState{}}
	b, err := vfs.ReadFile(fsys, h.path)
	if errors.Is(err, os.ErrNotExist) {
		return h, nil
	}
	if err != nil {
		return nil, fmt.Errorf("replica: read %s: %w", h.path, err)
	}
	good := 0 // whole records with a good CRC, a prefix of the file
	for ; (good+1)*hsRecordSize <= len(b); good++ {
		rec := b[good*hsRecordSize : (good+1)*hsRecordSize]
		if batch.Checksum(rec[:32]) != binary.BigEndian.Uint32(rec[32:]) {
			break
		}
		g := GroupID(binary.BigEndian.Uint64(rec[0:]))
		h.cur[g] = &pb.HardState{
			Term:   new(binary.BigEndian.Uint64(rec[8:])),
			Vote:   new(binary.BigEndian.Uint64(rec[16:])),
			Commit: new(binary.BigEndian.Uint64(rec[24:])),
		}
	}
	h.records = good
	if good*hsRecordSize != len(b) {
		// Rewrite now: appending after a torn tail would put good records after bad ones.
		if err := h.compact(); err != nil {
			return nil, err
		}
	}
	return h, nil
}

// get returns the durable HardState of g, nil when none was saved.
func (h *hardStates) get(g GroupID) *pb.HardState { return h.cur[g] }

// save writes every HardState in changes with one append. The append is fsynced (vfs.AppendFile) when a term
// or vote changed: raft must not send a vote or a message of a new term before both are durable. A change of
// the commit index alone is written without fsync: raft does not need it durable (MustSync is false), a crash
// may take it back to an earlier value that the next leader's messages raise again, and the next fsynced
// append covers it. Then the file is compacted when stale records dominate it. On error nothing in changes
// may be assumed durable.
func (h *hardStates) save(changes map[GroupID]*pb.HardState) error {
	if len(changes) == 0 {
		return nil
	}
	mustSync := false
	for g, st := range changes {
		old := h.cur[g]
		if st.GetTerm() != old.GetTerm() || st.GetVote() != old.GetVote() {
			mustSync = true
			break
		}
	}
	b := encodeHardStates(changes)
	if mustSync {
		if err := vfs.AppendFile(h.fs, h.path, b); err != nil {
			return err
		}
	} else if err := h.appendUnsynced(b); err != nil {
		return err
	}
	for g, st := range changes {
		h.cur[g] = st
	}
	h.records += len(changes)
	if h.records > max(hsCompactMin, 4*len(h.cur)) {
		return h.compact()
	}
	return nil
}

// appendUnsynced appends b without fsync. A new file is created through vfs.AppendFile, so the file's
// directory entry is always durable.
func (h *hardStates) appendUnsynced(b []byte) error {
	f, err := h.fs.OpenFile(h.path, os.O_WRONLY|os.O_APPEND, 0)
	if errors.Is(err, os.ErrNotExist) {
		return vfs.AppendFile(h.fs, h.path, b)
	}
	if err != nil {
		return fmt.Errorf("replica: open %s: %w", h.path, err)
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("replica: write %s: %w", h.path, err)
	}
	return nil
}

// compact replaces the file with one record per group.
func (h *hardStates) compact() error {
	if err := vfs.WriteFileAtomic(h.fs, h.path, encodeHardStates(h.cur)); err != nil {
		return err
	}
	h.records = len(h.cur)
	return nil
}

// encodeHardStates encodes records in group order, so the file's bytes do not depend on map order (the
// simulation replays byte for byte).
func encodeHardStates(m map[GroupID]*pb.HardState) []byte {
	b := make([]byte, 0, len(m)*hsRecordSize)
	for _, g := range slices.Sorted(maps.Keys(m)) {
		st := m[g]
		start := len(b)
		b = binary.BigEndian.AppendUint64(b, uint64(g))
		b = binary.BigEndian.AppendUint64(b, st.GetTerm())
		b = binary.BigEndian.AppendUint64(b, st.GetVote())
		b = binary.BigEndian.AppendUint64(b, st.GetCommit())
		b = binary.BigEndian.AppendUint32(b, batch.Checksum(b[start:]))
	}
	return b
}
