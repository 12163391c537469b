package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/kawa-broker/kawa/internal/vfs"
)

// lockFileName is the lock file in the data dir, Kafka's name for it (each
// Kafka log dir holds a ".lock" taken with FileChannel.tryLock).
const lockFileName = ".lock"

// lockDataDir creates dir durably if needed and takes an exclusive,
// non-blocking flock(2) on dir/.lock, held until the returned release is
// called or the process dies (SIGKILL included: the kernel drops the lock
// with the descriptor, so a crashed broker never leaves a stale lock).
//
// Why: two brokers on one data dir would each recover, truncate and append
// to the same segments and overwrite each other's snapshots and catalog,
// corrupting the log. The second one must refuse to start instead, before it
// reads or writes anything there. Errors: the data dir cannot be created, or
// it is in use by another process (the error says so).
func lockDataDir(dir string) (release func(), err error) {
	if err := vfs.MkdirAllDurable(vfs.OS, dir); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	p := filepath.Join(dir, lockFileName)
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("data dir: lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("data dir %s is in use by another kawa process (%s is locked)", dir, p)
		}
		return nil, fmt.Errorf("data dir: lock %s: %w", p, err)
	}
	// Closing the descriptor releases the flock.
	return func() { f.Close() }, nil
}
