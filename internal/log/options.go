package log

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/kawa-broker/kawa/internal/vfs"
)

// FsyncPolicy says when appended data is made durable and when WaitDurable returns.
type FsyncPolicy int

const (
	// FsyncAlways (the default): WaitDurable returns only after an fsync covers the data; concurrent waiters share
	// one fsync (group commit). DurableEnd and OnDurable report fsynced data only.
	FsyncAlways FsyncPolicy = iota
	// FsyncInterval: fsync every Options.FsyncInterval; data counts as durable once appended (explicit opt-out).
	FsyncInterval
	// FsyncNever: no fsync per append; data counts as durable once appended (explicit opt-out, Kafka's default).
	// Segment rolls, Sync and Close still fsync, as Kafka flushes a segment when it rolls.
	FsyncNever
)

func (p FsyncPolicy) String() string {
	switch p {
	case FsyncAlways:
		return "always"
	case FsyncInterval:
		return "interval"
	case FsyncNever:
		return "never"
	}
	return fmt.Sprintf("FsyncPolicy(%d)", int(p))
}

// Defaults applied by Open to zero-valued Options fields.
const (
	DefaultSegmentBytes       = 1 << 30              // Kafka segment.bytes
	DefaultIndexIntervalBytes = 4096                 // Kafka index.interval.bytes
	DefaultRetentionMs        = 7 * 24 * 3600 * 1000 // Kafka retention.ms
	DefaultFsyncInterval      = time.Second
	DefaultFileDeleteDelay    = time.Minute // Kafka file.delete.delay.ms
	// Preallocation steps (Options.Preallocate): the first reservation of a segment, and the largest.
	minPreallocStep = 64 << 10
	maxPreallocStep = 16 << 20
	// maxZeroStep is the largest step preallocated with written zeros: they are written inline by Append and
	// flushed by the next fsync, so a larger step would stall that append and that fsync for longer.
	maxZeroStep = 1 << 20
	// smallFsyncBytes: while the fsyncs since the last step averaged fewer bytes than this, the next step is
	// written zeros (vfs.PreallocateZeros), else fallocate (vfs.Preallocate). At a few KiB per fdatasync the
	// journal commit of an unwritten-extent conversion is a large share of each fsync; at megabytes (group
	// commit under load) it is noise, and writing every byte twice is not.
	smallFsyncBytes = 64 << 10
	// maxSegmentBytes keeps file positions and relative offsets inside Kafka's int32 index fields.
	maxSegmentBytes = 1<<31 - 1
)

// Options configure a Log. The zero value is usable: real files, 1 GiB segments, 7-day retention, FsyncAlways.
type Options struct {
	FS vfs.FS // nil = vfs.OS
	// Files bounds the descriptors held by segment files, shared by every Log given the same cache (nil = one
	// process-wide cache of DefaultMaxOpenFiles()).
	Files *FileCache
	// SegmentBytes: roll when the active segment would exceed it (0 = 1 GiB; at most 2 GiB-1). A segment always
	// takes at least one batch, so a batch larger than SegmentBytes gets a segment of its own.
	SegmentBytes int64
	// SegmentMs: roll when the active segment's first batch's max timestamp (or, without one, the segment's
	// creation time in this process) is more than SegmentMs old (0 = never).
	SegmentMs int64
	// IndexIntervalBytes: bytes of log between sparse index entries (0 = 4096).
	IndexIntervalBytes int
	// RetentionMs: delete whole non-active segments whose newest batch max timestamp is older (-1 = unlimited,
	// 0 = 7 days). A segment without timestamps (max timestamp < 0) is aged by its file's modification time.
	RetentionMs int64
	// RetentionBytes: delete the oldest whole non-active segments while what remains stays at least this large
	// (Kafka's rule; -1 or 0 = unlimited).
	RetentionBytes int64
	Fsync          FsyncPolicy
	// Preallocate (Kafka's log.preallocate, topic config preallocate) reserves the active segment's file ahead
	// of the writes, in steps that grow with the segment from 64 KiB to 16 MiB (never past SegmentBytes), so
	// most appends and their fdatasync change neither the file's size nor its block map: measured on this
	// project's ext4 machines, a 1 KiB append + fdatasync p50 of ~180 µs fell to ~130 µs. With FsyncAlways and
	// small fsyncs (fewer than 64 KiB each on average since the last step) the step is written zeros instead,
	// at most 1 MiB (vfs.PreallocateZeros: fallocate's unwritten extents still cost a journal commit on the
	// fsync after their first write; W1 p50 0.85x, p99 0.49x in a 9-round before/after run). The file is trimmed
	// to its batches when the segment rolls and on Close; recovery treats an all-zero tail as preallocated
	// space, not a torn batch. The log's own size (Size, retention) counts batches only.
	Preallocate bool
	// CleanShutdown says the log was closed by Close and nothing wrote to it since (the caller's clean-shutdown
	// marker, Kafka's .kafka_cleanshutdown, was present and has been removed durably before this Open): Close
	// fsynced every file, so Open skips the fsync of the recovered active segment and its indexes, three
	// fsyncs per partition at start. Recovery still scans and checks every batch (a torn tail is still cut);
	// only the fsync of what is read back is skipped. Leave it false after a crash.
	CleanShutdown bool
	FsyncInterval time.Duration // for FsyncInterval (0 = 1 s)
	// FlushMessages (Kafka's flush.messages), with FsyncNever or FsyncInterval: once this many records have
	// been appended since the last fsync, Append fsyncs the active segment before it returns, as Kafka's
	// UnifiedLog.append flushes in the append path. <= 0 = never. FsyncAlways fsyncs every write anyway.
	FlushMessages int64
	// FlushAfter (Kafka's flush.ms), with FsyncNever or FsyncInterval: every FlushAfter the sync goroutine
	// fsyncs the active segment if it holds unflushed data, so no record stays unflushed much longer than
	// twice FlushAfter (Kafka's log flusher checks on log.flush.scheduler.interval.ms). <= 0 = never.
	FlushAfter time.Duration
	// OnDurable is called from the log's notifier goroutine, never under the caller's lock, with a strictly
	// increasing end offset (exclusive) below which data is durable per the policy. With FsyncNever/FsyncInterval
	// it follows Append. Close waits for a running call and none runs after Close returns, so OnDurable must not
	// take a lock that the caller of Close (or of Append, which may wait on a roll's fsync) holds: publish with
	// atomics or under a leaf lock.
	OnDurable func(end int64)
	Logger    *slog.Logger // nil = discard
	// FileDeleteDelay: how long a segment deleted by retention keeps its files open so a reader holding a Chunk of
	// it can finish (0 = 1 minute, < 0 = close at once). Files are closed on the next SetStart/EnforceRetention
	// call after the delay, and by Close.
	FileDeleteDelay time.Duration
	// OnSwapStep, when set, is called by ReplaceSegment after each step of a segment swap with the step's name
	// (SwapSteps, in order), on the cleaner's goroutine; crash tests kill the process or cut the power there.
	OnSwapStep func(step string)
	// Raft opens the log as one raft group's log (internal/replica; see raft.go for the format): every batch
	// is a raft entry with its term as partitionLeaderEpoch, internal batches (batch.NewInternal) may be
	// appended, each segment gets a <base>.raft file, and the raft methods (RaftStart, RaftEnd, RaftTerm,
	// RaftOffset, ReadRaft, TruncateToIndex, Epochs) work. Raft's durability is SyncData; Fsync applies to
	// Kafka offsets as before. ReplaceSegment (compaction) is refused; retention moves RaftStart, which raft
	// can follow only with snapshots (not yet), so a raft log should run with RetentionMs -1. A log written
	// with Raft must be opened with it and the other way round (Open refuses the mix), so a log opened
	// without it keeps today's format, checks and speed.
	Raft bool
}

