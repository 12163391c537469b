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
	d := s.dialect
	del := `DELETE FROM kawa_dedup WHERE scope = ` + d.ph(1) + ` AND key IN (SELECT key FROM kawa_dedup WHERE scope = ` +
		d.ph(2) + ` AND seen_at < ` + d.ph(3) + ` LIMIT ` + d.ph(4) + `)`
	return s.deleteBatches(ctx, "prune", del, s.scope, s.scope, cutoff)
}

// PruneOffsets deletes this scope's offset keys (those of records that had
// neither a kawa-message-id nor a KeyFunc key) of one topic partition below
// committed, in the same small batches as Prune. Call it with the consumer
// group's committed offset for the partition: records below it are not
// redelivered, so their keys can go long before Prune's window. It is unsafe
// when the consumer can move back below committed (a seek, or
// auto.offset.reset=earliest after the group's offsets expire): records
// processed again would then run their handler again. Keys made with
// WithTopicIDs are matched by the topic name as well.
func (s *Store) PruneOffsets(ctx context.Context, topic string, partition int32, committed int64) (int64, error) {
	d := s.dialect
	sel := `SELECT key FROM kawa_dedup WHERE scope = ` + d.ph(2) + ` AND topic = ` + d.ph(3) + ` AND "partition" = ` + d.ph(4) +
		` AND "offset" < ` + d.ph(5) + ` AND ` + offsetKeys + ` LIMIT ` + d.ph(6)
	del := `DELETE FROM kawa_dedup WHERE scope = ` + d.ph(1) + ` AND key IN (` + sel + `)`
	return s.deleteBatches(ctx, "prune-offsets", del, s.scope, s.scope, topic, partition, committed)
}

// deleteBatches runs del (whose last placeholder is the batch size) until it
// deletes less than a batch, each run its own statement, under the scope's
// advisory lock for what on PostgreSQL. It returns the rows deleted.
func (s *Store) deleteBatches(ctx context.Context, what, del string, args ...any) (int64, error) {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return 0, fmt.Errorf("dedup: %s: %w", what, err)
	}
	defer conn.Close()
	if s.dialect == Postgres {
		lock := lockID("kawa_dedup." + what + ":" + s.scope)
		var got bool
		if err := conn.QueryRowContext(ctx, `SELECT pg_try_advisory_lock($1)`, lock).Scan(&got); err != nil {
			return 0, fmt.Errorf("dedup: %s: lock: %w", what, err)
		}
		if !got {
			return 0, nil
		}
		defer conn.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, lock)
	}
	args = append(args, s.cfg.pruneBatch)
	var total int64
	for {
		if err := ctx.Err(); err != nil {
			return total, fmt.Errorf("dedup: %s: %w", what, err)
		}
		r, err := conn.ExecContext(ctx, del, args...)
		if err != nil {
			return total, fmt.Errorf("dedup: %s: %w", what, err)
		}
		n, err := r.RowsAffected()
		if err != nil {
			return total, fmt.Errorf("dedup: %s: %w", what, err)
		}
		total += n
		if n < int64(s.cfg.pruneBatch) {
			return total, nil
		}
	}
}
