package replica

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/kawa-broker/kawa/internal/batch"
	"github.com/kawa-broker/kawa/internal/vfs"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// flHeader is a record's header: length uint32 (of what follows the CRC), CRC-32C uint32 (of what follows),
// then index uint64, term uint64, type uint8; the entry's data makes up the rest.
const flHeader = 8 + 17

// FileLog is a LogStore in one append-only file: one record per raft entry, every entry also held in memory.
// It is the reference LogStore the scheduler and the simulation run on until the partition log carries raft
// entries (see the package doc); it never compacts, so FirstIndex is always 1 and Snapshot is never needed.
//
// Append writes without fsync; Sync makes every appended entry durable. Open recovers the file: it ends at the
// first record that is short, fails its CRC or does not continue the index sequence, and the rest is cut off.
// A crash can leave any mix of the bytes written since the last Sync (good records after a bad one included),
// none of them relied on, so this is the only cut that is safe; unlike internal/log, damage to synced records
// is not told apart from a torn tail.
//
// Raft reads it (Entries, Term, ...) from the group's worker while the simulation's checkers read it between
// cycles, so a mutex guards the in-memory entries.
type FileLog struct {
	f vfs.File

	mu   sync.Mutex
	ents []*pb.Entry // ents[i] has index i+1
	pos  []int64     // pos[i]: file position of ents[i]'s record
	size int64       // file size: the end of the last record
}

// OpenFileLog opens (creating if missing) the log file name on fsys and recovers it. A new file is made
// durable in its directory at once.
func OpenFileLog(fsys vfs.FS, name string) (*FileLog, error) {
	b, err := vfs.ReadFile(fsys, name)
	created := errors.Is(err, os.ErrNotExist)
	if err != nil && !created {
		return nil, fmt.Errorf("replica: read %s: %w", name, err)
	}
	f, err := fsys.OpenFile(name, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("replica: open %s: %w", name, err)
	}
	l := &FileLog{f: f}
	if created {
		err = fsys.SyncDir(filepath.Dir(name))
	} else {
		err = l.recover(b)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("replica: open %s: %w", name, err)
	}
	return l, nil
}

// recover rebuilds the in-memory entries from the file's bytes b.
func (l *FileLog) recover(b []byte) error {
	var pos int64
	for pos < int64(len(b)) {
		e, n, ok := decodeRecord(b[pos:], uint64(len(l.ents))+1)
		if !ok {
			// A torn tail: cut it and make the cut durable, so new appends never follow garbage.
			if err := l.f.Truncate(pos); err != nil {
				return fmt.Errorf("replica: truncate %s: %w", l.f.Name(), err)
			}
			if err := l.f.Sync(); err != nil {
				return fmt.Errorf("replica: fsync %s: %w", l.f.Name(), err)
			}
			break
		}
		l.ents = append(l.ents, e)
		l.pos = append(l.pos, pos)
		pos += int64(n)
	}
	l.size = pos
	return nil
}

// decodeRecord decodes the record at the start of b, which must hold the entry with index want.
func decodeRecord(b []byte, want uint64) (*pb.Entry, int, bool) {
	if len(b) < flHeader {
		return nil, 0, false
	}
	n := int(binary.BigEndian.Uint32(b))
	if n < flHeader-8 || n > len(b)-8 {
		return nil, 0, false
	}
	body := b[8 : 8+n]
	if batch.Checksum(body) != binary.BigEndian.Uint32(b[4:]) {
		return nil, 0, false
	}
	idx := binary.BigEndian.Uint64(body)
	if idx != want {
		return nil, 0, false
	}
	e := &pb.Entry{
		Index: new(idx),
		Term:  new(binary.BigEndian.Uint64(body[8:])),
		Type:  pb.EntryType(body[16]).Enum(),
		Data:  body[17:],
	}
	return e, 8 + n, true
}

