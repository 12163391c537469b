package broker_test

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kawa-broker/kawa/internal/kawatest"
)

// TestCompactionCompressedBatches: franz-go produces 1,000 keys x 4 versions and tombstones for every fifth key
// in gzip, snappy, lz4 and zstd batches. After two passes (delete.retention.ms=0) every live key is read once at
// its latest value from batches still compressed with the producer's codec (the cleaner compresses what it
// rewrites again), the tombstoned keys are gone and exactly the live records remain, also after a restart.
func TestCompactionCompressedBatches(t *testing.T) {
	t.Parallel()
	codecs := []struct {
		name  string
		codec kgo.CompressionCodec
		attr  uint8 // the codec in a record batch's attributes
	}{
		{"gzip", kgo.GzipCompression(), 1}, {"snappy", kgo.SnappyCompression(), 2},
		{"lz4", kgo.Lz4Compression(), 3}, {"zstd", kgo.ZstdCompression(), 4},
	}
	for _, c := range codecs {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			k := kawatest.NewBroker(t)
			compactedTopic(k, "z", nil)
			cl := k.Client(kgo.DefaultProduceTopic("z"), kgo.ProducerBatchCompression(c.codec), kgo.ProducerBatchMaxBytes(8<<10))
			const keys, versions = 1000, 4
			want := map[string]string{}
			var recs []*kgo.Record
			for v := range versions {
				for i := range keys {
					key, val := fmt.Sprintf("k%d", i), fmt.Sprintf("value %d of key %d, compressible compressible", v, i)
					recs = append(recs, &kgo.Record{Key: []byte(key), Value: []byte(val)})
					want[key] = val
				}
			}
			for i := 0; i < keys; i += 5 {
				recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i)})
				delete(want, fmt.Sprintf("k%d", i))
			}
			produceAll(t, cl, recs)
			// Uncompressed, so 20 KiB of them roll the 16 KiB segment whatever the codec.
			rollPast(t, k.Client(kgo.ProducerBatchCompression(kgo.NoCompression())), "z", "roll", 20)
			check := func(stage string) {
				t.Helper()
				got := readAll(t, k, "z")
				if len(got) != len(want)+20 {
					t.Fatalf("%s: %d records, want %d live + 20", stage, len(got), len(want))
				}
				seen := map[string]bool{}
				for _, r := range got {
					key := string(r.Key)
					if key[0] != 'k' {
						continue
					}
					if seen[key] || want[key] != string(r.Value) {
						t.Fatalf("%s: %s=%q at %d (seen before %v), want %q", stage, key, r.Value, r.Offset, seen[key], want[key])
					}
					seen[key] = true
					if got := r.Attrs.CompressionType(); got != c.attr {
						t.Fatalf("%s: %s at %d read from a batch with codec %d, want %d", stage, key, r.Offset, got, c.attr)
					}
				}
			}
			cleanPasses(t, k, 2)
			check("after cleaning")
			if st := k.B.CleanerStats(); st.BytesWritten >= st.BytesRead || st.RecordsRemoved != keys*(versions-1)+2*keys/5 {
				t.Fatalf("cleaner stats %+v: want fewer bytes written than read and %d records removed", st, keys*(versions-1)+2*keys/5)
			}
			k = k.Restart()
			check("after restart")
		})
	}
}
