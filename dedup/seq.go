package dedup

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// advanceSeq is sequence mode's key step, run first in Process's
// transaction. Incoming sequence n against the stored s of (scope, source,
// topic, record key):
//
//	no row      → insert n as the baseline, Applied (EventBaseline when n > 1)
//	n == s+1    → s := n, Applied
//	n == s      → Duplicate
//	n <  s      → Stale
//	n >  s+1    → Gap (nothing written)
//
// The conditional UPDATE takes the row lock, so a concurrent copy of the
// same sequence waits and then finds seq = n (Duplicate); on PostgreSQL's
// READ COMMITTED the waiting UPDATE re-evaluates its WHERE against the
// committed row. The loop covers the races between the UPDATE, the SELECT
// and the baseline INSERT with another transaction on the same key.
func (s *Store) advanceSeq(ctx context.Context, tx *sql.Tx, k key) (Result, error) {
	d := s.dialect
	now := s.cfg.now().UnixMicro()
	where := ` WHERE scope = ` + d.ph(3) + ` AND source = ` + d.ph(4) + ` AND topic = ` + d.ph(5) + ` AND key = ` + d.ph(6)
	for range 3 {
		r, err := tx.ExecContext(ctx, `UPDATE kawa_dedup_seq SET seq = `+d.ph(1)+`, updated_at = `+d.ph(2)+where+` AND seq = `+d.ph(7),
			k.seq, now, s.scope, k.source, k.topic, k.rkey, k.seq-1)
		if err != nil {
			return 0, fmt.Errorf("dedup: advance sequence: %w", err)
		}
		if n, err := r.RowsAffected(); err != nil {
			return 0, fmt.Errorf("dedup: advance sequence: %w", err)
		} else if n == 1 {
			return Applied, nil
		}
		var stored int64
		err = tx.QueryRowContext(ctx, `SELECT seq FROM kawa_dedup_seq WHERE scope = `+d.ph(1)+` AND source = `+d.ph(2)+
			` AND topic = `+d.ph(3)+` AND key = `+d.ph(4), s.scope, k.source, k.topic, k.rkey).Scan(&stored)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			r, err := tx.ExecContext(ctx, `INSERT INTO kawa_dedup_seq (scope, source, topic, key, seq, updated_at) VALUES (`+
				d.ph(1)+`, `+d.ph(2)+`, `+d.ph(3)+`, `+d.ph(4)+`, `+d.ph(5)+`, `+d.ph(6)+`) ON CONFLICT (scope, source, topic, key) DO NOTHING`,
				s.scope, k.source, k.topic, k.rkey, k.seq, now)
			if err != nil {
				return 0, fmt.Errorf("dedup: sequence baseline: %w", err)
			}
			if n, err := r.RowsAffected(); err != nil {
				return 0, fmt.Errorf("dedup: sequence baseline: %w", err)
			} else if n == 1 {
				if k.seq > 1 {
					s.event(EventBaseline)
				}
				return Applied, nil
			}
			continue // another transaction created the row first: classify again
		case err != nil:
			return 0, fmt.Errorf("dedup: read sequence: %w", err)
		case k.seq == stored:
			return Duplicate, nil
		case k.seq < stored:
			return Stale, nil
		case k.seq > stored+1:
			return Gap, &GapError{Source: k.source, Topic: k.topic, Key: k.rkey, Stored: stored, Got: k.seq}
		}
		// stored+1 == k.seq: another transaction moved the row between our
		// UPDATE and SELECT; try the UPDATE again.
	}
	return 0, errors.New("dedup: sequence row keeps changing under concurrent updates")
}

// GapError is the error Process returns with Result Gap: the record's kawa-seq
// (Got) is more than one above the highest applied (Stored) for its source,
// topic and key. errors.Is(err, ErrGap) holds.
type GapError struct {
	Source, Topic string
	Key           []byte
	Stored, Got   int64
}

func (e *GapError) Error() string {
	return fmt.Sprintf("dedup: sequence gap for source %q topic %q key %q: got %d, highest applied %d (missing %d..%d)",
		e.Source, e.Topic, e.Key, e.Got, e.Stored, e.Stored+1, e.Got-1)
}
func (e *GapError) Is(t error) bool { return t == ErrGap }

// SetSequence sets the highest applied kawa-seq of (source, topic, record
// key) in this scope to seq, creating the row if needed, so that seq+1 is the
// next one applied. It is the operator's way past a Gap that will never fill
// (an outbox row dropped as dead, say), and lets a consumer set its baseline
// explicitly instead of taking the first sequence it sees. seq must be >= 0
// (0: the next applied is 1).
func (s *Store) SetSequence(ctx context.Context, source, topic string, key []byte, seq int64) error {
	if err := checkText(HeaderSource, source); err != nil {
		return err
	}
	if seq < 0 || len(key) > MaxKeyLen {
		return fmt.Errorf("%w: sequence %d, record key of %d bytes", ErrInvalidKey, seq, len(key))
	}
	d := s.dialect
	_, err := s.db.ExecContext(ctx, `INSERT INTO kawa_dedup_seq (scope, source, topic, key, seq, updated_at) VALUES (`+
		d.ph(1)+`, `+d.ph(2)+`, `+d.ph(3)+`, `+d.ph(4)+`, `+d.ph(5)+`, `+d.ph(6)+`) ON CONFLICT (scope, source, topic, key) DO UPDATE SET seq = excluded.seq, updated_at = excluded.updated_at`,
		s.scope, source, topic, append([]byte{}, key...), seq, s.cfg.now().UnixMicro())
	if err != nil {
		return fmt.Errorf("dedup: set sequence: %w", err)
	}
	return nil
}
