//go:build invariants

package invariants

// Enabled reports whether this build checks invariants (-tags invariants).
const Enabled = true
