package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/kawa-broker/kawa/dedup"
)

// queries holds the relay's SQL for one dialect.
type queries struct {
	d dedup.Dialect
	rowsBeyondQ, ensureLease, acquireQ, renewQ, releaseQ, heartbeatQ, othersQ, leaveQ, selectQ,
	holdQ, chargeQ, buryQ, deleteOneQ string
}

func newQueries(d dedup.Dialect) queries {
	now := nowMS(d)
	r := func(q string) string { return rebind(d, q) }
	return queries{
		d:           d,
		rowsBeyondQ: r(`SELECT COUNT(*) FROM kawa_outbox WHERE shard >= ?`),
		ensureLease: r(`INSERT INTO kawa_outbox_leases (shard, owner, epoch, expires_at) VALUES (?, '', 0, 0) ON CONFLICT (shard) DO NOTHING`),
		acquireQ: r(`UPDATE kawa_outbox_leases SET owner = ?, epoch = epoch + 1, expires_at = ` + now + ` + ?
WHERE shard = ? AND (owner = '' OR expires_at <= ` + now + `) RETURNING epoch`),
		renewQ:   r(`UPDATE kawa_outbox_leases SET expires_at = ` + now + ` + ? WHERE shard = ? AND owner = ? AND epoch = ?`),
		releaseQ: r(`UPDATE kawa_outbox_leases SET owner = '', expires_at = 0 WHERE shard = ? AND owner = ? AND epoch = ?`),
		heartbeatQ: r(`INSERT INTO kawa_outbox_relays (owner, expires_at) VALUES (?, ` + now + ` + ?)
ON CONFLICT (owner) DO UPDATE SET expires_at = excluded.expires_at`),
		othersQ: r(`SELECT COUNT(*) FROM kawa_outbox_relays WHERE owner <> ? AND expires_at > ` + now),
		// Forget this relay, and relays gone for an hour.
		leaveQ: r(`DELETE FROM kawa_outbox_relays WHERE owner = ? OR expires_at < ` + now + ` - 3600000`),
		// A key with a dead row is parked: its later rows wait.
		selectQ: r(`SELECT o.id, o.topic, o.msg_key, o.value, o.headers, o.part, o.seq, o.message_id, o.created_at, o.attempts
FROM kawa_outbox o
WHERE o.shard = ? AND NOT EXISTS (SELECT 1 FROM kawa_outbox_dead d WHERE d.topic = o.topic AND d.msg_key = o.msg_key)
ORDER BY o.id LIMIT ?`),
		// Touching the lease row checks the epoch and, on PostgreSQL, locks
		// it, so a takeover waits for this transaction to end.
		holdQ:   r(`UPDATE kawa_outbox_leases SET epoch = epoch WHERE shard = ? AND owner = ? AND epoch = ?`),
		chargeQ: r(`UPDATE kawa_outbox SET attempts = attempts + 1, last_error = ? WHERE id = ?`),
		buryQ: r(`INSERT INTO kawa_outbox_dead (id, shard, topic, msg_key, value, headers, part, seq, message_id, created_at, attempts, error, died_at)
SELECT id, shard, topic, msg_key, value, headers, part, seq, message_id, created_at, attempts + 1, ?, ? FROM kawa_outbox WHERE id = ?`),
		deleteOneQ: r(`DELETE FROM kawa_outbox WHERE id = ?`),
	}
}

// row is one kawa_outbox row as the relay reads it.
type row struct {
	id        int64
	topic     string
	key       []byte
	value     []byte
	headers   []Header
	part      sql.NullInt64
	seq       int64
	msgID     string
	createdAt int64
	attempts  int
	bad       error // the row cannot be published as stored (malformed column)
}

func (rw *row) keyID() string { return rw.topic + "\x00" + string(rw.key) }

func (q queries) rowsBeyond(ctx context.Context, db *sql.DB, shards int) (n int64, err error) {
	err = db.QueryRowContext(ctx, q.rowsBeyondQ, shards).Scan(&n)
	return n, err
}

