package broker

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/batch"
	"github.com/kawa-broker/kawa/internal/log"
	"github.com/kawa-broker/kawa/internal/partition"
)

// countingReader counts the bytes a partition's reads return.
type countingReader struct {
	p    *partition.Partition
	read int
}

func (c *countingReader) Read(offset int64, maxBytes int, iso int8) (partition.ReadResult, error) {
	res, err := c.p.Read(offset, maxBytes, iso)
	c.read += len(res.Records)
	return res, err
}

// A ShareFetch that can acquire 10 records reads about what holds them,
// not its max_bytes: over 2,000 one-record batches of ~1 KiB (about 2 MiB),
// shareRead with 50 MiB of max_bytes used to read and list all of them.
// It still lists enough batches for the records wanted, and reads the whole
// log when the window allows it.
func TestShareReadBoundedByWant(t *testing.T) {
	p, err := partition.Open("q", 0, t.TempDir(), partition.Options{Log: log.Options{Fsync: log.FsyncNever}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	val := make([]byte, 1000)
	const n = 2000
	for i := 0; i < n; i++ {
		b := batch.Encode(batch.Header{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, []kmsg.Record{{Value: val}})
		h, err := batch.ParseHeader(b)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Append(b, h, false, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.WaitDurable(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		want     int
		maxBytes int // most the read may return
	}{{10, shareReadFirst + 2<<10}, {500, 700 << 10}, {n, 3 << 20}} {
		r := &countingReader{p: p}
		spans, raws, err := shareRead(r, 0, n, c.want, 50<<20, partition.ReadUncommitted)
		if err != nil {
			t.Fatal(err)
		}
		if len(spans) < c.want || len(raws) != len(spans) || spans[0].First != 0 {
			t.Errorf("want %d: listed %d batches from %d, want at least %d from 0", c.want, len(spans), spans[0].First, c.want)
		}
		if r.read > c.maxBytes {
			t.Errorf("want %d: read %d bytes, want at most %d", c.want, r.read, c.maxBytes)
		}
		t.Logf("want %d records: read %d bytes, %d batches", c.want, r.read, len(spans))
	}
}
