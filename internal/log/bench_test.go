package log

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	"github.com/kawa-broker/kawa/internal/batch"
	"github.com/kawa-broker/kawa/internal/vfs"
)

// BenchmarkAppendWaitDurable: many producers (16 per CPU) append 1 KiB batches under one partition lock and wait
// for durability, on real files. With fsync=always throughput follows this disk's group-commit curve
// (bench-protocol.md); bytes/fsync says how much each fsync carried.
func BenchmarkAppendWaitDurable(b *testing.B) {
	for _, p := range []FsyncPolicy{FsyncAlways, FsyncNever} {
		b.Run("fsync="+p.String(), func(b *testing.B) {
			l, err := Open(filepath.Join(b.TempDir(), "bench-0"), Options{FS: vfs.OS, Fsync: p, SegmentBytes: 64 << 20})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			const size = 1024
			template := mkBatch(0, 1, size-batch.HeaderSize, 'b')
			var mu sync.Mutex // the partition lock
			b.SetBytes(size)
			b.SetParallelism(16)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				buf := make([]byte, size)
				for pb.Next() {
					copy(buf, template)
					mu.Lock()
					base, err := l.Append(buf)
					mu.Unlock()
					if err == nil {
						err = l.WaitDurable(context.Background(), base+1)
					}
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			if st := l.Stats(); st.Fsyncs > 0 {
				b.ReportMetric(float64(st.FsyncedSize)/float64(st.Fsyncs), "bytes/fsync")
			}
		})
	}
}