func (q queries) acquire(ctx context.Context, db *sql.DB, shard int, owner string, ttl time.Duration) (epoch int64, ok bool, err error) {
	if _, err := db.ExecContext(ctx, q.ensureLease, shard); err != nil {
		return 0, false, err
	}
	err = db.QueryRowContext(ctx, q.acquireQ, owner, ttl.Milliseconds(), shard).Scan(&epoch)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	return epoch, err == nil, err
}

func (q queries) renew(ctx context.Context, db *sql.DB, shard int, owner string, epoch int64, ttl time.Duration) (bool, error) {
	res, err := db.ExecContext(ctx, q.renewQ, ttl.Milliseconds(), shard, owner, epoch)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

func (q queries) release(ctx context.Context, db *sql.DB, shard int, owner string, epoch int64) error {
	_, err := db.ExecContext(ctx, q.releaseQ, shard, owner, epoch)
	return err
}

// otherRelays records this relay's heartbeat and counts the other live
// relays, lease holders or not: a relay that holds no shard yet must count,
// or the first relay would keep every shard.
func (q queries) otherRelays(ctx context.Context, db *sql.DB, owner string, ttl time.Duration) (n int, err error) {
	if _, err := db.ExecContext(ctx, q.heartbeatQ, owner, ttl.Milliseconds()); err != nil {
		return 0, err
	}
	err = db.QueryRowContext(ctx, q.othersQ, owner).Scan(&n)
	return n, err
}

func (q queries) leave(ctx context.Context, db *sql.DB, owner string) error {
	_, err := db.ExecContext(ctx, q.leaveQ, owner)
	return err
}

func (q queries) selectBatch(ctx context.Context, db *sql.DB, shard, limit int) ([]row, error) {
	rs, err := db.QueryContext(ctx, q.selectQ, shard, limit)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var out []row
	for rs.Next() {
		var rw row
		var hdr []byte
		if err := rs.Scan(&rw.id, &rw.topic, &rw.key, &rw.value, &hdr, &rw.part, &rw.seq, &rw.msgID, &rw.createdAt, &rw.attempts); err != nil {
			return nil, err
		}
		rw.headers, rw.bad = decodeHeaders(hdr)
		if rw.bad == nil && rw.part.Valid && (rw.part.Int64 < 0 || rw.part.Int64 > 1<<31-1) {
			rw.bad = fmt.Errorf("outbox: malformed part column %d", rw.part.Int64)
		}
		out = append(out, rw)
	}
	return out, rs.Err()
}

// settle ends a batch in one database transaction, provided this relay
// still holds the shard's lease at epoch: it deletes the rows in sent and
// charges one attempt to each charged row, moving a row that reaches
// maxAttempts (or cannot be published as stored) to the dead table. It
// returns the rows moved.
func (q queries) settle(ctx context.Context, db *sql.DB, shard int, owner string, epoch int64, sent []int64, charge []charged, maxAttempts int) ([]DeadRow, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, q.holdQ, shard, owner, epoch)
	if err != nil {
		return nil, err
	}
	if n, err := res.RowsAffected(); err != nil {
		return nil, err
	} else if n != 1 {
		return nil, fmt.Errorf("%w: shard %d epoch %d", ErrLeaseLost, shard, epoch)
	}
	for len(sent) > 0 {
		n := min(len(sent), 500)
		args := make([]any, 0, n+1)
		args = append(args, shard)
		for _, id := range sent[:n] {
			args = append(args, id)
		}
		if _, err := tx.ExecContext(ctx, rebind(q.d, `DELETE FROM kawa_outbox WHERE shard = ? AND id IN (`+placeholders(n)+`)`), args...); err != nil {
			return nil, err
		}
		sent = sent[n:]
	}
	var dead []DeadRow
	now := time.Now()
	for _, c := range charge {
		msg := c.err.Error()
		if c.row.bad == nil && c.row.attempts+1 < maxAttempts {
			if _, err := tx.ExecContext(ctx, q.chargeQ, msg, c.row.id); err != nil {
				return nil, err
			}
			continue
		}
		if _, err := tx.ExecContext(ctx, q.buryQ, msg, now.UnixMilli(), c.row.id); err != nil {
			return nil, err
		}
		if _, err := tx.ExecContext(ctx, q.deleteOneQ, c.row.id); err != nil {
			return nil, err
		}
		dead = append(dead, DeadRow{
			ID: c.row.id, Shard: shard, Topic: c.row.topic, Key: c.row.key, Seq: c.row.seq,
			MessageID: MessageID(c.row.msgID), CreatedAt: time.UnixMilli(c.row.createdAt),
			Attempts: c.row.attempts + 1, Error: msg, DiedAt: time.UnixMilli(now.UnixMilli()),
		})
	}
	if err := tx.Commit(); err != nil {
		return nil, err
	}
	return dead, nil
}

