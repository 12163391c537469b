package log

import (
	"encoding/binary"
	"sort"
)

// Index files hold fixed-size big-endian entries, as Kafka's do.
//
//	.index:     relative offset uint32, file position uint32  (8 bytes)
//	.timeindex: timestamp int64, relative offset uint32        (12 bytes)
//
// An offset entry (r, p) says the batch with base offset segmentBase+r starts at byte p. A time entry (t, r) says
// every batch below offset segmentBase+r has max timestamp <= t; each time entry's offset also has an offset
// entry, so a time lookup ends in an exact position. Entries are added by segment.noteBatch, the only place that
// decides them, so a rebuilt index equals the one written while appending.
const (
	offEntryLen  = 8
	timeEntryLen = 12
)

func appendOffEntry(idx []byte, rel uint32, pos uint32) []byte {
	idx = binary.BigEndian.AppendUint32(idx, rel)
	return binary.BigEndian.AppendUint32(idx, pos)
}

func appendTimeEntry(idx []byte, ts int64, rel uint32) []byte {
	idx = binary.BigEndian.AppendUint64(idx, uint64(ts))
	return binary.BigEndian.AppendUint32(idx, rel)
}

// lookupPos returns the position of the last indexed batch whose base offset is <= segmentBase+rel, or 0.
func lookupPos(idx []byte, rel uint32) int64 {
	_, pos := lookupEntry(idx, rel)
	return pos
}

// lookupEntry returns the last entry (relative value, position) of an offset or raft index whose value is
// <= rel, or (0, 0): the implicit entry for the segment's first batch.
func lookupEntry(idx []byte, rel uint32) (uint32, int64) {
	n := len(idx) / offEntryLen
	i := sort.Search(n, func(i int) bool {
		return binary.BigEndian.Uint32(idx[i*offEntryLen:]) > rel
	}) - 1
	if i < 0 {
		return 0, 0
	}
	return binary.BigEndian.Uint32(idx[i*offEntryLen:]), int64(binary.BigEndian.Uint32(idx[i*offEntryLen+4:]))
}

// lookupAtPos returns the last entry of idx whose position is <= pos, or (0, 0). Positions grow with the
// values, so the entries are sorted by both.
func lookupAtPos(idx []byte, pos int64) (uint32, int64) {
	n := len(idx) / offEntryLen
	i := sort.Search(n, func(i int) bool {
		return int64(binary.BigEndian.Uint32(idx[i*offEntryLen+4:])) > pos
	}) - 1
	if i < 0 {
		return 0, 0
	}
	return binary.BigEndian.Uint32(idx[i*offEntryLen:]), int64(binary.BigEndian.Uint32(idx[i*offEntryLen+4:]))
}

// lookupTime returns the relative offset of the last time entry whose timestamp is < ts (every batch below it is
// older than ts, so a search for ts may start there), or 0.
func lookupTime(idx []byte, ts int64) uint32 {
	n := len(idx) / timeEntryLen
	i := sort.Search(n, func(i int) bool {
		return int64(binary.BigEndian.Uint64(idx[i*timeEntryLen:])) >= ts
	}) - 1
	if i < 0 {
		return 0
	}
	return binary.BigEndian.Uint32(idx[i*timeEntryLen+8:])
}