// SwapSteps names the steps of ReplaceSegment's write-new-then-swap, in order, as OnSwapStep reports them:
// the cleaned copy written to <base>.log.cleaned (not yet fsynced), fsynced, renamed over <base>.log, the
// directory fsynced (the swap is durable), and the new index files written.
var SwapSteps = []string{"cleaned-written", "cleaned-synced", "renamed", "dir-synced", "indexes-written"}

func (o Options) withDefaults() Options {
	if o.FS == nil {
		o.FS = vfs.OS
	}
	if o.Files == nil {
		o.Files = sharedDefaultCache()
	}
	o.SegmentBytes = segmentBytesOrDefault(o.SegmentBytes)
	if o.IndexIntervalBytes <= 0 {
		o.IndexIntervalBytes = DefaultIndexIntervalBytes
	}
	o.RetentionMs = retentionMsOrDefault(o.RetentionMs)
	if o.RetentionBytes == 0 {
		o.RetentionBytes = -1
	}
	if o.FsyncInterval <= 0 {
		o.FsyncInterval = DefaultFsyncInterval
	}
	if o.FileDeleteDelay == 0 {
		o.FileDeleteDelay = DefaultFileDeleteDelay
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

func segmentBytesOrDefault(v int64) int64 {
	if v <= 0 {
		return DefaultSegmentBytes
	}
	return min(v, maxSegmentBytes)
}

func retentionMsOrDefault(v int64) int64 {
	if v == 0 {
		return DefaultRetentionMs
	}
	return v
}

var (
	// ErrCorruption marks damage recovery must not repair silently: a bad batch in a segment other than the last,
	// a segment whose offsets do not continue the previous one, or an unreadable log-start-offset file.
	// Errors returned for it are *CorruptionError.
	ErrCorruption = errors.New("log: corruption")
	// ErrOffsetOutOfRange: an offset below Start() or above End() (Kafka OFFSET_OUT_OF_RANGE).
	ErrOffsetOutOfRange = errors.New("log: offset out of range")
	// ErrClosed: the log was closed or deleted.
	ErrClosed = errors.New("log: closed")
)

// CorruptionError says where recovery found damage. errors.Is(err, ErrCorruption) holds.
type CorruptionError struct {
	File   string // path of the damaged file
	Pos    int64  // byte position of the first bad batch (or -1)
	Offset int64  // offset the bad batch should have started at (or -1)
	Reason string
}

func (e *CorruptionError) Error() string {
	return fmt.Sprintf("log: corruption in %s at byte %d (offset %d): %s", e.File, e.Pos, e.Offset, e.Reason)
}

func (e *CorruptionError) Unwrap() error { return ErrCorruption }