// DeadRow is a row of the dead table: a record that failed MaxAttempts
// publish attempts (or could not be read), with the last error. Its key is
// parked while it is there.
type DeadRow struct {
	ID        int64
	Shard     int
	Topic     string
	Key       []byte
	Seq       int64
	MessageID MessageID
	CreatedAt time.Time
	Attempts  int
	Error     string
	DiedAt    time.Time
}

// ListDead returns the dead rows in id order, at most limit (all if limit
// <= 0).
func (o *Outbox) ListDead(ctx context.Context, limit int) ([]DeadRow, error) {
	q := `SELECT id, shard, topic, msg_key, seq, message_id, created_at, attempts, error, died_at FROM kawa_outbox_dead ORDER BY id`
	if limit > 0 {
		q += ` LIMIT ` + strconv.Itoa(limit)
	}
	rs, err := o.db.QueryContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("outbox: list dead rows: %w", err)
	}
	defer rs.Close()
	var out []DeadRow
	for rs.Next() {
		var d DeadRow
		var created, died int64
		if err := rs.Scan(&d.ID, &d.Shard, &d.Topic, &d.Key, &d.Seq, &d.MessageID, &created, &d.Attempts, &d.Error, &died); err != nil {
			return nil, fmt.Errorf("outbox: list dead rows: %w", err)
		}
		d.CreatedAt, d.DiedAt = time.UnixMilli(created), time.UnixMilli(died)
		out = append(out, d)
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("outbox: list dead rows: %w", err)
	}
	return out, nil
}

// RetryDead moves dead row id back into the outbox with its attempts reset,
// keeping its id, message id and kawa-seq, so it is published before the
// later rows of its key; the key is unparked once it has no dead row left.
// Errors: ErrNotFound, or the database's error.
func (o *Outbox) RetryDead(ctx context.Context, id int64) error {
	return o.deadOp(ctx, id, `INSERT INTO kawa_outbox (id, shard, topic, msg_key, value, headers, part, seq, message_id, created_at, attempts, last_error)
SELECT id, shard, topic, msg_key, value, headers, part, seq, message_id, created_at, 0, error FROM kawa_outbox_dead WHERE id = ?`)
}

// DropDead deletes dead row id for good: its record is never published and
// consumers checking kawa-seq see a gap in its key's sequence. The key is
// unparked once it has no dead row left. Errors: ErrNotFound, or the
// database's error.
func (o *Outbox) DropDead(ctx context.Context, id int64) error {
	return o.deadOp(ctx, id, "")
}

