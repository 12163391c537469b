package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"time"
)

// calibration is W0: this machine's physical floor at the start of a round
// (bench-protocol.md §4.3 step 2), so ratios can be judged against it and a
// round whose floor moved can be flagged.
type calibration struct {
	Round int          `json:"round"`
	Syncs []syncProbe  `json:"fdatasync"`
	RTT   latencyProbe `json:"loopback_rtt"`
}

// syncProbe is "write Size bytes, then fdatasync" repeated for the probe's
// time: appended to a growing file (the file size changes, so the journal
// commits too), or overwriting a file preallocated with zeros and synced
// first (data only: what a preallocated segment would pay).
type syncProbe struct {
	Size         int     `json:"size_bytes"`
	Preallocated bool    `json:"preallocated"`
	Ops          int64   `json:"ops"`
	OpsPerS      float64 `json:"ops_per_s"`
	P50          float64 `json:"p50_us"`
	P99          float64 `json:"p99_us"`
}

// latencyProbe is a ping-pong of 1 KiB messages over a loopback TCP
// connection with TCP_NODELAY (Go's default), one in flight.
type latencyProbe struct {
	Ops     int64   `json:"ops"`
	OpsPerS float64 `json:"ops_per_s"`
	P50     float64 `json:"p50_us"`
	P99     float64 `json:"p99_us"`
}

// calibrationSizes are W0's write sizes (issue 10 item 2).
var calibrationSizes = []int{1 << 10, 4 << 10, 64 << 10, 256 << 10}

// calibrate runs every W0 probe for each in dir, which should be on the
// filesystem the brokers write to.
func calibrate(ctx context.Context, dir string, each time.Duration) (*calibration, error) {
	c := &calibration{}
	for _, size := range calibrationSizes {
		for _, pre := range []bool{false, true} {
			p, err := probeFdatasync(ctx, dir, size, pre, each)
			if err != nil {
				return nil, err
			}
			c.Syncs = append(c.Syncs, p)
		}
	}
	rtt, err := probeLoopback(ctx, each)
	if err != nil {
		return nil, err
	}
	c.RTT = rtt
	return c, nil
}

// probeFdatasync measures write+fdatasync of size bytes for d.
func probeFdatasync(ctx context.Context, dir string, size int, prealloc bool, d time.Duration) (syncProbe, error) {
	p := syncProbe{Size: size, Preallocated: prealloc}
	f, err := os.CreateTemp(dir, "calibrate-*.dat")
	if err != nil {
		return p, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, size)
	for i := range buf {
		buf[i] = byte(i)
	}
	// A preallocated file holds enough zeros, written and synced, for the
	// probe never to grow it: 64 MiB or 256 writes, whichever is larger.
	span := int64(max(64<<20, 256*size))
	if prealloc {
		zeros := make([]byte, 1<<20)
		for off := int64(0); off < span; off += int64(len(zeros)) {
			if _, err := f.WriteAt(zeros, off); err != nil {
				return p, err
			}
		}
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			return p, err
		}
	}
	h := newHistogram()
	start := time.Now()
	var off int64
	for time.Since(start) < d && ctx.Err() == nil {
		if prealloc && off+int64(size) > span {
			off = 0
		}
		t := time.Now()
		if _, err := f.WriteAt(buf, off); err != nil {
			return p, err
		}
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			return p, err
		}
		h.RecordDuration(time.Since(t))
		off += int64(size)
	}
	elapsed := time.Since(start)
	s := summarize(h)
	p.Ops, p.P50, p.P99 = int64(s.Count), s.P50, s.P99
	p.OpsPerS = roundTo(float64(p.Ops)/elapsed.Seconds(), 1)
	return p, nil
}

// probeLoopback measures 1 KiB round trips to an echo server on 127.0.0.1
// for d. The echo goroutine ends when the client closes the connection.
func probeLoopback(ctx context.Context, d time.Duration) (latencyProbe, error) {
	var p latencyProbe
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return p, err
	}
	defer ln.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		io.Copy(conn, conn) // echo until the client closes
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return p, err
	}
	msg := make([]byte, 1024)
	h := newHistogram()
	start := time.Now()
	for time.Since(start) < d && ctx.Err() == nil {
		t := time.Now()
		if _, err := conn.Write(msg); err != nil {
			conn.Close()
			return p, err
		}
		if _, err := io.ReadFull(conn, msg); err != nil {
			conn.Close()
			return p, err
		}
		h.RecordDuration(time.Since(t))
	}
	elapsed := time.Since(start)
	conn.Close()
	<-done
	s := summarize(h)
	p.Ops, p.P50, p.P99 = int64(s.Count), s.P50, s.P99
	p.OpsPerS = roundTo(float64(p.Ops)/elapsed.Seconds(), 1)
	return p, nil
}

// syncP50 returns the p50 of the probe of size bytes, or 0.
func (c *calibration) syncP50(size int, prealloc bool) float64 {
	for _, s := range c.Syncs {
		if s.Size == size && s.Preallocated == prealloc {
			return s.P50
		}
	}
	return 0
}

// calibrationDir is where probes write: a fresh directory under base.
func calibrationDir(base string) (string, func(), error) {
	dir, err := os.MkdirTemp(base, "w0-")
	if err != nil {
		return "", nil, fmt.Errorf("calibration dir: %w", err)
	}
	return dir, func() { os.RemoveAll(dir) }, nil
}
