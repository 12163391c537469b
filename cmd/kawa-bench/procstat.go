package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, the unit of utime/stime in /proc/PID/stat. It is 100
// on every Linux architecture Go supports (the kernel fixes it for ABI
// stability), so no sysconf call (and no cgo) is needed.
const clockTicks = 100

// procCPUSeconds returns utime+stime of process pid in seconds, read from
// /proc/PID/stat (fields 14 and 15, see proc(5)).
func procCPUSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	ticks, err := parseStatCPU(b)
	if err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return float64(ticks) / clockTicks, nil
}

// parseStatCPU returns utime+stime in clock ticks from a /proc/PID/stat line.
// The command name (field 2) is in parentheses and may itself hold spaces and
// parentheses, so fields are counted from the last ')'.
func parseStatCPU(stat []byte) (uint64, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("no ')' after the command name")
	}
	// After ')' come field 3 (state) onwards: utime is field 14, stime 15.
	fields := strings.Fields(string(stat[i+1:]))
	const utime, stime = 14 - 3, 15 - 3
	if len(fields) <= stime {
		return 0, fmt.Errorf("%d fields after the command name, want > %d", len(fields), stime)
	}
	u, err := strconv.ParseUint(fields[utime], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("utime: %w", err)
	}
	s, err := strconv.ParseUint(fields[stime], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("stime: %w", err)
	}
	return u + s, nil
}

// procPeakRSS returns the peak resident set size of pid in bytes (VmHWM in
// /proc/PID/status): the high-water mark since the process started.
func procPeakRSS(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return parseStatusKB(f, "VmHWM:")
}

// parseStatusKB finds "Key:   N kB" in a /proc/PID/status stream and returns
// N*1024.
func parseStatusKB(r io.Reader, key string) (int64, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), key)
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("%s: unexpected %q", key, rest)
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", key, err)
		}
		return kb * 1024, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no %s line", key)
}

// brokerUsage is the broker process's resource use over a measurement window.
type brokerUsage struct {
	PID          int     `json:"pid"`
	CPUSeconds   float64 `json:"cpu_s"`
	CPUPerGiB    float64 `json:"cpu_s_per_gib,omitempty"`
	PeakRSSBytes int64   `json:"peak_rss_bytes"`
}

// brokerSampler reads a broker's CPU at the window start and its CPU and
// peak RSS at the end. A zero pid disables it.
type brokerSampler struct {
	pid      int
	cpuStart float64
}

func (s *brokerSampler) start() error {
	if s.pid == 0 {
		return nil
	}
	c, err := procCPUSeconds(s.pid)
	s.cpuStart = c
	return err
}

// stop returns the usage since start, with CPU-s per GiB of bytesMoved.
func (s *brokerSampler) stop(bytesMoved int64) (*brokerUsage, error) {
	if s.pid == 0 {
		return nil, nil
	}
	c, err := procCPUSeconds(s.pid)
	if err != nil {
		return nil, err
	}
	rss, err := procPeakRSS(s.pid)
	if err != nil {
		return nil, err
	}
	u := &brokerUsage{PID: s.pid, CPUSeconds: roundTo(c-s.cpuStart, 3), PeakRSSBytes: rss}
	if bytesMoved > 0 {
		u.CPUPerGiB = u.CPUSeconds / (float64(bytesMoved) / (1 << 30))
	}
	return u, nil
}
