package dedup

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// VersionResult is the outcome of Versioned.Apply.
type VersionResult int

const (
	// VersionApplied: the row was at the expected version; the assignments
	// were written and the version is now expected+1.
	VersionApplied VersionResult = iota + 1
	// VersionAlreadyApplied: the stored version is already at or past
	// expected+1 (this change, or a later one, was applied before).
	VersionAlreadyApplied
	// VersionConflict: the stored version is below the expected one (the
	// caller read a version that was never stored, or the row was reset).
	VersionConflict
	// VersionNotFound: no row has this id.
	VersionNotFound
)

func (r VersionResult) String() string {
	switch r {
	case VersionApplied:
		return "applied"
	case VersionAlreadyApplied:
		return "already-applied"
	case VersionConflict:
		return "conflict"
	case VersionNotFound:
		return "not-found"
	}
	return "none"
}

// Querier is what Versioned.Apply runs on: *sql.Tx (the usual case, inside a
// Process handler), *sql.DB or *sql.Conn.
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Assignment is one "column = value" of Versioned.Apply; build it with Set.
type Assignment struct {
	Column string
	Value  any
}

// Set returns the assignment column = value.
func Set(column string, value any) Assignment { return Assignment{Column: column, Value: value} }

// Versioned is the optimistic-concurrency update of one table:
//
//	UPDATE table SET c1 = ?, ..., version = version + 1 WHERE id = ? AND version = ?
//
// with a typed result, so callers cannot forget to check rows affected.
// Build it once with NewVersioned; it is immutable and safe for concurrent use.
type Versioned struct {
	dialect                  Dialect
	table, idCol, versionCol string
	columns                  map[string]bool
}

// NewVersioned validates the identifiers and returns the helper for table
// (optionally schema-qualified, "schema.table"), its id column, its integer
// version column, and the columns Apply may assign. Every identifier must
// match [A-Za-z_][A-Za-z0-9_]{0,62} (so it never needs quoting and cannot
// inject SQL); the id and version columns cannot be assigned.
func NewVersioned(dialect Dialect, table, idColumn, versionColumn string, columns ...string) (*Versioned, error) {
	if dialect != SQLite && dialect != Postgres {
		return nil, fmt.Errorf("dedup: unknown dialect %d", int(dialect))
	}
	parts := strings.Split(table, ".")
	if len(parts) > 2 {
		return nil, fmt.Errorf("dedup: table %q: at most one schema qualifier", table)
	}
	for _, p := range parts {
		if !identifier(p) {
			return nil, fmt.Errorf("dedup: table %q is not a plain identifier", table)
		}
	}
	for _, c := range []string{idColumn, versionColumn} {
		if !identifier(c) {
			return nil, fmt.Errorf("dedup: column %q is not a plain identifier", c)
		}
	}
	if idColumn == versionColumn {
		return nil, errors.New("dedup: id and version columns must differ")
	}
	v := &Versioned{dialect: dialect, table: table, idCol: idColumn, versionCol: versionColumn, columns: map[string]bool{}}
	for _, c := range columns {
		if !identifier(c) {
			return nil, fmt.Errorf("dedup: column %q is not a plain identifier", c)
		}
		if c == idColumn || c == versionColumn {
			return nil, fmt.Errorf("dedup: column %q is the id or version column and cannot be assigned", c)
		}
		v.columns[c] = true
	}
	return v, nil
}

// identifier reports whether s matches [A-Za-z_][A-Za-z0-9_]{0,62}.
func identifier(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		letter := c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
		if !letter && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// Apply writes the assignments to the row id if its version is expected,
// bumping the version to expected+1, and says what happened. Each column
// must have been declared to NewVersioned and appear once. The error is
// non-nil only for a database error or a bad assignment; the four outcomes
// are results. On VersionApplied the row is locked until q's transaction
// ends.
func (v *Versioned) Apply(ctx context.Context, q Querier, id any, expected int64, set ...Assignment) (VersionResult, error) {
	var b strings.Builder
	b.WriteString("UPDATE " + v.table + " SET ")
	args := make([]any, 0, len(set)+2)
	seen := make(map[string]bool, len(set))
	for _, a := range set {
		if !v.columns[a.Column] {
			return 0, fmt.Errorf("dedup: column %q was not declared to NewVersioned", a.Column)
		}
		if seen[a.Column] {
			return 0, fmt.Errorf("dedup: column %q assigned twice", a.Column)
		}
		seen[a.Column] = true
		args = append(args, a.Value)
		b.WriteString(a.Column + " = " + v.dialect.ph(len(args)) + ", ")
	}
	args = append(args, id, expected)
	b.WriteString(v.versionCol + " = " + v.versionCol + " + 1 WHERE " + v.idCol + " = " + v.dialect.ph(len(args)-1) +
		" AND " + v.versionCol + " = " + v.dialect.ph(len(args)))
	r, err := q.ExecContext(ctx, b.String(), args...)
	if err != nil {
		return 0, fmt.Errorf("dedup: versioned update of %s: %w", v.table, err)
	}
	n, err := r.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("dedup: versioned update of %s: %w", v.table, err)
	}
	if n == 1 {
		return VersionApplied, nil
	}
	var stored int64
	err = q.QueryRowContext(ctx, "SELECT "+v.versionCol+" FROM "+v.table+" WHERE "+v.idCol+" = "+v.dialect.ph(1), id).Scan(&stored)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return VersionNotFound, nil
	case err != nil:
		return 0, fmt.Errorf("dedup: versioned read of %s: %w", v.table, err)
	case stored > expected:
		return VersionAlreadyApplied, nil
	}
	// stored < expected (stored == expected would have been updated,
	// unless it changed between the two statements; then it is > expected
	// now, or the row was reset, which is a conflict as well).
	return VersionConflict, nil
}
