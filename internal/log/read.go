package log

import (
	"errors"
	"fmt"
	"io"
	"math"
	"sort"

	"github.com/kawa-broker/kawa/internal/batch"
	"github.com/kawa-broker/kawa/internal/vfs"
)

// Chunk is a byte range of whole batches inside one segment's .log file. With vfs.OS, File is an *os.File, so a
// fetch can send it with sendfile. The caller must not write to or close File.
type Chunk struct {
	File      vfs.File
	Pos, Size int64
}

// ReadResult is what Read found: Chunks in log order, FirstOffset the base offset of the first batch returned
// and NextOffset the offset after its last batch. Without chunks both are the requested offset.
type ReadResult struct {
	Chunks                  []Chunk
	FirstOffset, NextOffset int64
}

// Size is the total number of bytes in r's chunks.
func (r ReadResult) Size() int64 {
	var n int64
	for _, c := range r.Chunks {
		n += c.Size
	}
	return n
}

// segView is a segment and its size as seen under Log.mu.
type segView struct {
	s    *segment
	size int64
	pos  int64 // where to start scanning
}

// Read returns whole batches starting with the batch that contains offset. It stops before the first batch whose
// last offset is >= upTo (the caller passes the high watermark or the last stable offset) and before the total
// would exceed maxBytes, except that the first batch is returned whole even when larger than maxBytes (KIP-74).
// Reads may span segments. offset < Start() or > End() returns ErrOffsetOutOfRange; offset >= upTo or == End()
// returns no chunks. The first batch may begin below offset (and below Start() after DeleteRecords inside a
// batch); clients skip those records, as with Kafka. Batch headers are located with the sparse index and then scanned; CRCs are not checked
// here (clients check them).
//
// NB: a segment deleted by retention keeps its files open for Options.FileDeleteDelay, so a Chunk stays readable
// that long; after Close, reading a Chunk fails and the caller should retry with a new Read.
func (l *Log) Read(offset int64, maxBytes int, upTo int64) (ReadResult, error) {
	views, err := l.viewsFor(offset, maxBytes, upTo)
	if err != nil || len(views) == 0 {
		return ReadResult{FirstOffset: offset, NextOffset: offset}, err
	}
	sc := scanner{buf: make([]byte, 4096), raft: l.o.Raft}
	res := ReadResult{FirstOffset: offset, NextOffset: offset}
	var total int64
	for _, v := range views {
		sc.reset(v.s.log, v.size)
		for pos := v.pos; pos < v.size; {
			h, err := sc.header(pos)
			if err != nil {
				return ReadResult{}, err
			}
			switch {
			case h.LastOffset() < offset: // before the batch holding offset
				pos += int64(h.Size())
				continue
			case sc.raft && h.Internal(): // raft's own entry: never served, the range splits around it
				pos += int64(h.Size())
				continue
			case h.LastOffset() >= upTo:
				return res, nil
			case len(res.Chunks) > 0 && total+int64(h.Size()) > int64(maxBytes):
				return res, nil
			}
			res.addBatch(v.s.log, pos, h)
			total += int64(h.Size())
			pos += int64(h.Size())
		}
	}
	return res, nil
}

// viewsFor checks offset and snapshots the segments a read from offset may touch: the one holding offset and
// the following ones until their bytes cover maxBytes.
func (l *Log) viewsFor(offset int64, maxBytes int, upTo int64) ([]segView, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed.Load() {
		return nil, ErrClosed
	}
	start, end := l.start.Load(), l.end.Load()
	if offset < start || offset > end {
		return nil, fmt.Errorf("%w: offset %d, log holds [%d, %d)", ErrOffsetOutOfRange, offset, start, end)
	}
	if offset >= upTo || offset == end {
		return nil, nil
	}
	i := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].base > offset }) - 1
	first := l.segs[i]
	pos := lookupPos(first.offIdx, uint32(offset-first.base))
	views := []segView{{s: first, size: first.size, pos: pos}}
	covered := first.size - pos
	for _, s := range l.segs[i+1:] {
		if covered >= int64(maxBytes) {
			break
		}
		views = append(views, segView{s: s, size: s.size})
		covered += s.size
	}
	return views, nil
}

func (r *ReadResult) addBatch(f vfs.File, pos int64, h batch.Header) {
	if len(r.Chunks) == 0 {
		r.FirstOffset = h.BaseOffset
	}
	if n := len(r.Chunks); n > 0 && r.Chunks[n-1].File == f && r.Chunks[n-1].Pos+r.Chunks[n-1].Size == pos {
		r.Chunks[n-1].Size += int64(h.Size())
	} else {
		r.Chunks = append(r.Chunks, Chunk{File: f, Pos: pos, Size: int64(h.Size())})
	}
	r.NextOffset = h.LastOffset() + 1
}

// ReadBytes copies the chunks of r into one new buffer.
func (l *Log) ReadBytes(r ReadResult) ([]byte, error) {
	buf := make([]byte, r.Size())
	if err := l.ReadInto(buf, r); err != nil {
		return nil, err
	}
	return buf, nil
}

