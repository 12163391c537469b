// Package invariants switches on expensive internal assertions (pebble's
// pattern): code guards them with `if invariants.Enabled { ... }`, which the
// compiler removes from normal builds because Enabled is a constant. Build or
// test with `-tags invariants` to run them; a violated invariant panics,
// since it means Kawa's own state is wrong, not the client's input.
//
// CI runs `go test -tags invariants` on the packages that have invariants
// (.ci/run).
package invariants
