package dedup

import "time"

// SetPruneBatch lets tests prove that Prune works in several batches.
func SetPruneBatch(s *Store, n int) { s.cfg.pruneBatch = n }

// SetNow lets tests move Prune's and the key rows' clock.
func SetNow(s *Store, now func() time.Time) { s.cfg.now = now }
