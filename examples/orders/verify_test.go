package main

import (
	"context"
	"strings"
	"testing"

	"github.com/kawa-broker/kawa/internal/sqltest"
)

// fixture is a small committed workload and a topic holding it once.
func fixture() (*config, *workload, *topicContents) {
	c := &config{runID: "x", relayMode: "transactional", dedupKey: "seq", products: 2, shards: 1, batch: 1}
	w := &workload{
		committed: map[string]order{
			"o-1": {"o-1", "p-000", 2}, "o-2": {"o-2", "p-000", 1}, "o-4": {"o-4", "p-001", 3},
		},
		rolledBack: map[string]bool{"o-3": true},
	}
	t := &topicContents{records: []topicRecord{
		{partition: 0, offset: 0, messageID: "m1", seq: 1, o: w.committed["o-1"]},
		{partition: 0, offset: 1, messageID: "m2", seq: 2, o: w.committed["o-2"]},
		{partition: 1, offset: 0, messageID: "m4", seq: 1, o: w.committed["o-4"]},
	}}
	return c, w, t
}

// TestVerifyTopicFindsDiscrepancies: the topic check passes the right topic
// and names each kind of wrong one, so a verified line means something.
func TestVerifyTopicFindsDiscrepancies(t *testing.T) {
	c, w, tc := fixture()
	var st verifyStats
	if err := verifyTopic(c, w, tc, &st); err != nil || st.duplicates != 0 {
		t.Fatalf("right topic: %v, %d duplicates", err, st.duplicates)
	}
	for name, tt := range map[string]struct {
		mutate func(c *config, tc *topicContents)
		want   string
	}{
		"rolled-back order published": {func(_ *config, tc *topicContents) {
			tc.records = append(tc.records, topicRecord{messageID: "m3", seq: 3, o: order{"o-3", "p-000", 1}})
		}, "rolled back"},
		"committed order missing": {func(_ *config, tc *topicContents) { tc.records = tc.records[:2] }, "o-4 is missing"},
		"duplicate, transactional": {func(_ *config, tc *topicContents) {
			tc.records = append(tc.records, tc.records[1])
		}, "appears 2 times"},
		"sequence gap":  {func(_ *config, tc *topicContents) { tc.records[1].seq = 3 }, "a gap"},
		"changed value": {func(_ *config, tc *topicContents) { tc.records[0].o.Qty = 9 }, "committed"},
	} {
		t.Run(name, func(t *testing.T) {
			c, w, tc := fixture()
			tt.mutate(c, tc)
			err := verifyTopic(c, w, tc, &verifyStats{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one containing %q", err, tt.want)
			}
		})
	}
	// The idempotent relay may publish a batch again: counted, not an error.
	c, w, tc = fixture()
	c.relayMode = "idempotent"
	tc.records = append(tc.records, tc.records[0], tc.records[1])
	st = verifyStats{}
	if err := verifyTopic(c, w, tc, &st); err != nil || st.duplicates != 2 {
		t.Fatalf("idempotent duplicates: %v, %d, want nil, 2", err, st.duplicates)
	}
}

// TestVerifyTablesFindDiscrepancies: the applied and inventory checks, on
// both backends, pass the right tables and catch a missing, doubled or
// reordered apply and a wrong stock or version.
func TestVerifyTablesFindDiscrepancies(t *testing.T) {
	sqltest.Each(t, func(t *testing.T, be sqltest.Backend) {
		ctx := context.Background()
		c, w, _ := fixture()
		if err := prepare(ctx, be.DB, be.Dialect, c); err != nil {
			t.Fatal(err)
		}
		exec := func(query string, args ...any) {
			t.Helper()
			if _, err := be.DB.ExecContext(ctx, q(be.Dialect, query), args...); err != nil {
				t.Fatal(err)
			}
		}
		// The right state: what the consumer leaves after o-1, o-2, o-4.
		exec(`INSERT INTO applied (order_id, product, seq, apply_order) VALUES ('o-1', 'p-000', 1, 1), ('o-4', 'p-001', 1, 2), ('o-2', 'p-000', 2, 3)`)
		exec(`UPDATE inventory SET stock = ?, version = 2 WHERE product = 'p-000'`, initialStock-3)
		exec(`UPDATE inventory SET stock = ?, version = 1 WHERE product = 'p-001'`, initialStock-3)
		if err := verifyApplied(ctx, be.DB, w, &verifyStats{}); err != nil {
			t.Fatalf("right applied: %v", err)
		}
		if err := verifyInventory(ctx, be.DB, c, w); err != nil {
			t.Fatalf("right inventory: %v", err)
		}
		check := func(what string, err error, want string) {
			t.Helper()
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: err = %v, want one containing %q", what, err, want)
			}
		}
		exec(`UPDATE applied SET apply_order = 9 WHERE order_id = 'o-1'`)
		check("reordered", verifyApplied(ctx, be.DB, w, &verifyStats{}), "want 1")
		exec(`UPDATE applied SET apply_order = 1 WHERE order_id = 'o-1'`)
		exec(`DELETE FROM applied WHERE order_id = 'o-4'`)
		check("missing", verifyApplied(ctx, be.DB, w, &verifyStats{}), "o-4 is missing")
		exec(`INSERT INTO applied (order_id, product, seq, apply_order) VALUES ('o-3', 'p-000', 3, 4)`)
		check("rolled back", verifyApplied(ctx, be.DB, w, &verifyStats{}), "rolled back")
		exec(`UPDATE inventory SET version = 3 WHERE product = 'p-000'`)
		check("version", verifyInventory(ctx, be.DB, c, w), "version 3")
		exec(`UPDATE inventory SET version = 2, stock = stock - 1 WHERE product = 'p-000'`)
		check("stock", verifyInventory(ctx, be.DB, c, w), "want stock")
	})
}

// TestPrepareAppUser: once the SDK's and the example's tables exist, prepare
// runs no DDL, so it works as an application user without CREATE on the
// schema (PostgreSQL: a role with only table privileges), and resets the
// tables for the new run.
func TestPrepareAppUser(t *testing.T) {
	sqltest.Each(t, func(t *testing.T, be sqltest.Backend) {
		ctx := context.Background()
		c, _, _ := fixture()
		if err := prepare(ctx, be.DB, be.Dialect, c); err != nil {
			t.Fatal(err)
		}
		if _, err := be.DB.ExecContext(ctx, `INSERT INTO orders (order_id, product, qty) VALUES ('o-old', 'p-000', 1)`); err != nil {
			t.Fatal(err)
		}
		app, d := sqltest.Open(t, sqltest.AppUserURL(t, be))
		if err := prepare(ctx, app, d, c); err != nil {
			t.Fatalf("prepare as the application user: %v", err)
		}
		var orders, products int
		if err := be.DB.QueryRowContext(ctx, `SELECT (SELECT COUNT(*) FROM orders), (SELECT COUNT(*) FROM inventory)`).Scan(&orders, &products); err != nil {
			t.Fatal(err)
		}
		if orders != 0 || products != c.products {
			t.Fatalf("after prepare: %d orders, %d inventory rows; want 0, %d", orders, products, c.products)
		}
	})
}
