package partition

import (
	"github.com/kawa-broker/kawa/internal/batch"
)

// recordForTime narrows a batch-level ListOffsets answer to the record Kafka
// returns: in the batch holding offset off, the first record at or above the
// log start whose timestamp is >= ts, with that record's own timestamp. For
// a timestamp query off is the batch's first offset (or the log start); for
// MAX_TIMESTAMP it may be any offset of the batch holding the maximum, and
// the answer is the first record carrying it (earliest wins ties, as
// Kafka's UnifiedLog since KAFKA-16310). The log only indexes batches (it never decodes records), so
// this is the one place that does, and only for one batch per request.
//
// NB: a batch whose header promises a timestamp its records do not carry,
// or one that cannot be read or decoded, keeps the batch-level answer
// (off, ts) rather than failing the request.
func (p *Partition) recordForTime(off, ts int64) (offset, timestamp int64) {
	r, err := p.log.Read(off, 1, p.HighWatermark())
	if err != nil || len(r.Chunks) == 0 {
		return off, ts
	}
	bs, err := p.log.ReadBytes(r)
	if err != nil {
		return off, ts
	}
	var first []byte
	if _, err := batch.Iterate(bs, func(_ batch.Header, b []byte) bool { first = b; return false }); err != nil || first == nil {
		return off, ts
	}
	h, err := batch.ParseHeader(first)
	if err != nil {
		return off, ts
	}
	recs, err := batch.Records(first)
	if err != nil {
		return off, ts
	}
	from := p.log.Start()
	for _, rec := range recs {
		o := h.BaseOffset + int64(rec.OffsetDelta)
		t := h.FirstTimestamp + rec.TimestampDelta64
		if h.LogAppendTime() {
			t = h.MaxTimestamp // every record of a LogAppendTime batch carries the append time
		}
		if o >= from && t >= ts {
			return o, t
		}
	}
	return off, ts
}
