package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kawa-broker/kawa/dedup"
	"github.com/kawa-broker/kawa/outbox"
)

// topicRecord is one OrderCreated record as read back from the topic.
type topicRecord struct {
	partition int32
	offset    int64
	messageID string
	seq       int64
	o         order
}

// topicContents is the orders topic read with read_committed.
type topicContents struct {
	records  []topicRecord
	lastData map[int32]int64 // offset of each partition's last data record
}

// readTopic reads the whole orders topic with read_committed. Control
// records (transaction markers) are kept so that reading can stop exactly at
// each partition's end offset; they are not returned as records.
func readTopic(ctx context.Context, c *config) (*topicContents, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seedBrokers()...))
	if err != nil {
		return nil, err
	}
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, c.topic())
	cl.Close()
	if err != nil {
		return nil, err
	}
	if err := ends.Error(); err != nil {
		return nil, err
	}
	want := map[int32]kgo.Offset{}
	remaining := map[int32]int64{} // partition -> end offset still to reach
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = kgo.NewOffset().AtStart()
			remaining[o.Partition] = o.Offset
		}
	})
	t := &topicContents{lastData: map[int32]int64{}}
	if len(remaining) == 0 {
		return t, nil
	}
	rd, err := kgo.NewClient(kgo.SeedBrokers(c.seedBrokers()...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{c.topic(): want}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for len(remaining) > 0 {
		fs := rd.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("reading %s: %w (partitions left: %v)", c.topic(), err, remaining)
		}
		var ferr error
		fs.EachError(func(_ string, p int32, err error) { ferr = fmt.Errorf("reading %s/%d: %w", c.topic(), p, err) })
		if ferr != nil {
			return nil, ferr
		}
		for _, r := range fs.Records() {
			if end, ok := remaining[r.Partition]; ok && r.Offset >= end-1 {
				delete(remaining, r.Partition)
			}
			if r.Attrs.IsControl() {
				continue
			}
			tr := topicRecord{partition: r.Partition, offset: r.Offset}
			for _, h := range r.Headers {
				switch h.Key {
				case dedup.HeaderMessageID:
					tr.messageID = string(h.Value)
				case dedup.HeaderSequence:
					tr.seq, _ = strconv.ParseInt(string(h.Value), 10, 64)
				}
			}
			if err := json.Unmarshal(r.Value, &tr.o); err != nil {
				return nil, fmt.Errorf("%s/%d@%d: malformed value %q", c.topic(), r.Partition, r.Offset, r.Value)
			}
			if string(r.Key) != tr.o.Product {
				return nil, fmt.Errorf("%s/%d@%d: key %q, but the order is for %s", c.topic(), r.Partition, r.Offset, r.Key, tr.o.Product)
			}
			t.records = append(t.records, tr)
			t.lastData[r.Partition] = r.Offset
		}
	}
	return t, nil
}

type verifyStats struct {
	applied    int
	records    int
	duplicates int
}

// verify checks the run exactly; the first discrepancy is the error.
//   - The topic holds only committed orders (never a rolled-back one), each
//     at least once, in kawa-seq order per key; with the transactional relay
//     exactly once (one record per message id, read_committed).
//   - applied holds exactly the committed order ids, each with its product.
//   - Per product, applied's kawa-seq values in apply order are 1..n.
//   - Per product, stock = initial - sum(qty) and version = n.
//   - dedup's rows: per product one sequence row at n (sequence mode), or
//     exactly the committed message ids (message-id mode).
//   - Idempotent relay: duplicates are counted, not bounded here: besides a
//     crash, a database error between the acks and the row delete publishes
//     the batch again (the crash test bounds them by its crashes).
//   - kawa_outbox and kawa_outbox_dead are empty; the dead-letter topic is
//     empty.
func verify(ctx context.Context, db *sql.DB, d dedup.Dialect, adm *kadm.Client, c *config, w *workload, t *topicContents) (verifyStats, error) {
	st := verifyStats{records: len(t.records)}
	if err := verifyTopic(c, w, t, &st); err != nil {
		return st, err
	}
	if err := verifyApplied(ctx, db, w, &st); err != nil {
		return st, err
	}
	if err := verifyInventory(ctx, db, c, w); err != nil {
		return st, err
	}
	if err := verifyDedup(ctx, db, d, c, w, t); err != nil {
		return st, err
	}
	var unsent, dead int64
	if err := db.QueryRowContext(ctx, `SELECT (SELECT COUNT(*) FROM kawa_outbox), (SELECT COUNT(*) FROM kawa_outbox_dead)`).Scan(&unsent, &dead); err != nil {
		return st, err
	}
	if unsent != 0 || dead != 0 {
		return st, fmt.Errorf("outbox: %d unsent and %d dead rows left, want none", unsent, dead)
	}
	if n, err := dltRecords(ctx, adm, c); err != nil {
		return st, err
	} else if n != 0 {
		return st, fmt.Errorf("dead-letter topic %s holds %d records, want none", c.dlt(), n)
	}
	return st, nil
}