func (o *Outbox) deadOp(ctx context.Context, id int64, before string) error {
	tx, err := o.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("outbox: dead row %d: %w", id, err)
	}
	defer tx.Rollback()
	// Lock the dead row before anything reads it: two concurrent retries of
	// one id would otherwise both copy it into kawa_outbox and the loser
	// fail on kawa_outbox's primary key instead of finding it gone. On
	// PostgreSQL the loser waits here and then sees no row (ErrNotFound); on
	// SQLite every transaction already holds the write lock from BEGIN.
	lock := `SELECT id FROM kawa_outbox_dead WHERE id = ?`
	if o.dialect == dedup.Postgres {
		lock += ` FOR UPDATE`
	}
	var got int64
	switch err := tx.QueryRowContext(ctx, rebind(o.dialect, lock), id).Scan(&got); {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("%w: %d", ErrNotFound, id)
	case err != nil:
		return fmt.Errorf("outbox: dead row %d: %w", id, err)
	}
	if before != "" {
		if _, err := tx.ExecContext(ctx, rebind(o.dialect, before), id); err != nil {
			return fmt.Errorf("outbox: dead row %d: %w", id, err)
		}
	}
	res, err := tx.ExecContext(ctx, rebind(o.dialect, `DELETE FROM kawa_outbox_dead WHERE id = ?`), id)
	if err != nil {
		return fmt.Errorf("outbox: dead row %d: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("outbox: dead row %d: %w", id, err)
	} else if n == 0 {
		return fmt.Errorf("%w: %d", ErrNotFound, id)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("outbox: dead row %d: %w", id, err)
	}
	return nil
}

// Status holds the outbox's gauges.
type Status struct {
	Unsent       int64         // rows in kawa_outbox, parked ones included
	OldestUnsent time.Duration // age of the oldest unsent row (0 if none), by the Enqueue caller's clock
	Dead         int64         // rows in the dead table
	ParkedKeys   int64         // keys with a dead row
	ParkedRows   int64         // unsent rows waiting behind a dead row of their key
	Leases       []Lease       // one per shard that has ever been leased
}

// Lease is one shard's lease row.
type Lease struct {
	Shard     int
	Owner     string // "" when released
	Epoch     int64
	ExpiresAt time.Time // by the database clock; the zero Time when released
}

// Status reads the outbox's gauges: a few COUNT queries, so call it at
// metric-scrape rates, not per record.
func (o *Outbox) Status(ctx context.Context) (Status, error) {
	var st Status
	var oldest sql.NullInt64
	err := o.db.QueryRowContext(ctx, `SELECT COUNT(*), MIN(created_at) FROM kawa_outbox`).Scan(&st.Unsent, &oldest)
	if err == nil && oldest.Valid {
		st.OldestUnsent = max(0, time.Since(time.UnixMilli(oldest.Int64)))
	}
	if err == nil {
		err = o.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM kawa_outbox_dead`).Scan(&st.Dead)
	}
	if err == nil {
		err = o.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM (SELECT DISTINCT topic, msg_key FROM kawa_outbox_dead) k`).Scan(&st.ParkedKeys)
	}
	if err == nil {
		err = o.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM kawa_outbox o WHERE EXISTS
(SELECT 1 FROM kawa_outbox_dead d WHERE d.topic = o.topic AND d.msg_key = o.msg_key)`).Scan(&st.ParkedRows)
	}
	if err != nil {
		return Status{}, fmt.Errorf("outbox: status: %w", err)
	}
	rs, err := o.db.QueryContext(ctx, `SELECT shard, owner, epoch, expires_at FROM kawa_outbox_leases ORDER BY shard`)
	if err != nil {
		return Status{}, fmt.Errorf("outbox: status: %w", err)
	}
	defer rs.Close()
	for rs.Next() {
		var l Lease
		var exp int64
		if err := rs.Scan(&l.Shard, &l.Owner, &l.Epoch, &exp); err != nil {
			return Status{}, fmt.Errorf("outbox: status: %w", err)
		}
		if l.Owner != "" { // a released lease stores expires_at 0 (releaseQ)
			l.ExpiresAt = time.UnixMilli(exp)
		}
		st.Leases = append(st.Leases, l)
	}
	if err := rs.Err(); err != nil {
		return Status{}, fmt.Errorf("outbox: status: %w", err)
	}
	return st, nil
}
