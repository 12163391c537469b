package dedup

import (
	"context"
	"fmt"
	"time"
)

// Prune deletes this scope's kawa_dedup keys (message-id, user and offset
// keys) first seen more than olderThan ago, in batches of at most 500 rows,
// each its own short transaction, so it never holds locks that handlers wait
// on for long. Run it outside Process (e.g. hourly). It returns the number of
// rows deleted. Sequence-mode rows (one per record key) are never pruned.
//
// Only one instance prunes a scope at a time: on PostgreSQL Prune takes
// pg_try_advisory_lock for the scope and returns (0, nil) at once if another
// session holds it; SQLite serialises writers anyway.
//
// A key pruned while its message can still be redelivered is forgotten: the
// redelivered copy is Applied again. Keep olderThan well above the longest
// redelivery delay (consumer lag, relay retries); 7 days is a common choice.
// Cancelling ctx stops between batches; what was deleted stays deleted.
func (s *Store) Prune(ctx context.Context, olderThan time.Duration) (int64, error) {
	cutoff := s.cfg.now().Add(-olderThan).UnixMicro()
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return 0, fmt.Errorf("dedup: prune: %w", err)
	}
	defer conn.Close()
	d := s.dialect
	if d == Postgres {
		lock := lockID("kawa_dedup.prune:" + s.scope)
		var got bool
		if err := conn.QueryRowContext(ctx, `SELECT pg_try_advisory_lock($1)`, lock).Scan(&got); err != nil {
			return 0, fmt.Errorf("dedup: prune: lock: %w", err)
		}
		if !got {
			return 0, nil
		}
		defer conn.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, lock)
	}
	del := `DELETE FROM kawa_dedup WHERE scope = ` + d.ph(1) + ` AND key IN (SELECT key FROM kawa_dedup WHERE scope = ` +
		d.ph(2) + ` AND seen_at < ` + d.ph(3) + ` LIMIT ` + d.ph(4) + `)`
	var total int64
	for {
		if err := ctx.Err(); err != nil {
			return total, fmt.Errorf("dedup: prune: %w", err)
		}
		r, err := conn.ExecContext(ctx, del, s.scope, s.scope, cutoff, s.cfg.pruneBatch)
		if err != nil {
			return total, fmt.Errorf("dedup: prune: %w", err)
		}
		n, err := r.RowsAffected()
		if err != nil {
			return total, fmt.Errorf("dedup: prune: %w", err)
		}
		total += n
		if n < int64(s.cfg.pruneBatch) {
			return total, nil
		}
	}
}