func appendRecord(b []byte, e *pb.Entry) []byte {
	start := len(b)
	b = binary.BigEndian.AppendUint32(b, uint32(17+len(e.GetData())))
	b = append(b, 0, 0, 0, 0) // CRC, below
	b = binary.BigEndian.AppendUint64(b, e.GetIndex())
	b = binary.BigEndian.AppendUint64(b, e.GetTerm())
	b = append(b, byte(e.GetType()))
	b = append(b, e.GetData()...)
	binary.BigEndian.PutUint32(b[start+4:], batch.Checksum(b[start+8:]))
	return b
}

// Append implements LogStore: it writes ents (consecutive indexes) after the entry before ents[0], first
// discarding every entry at or after ents[0]'s index, as raft requires. It does not fsync.
func (l *FileLog) Append(ents []*pb.Entry) error {
	if len(ents) == 0 {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	first := ents[0].GetIndex()
	last := uint64(len(l.ents))
	if first == 0 || first > last+1 {
		return fmt.Errorf("replica: append at index %d to %s, which ends at %d", first, l.f.Name(), last)
	}
	at := l.size
	if first <= last {
		at = l.pos[first-1]
		if err := l.f.Truncate(at); err != nil {
			return fmt.Errorf("replica: truncate %s: %w", l.f.Name(), err)
		}
		l.ents = l.ents[: first-1 : first-1] // full slice: entries handed to raft stay intact
		l.pos = l.pos[:first-1]
		l.size = at
	}
	var buf []byte
	pos := make([]int64, len(ents))
	for i, e := range ents {
		pos[i] = at + int64(len(buf))
		buf = appendRecord(buf, e)
	}
	if _, err := l.f.WriteAt(buf, at); err != nil {
		return fmt.Errorf("replica: write %s: %w", l.f.Name(), err)
	}
	l.ents = append(l.ents, ents...)
	l.pos = append(l.pos, pos...)
	l.size = at + int64(len(buf))
	return nil
}

// Sync implements LogStore: it fsyncs the file.
func (l *FileLog) Sync() error {
	if err := l.f.Sync(); err != nil {
		return fmt.Errorf("replica: fsync %s: %w", l.f.Name(), err)
	}
	return nil
}

// Close closes the file; it does not fsync.
func (l *FileLog) Close() error { return l.f.Close() }

// Entries implements raft.Storage: entries [lo, hi), at most maxSize bytes (proto size) but at least one.
func (l *FileLog) Entries(lo, hi, maxSize uint64) ([]*pb.Entry, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if lo < 1 {
		return nil, raft.ErrCompacted
	}
	if hi > uint64(len(l.ents))+1 || lo > hi {
		return nil, raft.ErrUnavailable
	}
	out := make([]*pb.Entry, 0, hi-lo)
	var size uint64
	for _, e := range l.ents[lo-1 : hi-1] {
		size += uint64(proto.Size(e))
		if len(out) > 0 && size > maxSize {
			break
		}
		out = append(out, e)
	}
	return out, nil
}

// Term implements raft.Storage; the term of index 0 (before the first entry) is 0.
func (l *FileLog) Term(i uint64) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if i == 0 {
		return 0, nil
	}
	if i > uint64(len(l.ents)) {
		return 0, raft.ErrUnavailable
	}
	return l.ents[i-1].GetTerm(), nil
}

// LastIndex implements raft.Storage.
func (l *FileLog) LastIndex() (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return uint64(len(l.ents)), nil
}

// FirstIndex implements raft.Storage: always 1, a FileLog never compacts.
func (l *FileLog) FirstIndex() (uint64, error) { return 1, nil }

// Snapshot implements raft.Storage. A FileLog never compacts, so raft never needs a snapshot from it; the
// error keeps raft retrying rather than installing an empty one.
func (l *FileLog) Snapshot() (*pb.Snapshot, error) {
	return nil, raft.ErrSnapshotTemporarilyUnavailable
}
