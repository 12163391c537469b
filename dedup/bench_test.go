package dedup_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/kawa-broker/kawa/internal/sqltest"
)

// BenchmarkProcess measures records/s of the same handler transaction (one
// inventory row decremented with a version bump) run plainly and through
// Process with a new message id per record, on each backend, one record at a
// time. Each iteration runs one plain transaction and one Process call,
// alternating which goes first, and times them separately, so that the
// machine's noise hits both alike; the ratio metric is dedup/plain records/s
// from that one run.
//
//	go test -run '^$' -bench Process -benchtime 3000x ./dedup
func BenchmarkProcess(b *testing.B) {
	for _, backend := range []string{"sqlite", "postgres"} {
		b.Run(backend, func(b *testing.B) {
			be := sqltest.New(b, backend)
			setup(b, be)
			if _, err := be.DB.Exec(`INSERT INTO inventory (id, count, version) VALUES ('p1', 1000000000, 0)`); err != nil {
				b.Fatal(err)
			}
			update := `UPDATE inventory SET count = count - 1, version = version + 1 WHERE id = ` + ph(be, 1)
			handler := func(ctx context.Context, tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, update, "p1")
				return err
			}
			ctx := context.Background()
			plain := func() error {
				tx, err := be.DB.BeginTx(ctx, nil)
				if err != nil {
					return err
				}
				if err := handler(ctx, tx); err != nil {
					tx.Rollback()
					return err
				}
				return tx.Commit()
			}
			s := newStore(b, be, "bench")
			var plainTime, dedupTime time.Duration
			i := 0
			for b.Loop() {
				i++
				withDedup := func() error {
					_, err := s.Process(ctx, msg(fmt.Sprint("m", i)), handler)
					return err
				}
				first, second, t1, t2 := plain, withDedup, &plainTime, &dedupTime
				if i%2 == 0 {
					first, second, t1, t2 = withDedup, plain, &dedupTime, &plainTime
				}
				start := time.Now()
				if err := first(); err != nil {
					b.Fatal(err)
				}
				mid := time.Now()
				if err := second(); err != nil {
					b.Fatal(err)
				}
				*t1 += mid.Sub(start)
				*t2 += time.Since(mid)
			}
			plainRate, dedupRate := float64(i)/plainTime.Seconds(), float64(i)/dedupTime.Seconds()
			b.ReportMetric(plainRate, "plain-records/s")
			b.ReportMetric(dedupRate, "dedup-records/s")
			b.ReportMetric(dedupRate/plainRate, "ratio")
		})
	}
}