func verifyTopic(c *config, w *workload, t *topicContents, st *verifyStats) error {
	byID := map[string]int{} // order id -> records
	seqOf := map[string]int64{}
	msgOf := map[string]string{}
	lastSeq := map[string]int64{} // product -> highest kawa-seq seen so far in offset order
	for _, r := range t.records {
		id := r.o.OrderID
		if w.rolledBack[id] {
			return fmt.Errorf("topic: %d@%d holds order %s, whose transaction rolled back", r.partition, r.offset, id)
		}
		want, ok := w.committed[id]
		if !ok {
			return fmt.Errorf("topic: %d@%d holds order %s, which the application never committed", r.partition, r.offset, id)
		}
		if r.o != want {
			return fmt.Errorf("topic: %d@%d holds %+v, the application committed %+v", r.partition, r.offset, r.o, want)
		}
		if r.messageID == "" || r.seq < 1 {
			return fmt.Errorf("topic: %d@%d (order %s) lacks %s or %s", r.partition, r.offset, id, dedup.HeaderMessageID, dedup.HeaderSequence)
		}
		if s, seen := seqOf[id]; seen && s != r.seq {
			return fmt.Errorf("topic: order %s carries kawa-seq %d and %d", id, s, r.seq)
		}
		seqOf[id] = r.seq
		if m, seen := msgOf[id]; seen && m != r.messageID {
			return fmt.Errorf("topic: order %s carries message ids %s and %s", id, m, r.messageID)
		}
		msgOf[id] = r.messageID
		// A duplicate may repeat a suffix of a key's sequence (a batch
		// published again), but the sequence never skips ahead.
		if r.seq > lastSeq[r.o.Product]+1 {
			return fmt.Errorf("topic: %d@%d: %s kawa-seq %d after %d (a gap)", r.partition, r.offset, r.o.Product, r.seq, lastSeq[r.o.Product])
		}
		lastSeq[r.o.Product] = max(lastSeq[r.o.Product], r.seq)
		byID[id]++
	}
	for id := range w.committed {
		n := byID[id]
		if n == 0 {
			return fmt.Errorf("topic: committed order %s is missing", id)
		}
		if n > 1 && c.mode() == outbox.Transactional {
			return fmt.Errorf("topic: order %s appears %d times with the transactional relay (read_committed), want once", id, n)
		}
		st.duplicates += n - 1
	}
	return nil
}

func verifyApplied(ctx context.Context, db *sql.DB, w *workload, st *verifyStats) error {
	rows, err := db.QueryContext(ctx, `SELECT order_id, product, seq FROM applied ORDER BY apply_order`)
	if err != nil {
		return err
	}
	defer rows.Close()
	seen := map[string]bool{}
	next := map[string]int64{} // product -> next kawa-seq expected
	for rows.Next() {
		var id, product string
		var seq int64
		if err := rows.Scan(&id, &product, &seq); err != nil {
			return err
		}
		if w.rolledBack[id] {
			return fmt.Errorf("applied: order %s, whose transaction rolled back", id)
		}
		o, ok := w.committed[id]
		if !ok {
			return fmt.Errorf("applied: order %s, which the application never committed", id)
		}
		if seen[id] {
			return fmt.Errorf("applied: order %s twice", id)
		}
		seen[id] = true
		if product != o.Product {
			return fmt.Errorf("applied: order %s for %s, committed for %s", id, product, o.Product)
		}
		if want := next[product] + 1; seq != want {
			return fmt.Errorf("applied: %s's kawa-seq %d (order %s) in apply order after %d, want %d", product, seq, id, next[product], want)
		}
		next[product] = seq
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for id := range w.committed {
		if !seen[id] {
			return fmt.Errorf("applied: committed order %s is missing", id)
		}
	}
	st.applied = len(seen)
	return nil
}

func verifyInventory(ctx context.Context, db *sql.DB, c *config, w *workload) error {
	wantStock, wantVersion := map[string]int64{}, map[string]int64{}
	for i := range c.products {
		wantStock[productName(i)] = initialStock
	}
	for _, o := range w.committed {
		wantStock[o.Product] -= o.Qty
		wantVersion[o.Product]++
	}
	rows, err := db.QueryContext(ctx, `SELECT product, stock, version FROM inventory`)
	if err != nil {
		return err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var p string
		var stock, version int64
		if err := rows.Scan(&p, &stock, &version); err != nil {
			return err
		}
		if stock != wantStock[p] || version != wantVersion[p] {
			return fmt.Errorf("inventory: %s has stock %d version %d, want stock %d version %d", p, stock, version, wantStock[p], wantVersion[p])
		}
		n++
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if n != c.products {
		return fmt.Errorf("inventory: %d products, want %d", n, c.products)
	}
	return nil
}

func verifyDedup(ctx context.Context, db *sql.DB, d dedup.Dialect, c *config, w *workload, t *topicContents) error {
	if c.dedupKey == "seq" {
		want := map[string]int64{}
		for _, o := range w.committed {
			want[o.Product]++
		}
		rows, err := db.QueryContext(ctx, q(d, `SELECT key, seq FROM kawa_dedup_seq WHERE scope = ? AND source = ? AND topic = ?`), c.group(), c.source(), c.topic())
		if err != nil {
			return err
		}
		defer rows.Close()
		n := 0
		for rows.Next() {
			var key []byte
			var seq int64
			if err := rows.Scan(&key, &seq); err != nil {
				return err
			}
			if seq != want[string(key)] {
				return fmt.Errorf("kawa_dedup_seq: %s at %d, want %d", key, seq, want[string(key)])
			}
			n++
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if n != len(want) {
			return fmt.Errorf("kawa_dedup_seq: %d keys for this run, want %d", n, len(want))
		}
		return nil
	}
	var n int
	if err := db.QueryRowContext(ctx, q(d, `SELECT COUNT(*) FROM kawa_dedup WHERE scope = ?`), c.group()).Scan(&n); err != nil {
		return err
	}
	ids := map[string]bool{}
	for _, r := range t.records {
		ids[r.messageID] = true
	}
	if n != len(w.committed) || len(ids) != len(w.committed) {
		return fmt.Errorf("kawa_dedup: %d keys, %d message ids in the topic, want %d each", n, len(ids), len(w.committed))
	}
	return nil
}
