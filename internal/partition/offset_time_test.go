package partition

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/batch"
)

// timedBatch builds one uncompressed batch whose record i has timestamp
// first+step*i.
func timedBatch(first, step int64, n int, attrs int16) []byte {
	recs := make([]kmsg.Record, n)
	for i := range recs {
		recs[i].TimestampDelta64 = step * int64(i)
		recs[i].Value = []byte{byte(i)}
	}
	h := batch.Header{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Attributes: attrs,
		FirstTimestamp: first, MaxTimestamp: first + step*int64(n-1)}
	return batch.Encode(h, recs)
}

// TestListOffsetByTimeIsPerRecord is a regression test: ListOffsets by
// timestamp answered the base offset of the batch holding the first newer
// record, and echoed the requested timestamp, so a 10-record batch with
// timestamps 1000..10000 answered (0, 4500) for 4500 where Kafka answers
// (4, 5000). segmentio/kafka-go's Conn.ReadOffset exposed it.
func TestListOffsetByTimeIsPerRecord(t *testing.T) {
	t.Parallel()
	p := open(t, t.TempDir())
	defer p.Close()
	appendBatch(t, p, timedBatch(1000, 1000, 10, 0)) // offsets 0-9, ts 1000..10000
	appendBatch(t, p, timedBatch(20000, 1000, 5, 0)) // offsets 10-14, ts 20000..24000
	for _, c := range []struct{ ts, off, gotTs int64 }{
		{0, 0, 1000},
		{1000, 0, 1000},
		{4500, 4, 5000},
		{10000, 9, 10000},
		{10001, 10, 20000},
		{22000, 12, 22000},
		{24001, -1, -1},
		{-3, 14, 24000}, // max timestamp: the record carrying it
	} {
		off, ts := p.ListOffset(c.ts, ReadUncommitted)
		if off != c.off || ts != c.gotTs {
			t.Errorf("ListOffset(%d) = (%d, %d), want (%d, %d)", c.ts, off, ts, c.off, c.gotTs)
		}
	}
	// After DeleteRecords inside the first batch, nothing below the log
	// start is answered.
	if _, err := p.DeleteRecords(6); err != nil {
		t.Fatal(err)
	}
	if off, ts := p.ListOffset(2000, ReadUncommitted); off != 6 || ts != 7000 {
		t.Errorf("after DeleteRecords(6): ListOffset(2000) = (%d, %d), want (6, 7000)", off, ts)
	}
}

// TestListOffsetByTimeLogAppendTime: in a LogAppendTime batch every record
// carries the batch's max timestamp (the append time), so the first record
// at or after the log start matches.
func TestListOffsetByTimeLogAppendTime(t *testing.T) {
	t.Parallel()
	p := open(t, t.TempDir())
	defer p.Close()
	b := timedBatch(1000, 1000, 4, 0)
	h, err := batch.Validate(b)
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Append(b, h, true, time.UnixMilli(50000))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.WaitDurable(t.Context(), res.LastOffset+1); err != nil {
		t.Fatal(err)
	}
	if off, ts := p.ListOffset(40000, ReadUncommitted); off != 0 || ts != 50000 {
		t.Errorf("ListOffset(40000) = (%d, %d), want (0, 50000)", off, ts)
	}
}
