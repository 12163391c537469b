package sqltest_test

import (
	"testing"

	"github.com/kawa-broker/kawa/internal/sqltest"
)

// TestEachIsolated checks that each backend's database is fresh: a table made
// in one test is absent in the next.
func TestEachIsolated(t *testing.T) {
	for i := 0; i < 2; i++ {
		sqltest.Each(t, func(t *testing.T, b sqltest.Backend) {
			if _, err := b.DB.Exec("CREATE TABLE only_once (id INTEGER PRIMARY KEY)"); err != nil {
				t.Fatalf("round %d: %v", i, err)
			}
		})
	}
}
