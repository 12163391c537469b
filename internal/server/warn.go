package server

import (
	"log/slog"
	"sync"
	"time"
)

// Warnings about bad connections are rate-limited: at most warnBurst per
// warnWindow, and the first warning of a new window says how many were
// suppressed in the last one. A client that opens thousands of bad
// connections must not be able to fill the disk with log lines or spend the
// broker's CPU on them.
const (
	warnBurst  = 10
	warnWindow = 10 * time.Second
)

// warnLimiter is a fixed-window limiter for Warn logs, shared by all
// connections of a Server.
type warnLimiter struct {
	lg         *slog.Logger
	mu         sync.Mutex
	start      time.Time // of the current window
	n          int       // warnings logged in the current window
	suppressed int       // warnings dropped since the last one logged
}

func (w *warnLimiter) init(lg *slog.Logger) { w.lg = lg }

// allow reports whether a warning may be logged now and, if so, how many
// were suppressed before it.
func (w *warnLimiter) allow(now time.Time) (bool, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if now.Sub(w.start) >= warnWindow {
		w.start, w.n = now, 0
	}
	if w.n >= warnBurst {
		w.suppressed++
		return false, 0
	}
	w.n++
	s := w.suppressed
	w.suppressed = 0
	return true, s
}

// log writes a Warn line unless the limit is reached.
func (w *warnLimiter) log(msg string, args ...any) {
	ok, suppressed := w.allow(time.Now())
	if !ok {
		return
	}
	if suppressed > 0 {
		args = append(args, "suppressed_warnings", suppressed)
	}
	w.lg.Warn(msg, args...)
}