// ReadInto copies the chunks of r into buf, which must be exactly r.Size() bytes long; its prior contents do not
// matter (a fetch passes a reused, unzeroed buffer). A short read is io.ErrUnexpectedEOF, wrapped with the file
// and position.
func (l *Log) ReadInto(buf []byte, r ReadResult) error {
	if int64(len(buf)) != r.Size() {
		return fmt.Errorf("log: read buffer of %d bytes for %d bytes of chunks", len(buf), r.Size())
	}
	var at int64
	for _, c := range r.Chunks {
		n, err := c.File.ReadAt(buf[at:at+c.Size], c.Pos)
		if int64(n) < c.Size {
			if err == nil || errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("log: read %s at %d: %w", c.File.Name(), c.Pos, err)
		}
		at += c.Size
	}
	return nil
}

// scanner reads batch headers from a .log file through a small buffer, so walking many small batches costs few
// reads and large batches are skipped without reading their records.
type scanner struct {
	f      vfs.File
	raft   bool  // the log's Options.Raft: internal batches are valid (batch.Header.CheckRaft)
	limit  int64 // the segment size snapshot; nothing past it is read
	buf    []byte
	bufPos int64
	n      int
}

func (sc *scanner) reset(f vfs.File, limit int64) {
	sc.f, sc.limit, sc.n = f, limit, 0
}

// parseHeader decodes the batch header at the start of b (len(b) >= batch.HeaderSize) and checks what can be
// checked without the rest of the batch (batch.Header.Check).
func parseHeader(b []byte) (batch.Header, error) {
	h, err := batch.ParseHeader(b)
	if err == nil {
		err = h.Check()
	}
	return h, err
}

// header parses the batch header at pos and checks that the batch ends inside the snapshot.
func (sc *scanner) header(pos int64) (batch.Header, error) {
	if pos < sc.bufPos || pos+batch.HeaderSize > sc.bufPos+int64(sc.n) {
		want := min(int64(len(sc.buf)), sc.limit-pos)
		if want < batch.HeaderSize {
			return batch.Header{}, sc.corrupt(pos, "truncated batch header")
		}
		n, err := sc.f.ReadAt(sc.buf[:want], pos)
		if int64(n) < want {
			return batch.Header{}, fmt.Errorf("log: read %s at %d: %w", sc.f.Name(), pos, err)
		}
		sc.bufPos, sc.n = pos, n
	}
	off := pos - sc.bufPos
	h, err := parseHeaderFor(sc.buf[off:off+batch.HeaderSize], sc.raft)
	if err != nil {
		return h, sc.corrupt(pos, err.Error())
	}
	if pos+int64(h.Size()) > sc.limit {
		return h, sc.corrupt(pos, "batch runs past the segment end")
	}
	return h, nil
}

func (sc *scanner) corrupt(pos int64, reason string) error {
	return &CorruptionError{File: sc.f.Name(), Pos: pos, Offset: -1, Reason: reason}
}

// OffsetForTime returns the base offset of the first batch whose max timestamp is >= ts (ListOffsets by
// timestamp), but not below Start(); ok is false when no batch is that new. Records are not decoded, so the
// batch found may begin with records older than ts; a caller wanting the exact record refines within it.
func (l *Log) OffsetForTime(ts int64) (offset int64, ok bool) {
	start := l.Start()
	for _, v := range l.timeViews(ts) {
		sc := scanner{buf: make([]byte, 4096), raft: l.o.Raft}
		sc.reset(v.s.log, v.size)
		for pos := v.pos; pos < v.size; {
			h, err := sc.header(pos)
			if err != nil {
				return -1, false
			}
			if h.MaxTimestamp >= ts && h.LastOffset() >= start && !(sc.raft && h.Internal()) {
				return max(h.BaseOffset, start), true
			}
			pos += int64(h.Size())
		}
	}
	return -1, false
}

// timeViews snapshots the segments that hold a batch with max timestamp >= ts, each with the scan start the
// time index gives.
func (l *Log) timeViews(ts int64) []segView {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed.Load() {
		return nil
	}
	var views []segView
	for _, s := range l.segs {
		if s.size == 0 || s.maxTs < ts {
			continue
		}
		views = append(views, segView{s: s, size: s.size, pos: lookupPos(s.offIdx, lookupTime(s.timeIdx, ts))})
	}
	return views
}

// MaxTimestamp returns the largest batch max timestamp in the log and the last offset of the first batch
// carrying it (ListOffsets MAX_TIMESTAMP, KIP-734). Kafka answers the first record holding that timestamp;
// the log does not decode records, so the caller finds that record inside the batch (partition's
// recordForTime). An empty log returns (-1, -1).
func (l *Log) MaxTimestamp() (ts int64, offset int64) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	ts, offset = math.MinInt64, -1
	for _, s := range l.segs {
		if s.size > 0 && s.maxTs > ts {
			ts, offset = s.maxTs, s.maxTsAt
		}
	}
	if offset < 0 {
		return -1, -1
	}
	return ts, offset
}
