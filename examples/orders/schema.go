package main

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"

	"github.com/kawa-broker/kawa/dedup"
	"github.com/kawa-broker/kawa/outbox"
)

// initialStock is every product's stock before the run; the check compares
// each product's stock with it minus the committed orders' quantities.
const initialStock = 1_000_000

// The application's tables, by name. orders is the producing service's,
// applied, inventory and apply_counter the consuming service's (one database
// here, for a self-contained example; they could be two). apply_counter
// hands out apply_order inside the dedup transaction, so the check can read
// the order in which the consumer applied each product's records.
var appDDL = []struct{ table, ddl string }{
	{"orders", `CREATE TABLE orders (order_id TEXT NOT NULL UNIQUE, product TEXT NOT NULL, qty BIGINT NOT NULL)`},
	{"applied", `CREATE TABLE applied (order_id TEXT NOT NULL UNIQUE, product TEXT NOT NULL, seq BIGINT NOT NULL, apply_order BIGINT NOT NULL)`},
	{"inventory", `CREATE TABLE inventory (product TEXT NOT NULL PRIMARY KEY, stock BIGINT NOT NULL, version BIGINT NOT NULL)`},
	{"apply_counter", `CREATE TABLE apply_counter (id INTEGER NOT NULL PRIMARY KEY, n BIGINT NOT NULL)`},
}

// q rewrites a query's ? placeholders to PostgreSQL's $n.
func q(d dedup.Dialect, query string) string {
	if d != dedup.Postgres {
		return query
	}
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// productName is product i's name, the record key.
func productName(i int) string { return fmt.Sprintf("p-%03d", i) }

// prepare migrates the SDK's schemas and the application's, and resets the
// application's tables for this run: the example's checks are about one run,
// so the previous run's orders would be discrepancies. It refuses a database
// whose outbox still holds rows (an interrupted earlier run): the relay would
// publish them to that run's topic, and the outbox check would fail.
func prepare(ctx context.Context, db *sql.DB, d dedup.Dialect, c *config) error {
	if err := outbox.Migrate(ctx, db, d); err != nil {
		return err
	}
	st, err := dedup.New(db, d, c.group())
	if err != nil {
		return err
	}
	if err := st.Migrate(ctx); err != nil {
		return err
	}
	var unsent, dead int64
	if err := db.QueryRowContext(ctx, `SELECT (SELECT COUNT(*) FROM kawa_outbox), (SELECT COUNT(*) FROM kawa_outbox_dead)`).Scan(&unsent, &dead); err != nil {
		return err
	}
	if unsent+dead > 0 {
		return fmt.Errorf("the database's outbox holds %d unsent and %d dead rows from an earlier run; use a fresh database (or clear kawa_outbox and kawa_outbox_dead)", unsent, dead)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, a := range appDDL {
		// Only missing tables are created: even CREATE TABLE IF NOT EXISTS
		// needs CREATE on the schema on PostgreSQL, which an application
		// user need not have once the tables exist.
		ok, err := dedup.TableExists(ctx, tx, d, a.table)
		if err != nil {
			return err
		}
		if !ok {
			if _, err := tx.ExecContext(ctx, a.ddl); err != nil {
				return fmt.Errorf("%s: %w", a.ddl, err)
			}
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM `+a.table); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO apply_counter (id, n) VALUES (1, 0)`); err != nil {
		return err
	}
	for i := range c.products {
		if _, err := tx.ExecContext(ctx, q(d, `INSERT INTO inventory (product, stock, version) VALUES (?, ?, 0)`), productName(i), initialStock); err != nil {
			return err
		}
	}
	return tx.Commit()
}
