package partition

import (
	"os"
	"testing"
	"time"

	"github.com/kawa-broker/kawa/internal/batch"
	"github.com/kawa-broker/kawa/internal/log"
)

// crashCopy copies the partition's files as a crash would leave them: the
// partition is not closed, so nothing is snapshotted on the way out (every
// append here was fsynced).
func crashCopy(t *testing.T, dir string) string {
	t.Helper()
	dst := t.TempDir()
	if err := os.CopyFS(dst, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestProducerStateSurvivesTruncationAndCrash: DeleteRecords or retention
// removes every batch of a live producer, then the broker crashes. The
// reopened partition still answers the producer's last batch as a duplicate
// and accepts its next sequence. Regression: producer state was snapshotted
// only every 64 MiB and on Close, so recovery found neither a snapshot nor the
// deleted batches and appended the retry a second time.
func TestProducerStateSurvivesTruncationAndCrash(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		truncate func(t *testing.T, p *Partition)
	}{
		{"DeleteRecords", func(t *testing.T, p *Partition) {
			if start, err := p.DeleteRecords(-1); err != nil || start != 11 {
				t.Fatalf("DeleteRecords: start %d, %v; want 11", start, err)
			}
		}},
		{"retention", func(t *testing.T, p *Partition) {
			if err := p.EnforceRetention(time.Now()); err != nil || p.LogStart() != 10 {
				t.Fatalf("retention: start %d, %v; want 10", p.LogStart(), err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			// Tiny segments and timestamps of 1970 with retention.ms=1: each
			// batch rolls a segment, and retention deletes every closed one.
			p, err := Open("t", 0, dir, Options{Log: log.Options{Fsync: log.FsyncAlways, SegmentBytes: 64, RetentionMs: 1, RetentionBytes: -1}})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			appendBatch(t, p, txBatch(7, 0, 0, 5, false))
			last := txBatch(7, 0, 5, 5, false)
			appendBatch(t, p, append([]byte(nil), last...))
			appendBatch(t, p, txBatch(-1, -1, -1, 1, false)) // closes the segment of last
			tc.truncate(t, p)

			q := open(t, crashCopy(t, dir))
			defer q.Close()
			h, _ := batch.Validate(last)
			res, err := q.Append(last, h, false, time.Now())
			if err != nil || !res.Duplicate || res.BaseOffset != 5 {
				t.Fatalf("retry after crash = %+v, %v; want a duplicate at 5", res, err)
			}
			next := appendBatch(t, q, txBatch(7, 0, 10, 1, false))
			if next.BaseOffset != 11 || q.LogEnd() != 12 {
				t.Fatalf("next sequence at %d, log end %d; want 11 and 12", next.BaseOffset, q.LogEnd())
			}
		})
	}
}
