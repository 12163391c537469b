// Package procstat reads a Linux process's CPU time and memory from /proc
// (proc(5)), for the benchmark harness and the broker's memory tests.
package procstat

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

// CPUSeconds returns utime+stime of process pid in seconds, read from
// /proc/PID/stat (fields 14 and 15, see proc(5)).
func CPUSeconds(pid int) (float64, error) {
	user, sys, err := CPUTimes(pid)
	return user + sys, err
}

// CPUTimes returns the user (utime) and system (stime) CPU time of process
// pid in seconds, read from /proc/PID/stat (fields 14 and 15, see proc(5)).
// They are reported apart because on a VM whose host reclaims guest memory
// the system time of a writer is dominated by first-touch page faults of
// the page cache, which says more about the machine than the program.
func CPUTimes(pid int) (user, sys float64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	u, s, err := parseStatCPU(b)
	if err != nil {
		return 0, 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return float64(u) / clockTicks, float64(s) / clockTicks, nil
}

// parseStatCPU returns utime and stime in clock ticks from a /proc/PID/stat
// line. The command name (field 2) is in parentheses and may itself hold
// spaces and parentheses, so fields are counted from the last ')'.
func parseStatCPU(stat []byte) (utime, stime uint64, err error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("no ')' after the command name")
	}
	// After ')' come field 3 (state) onwards: utime is field 14, stime 15.
	fields := strings.Fields(string(stat[i+1:]))
	const ui, si = 14 - 3, 15 - 3
	if len(fields) <= si {
		return 0, 0, fmt.Errorf("%d fields after the command name, want > %d", len(fields), si)
	}
	if utime, err = strconv.ParseUint(fields[ui], 10, 64); err != nil {
		return 0, 0, fmt.Errorf("utime: %w", err)
	}
	if stime, err = strconv.ParseUint(fields[si], 10, 64); err != nil {
		return 0, 0, fmt.Errorf("stime: %w", err)
	}
	return utime, stime, nil
}

// PeakRSS returns the peak resident set size of pid in bytes (VmHWM in
// /proc/PID/status): the high-water mark since the process started.
func PeakRSS(pid int) (int64, error) { return statusKB(pid, "VmHWM:") }

// RSS returns the resident set size of pid in bytes now (VmRSS in
// /proc/PID/status).
func RSS(pid int) (int64, error) { return statusKB(pid, "VmRSS:") }

// statusKB reads key's kB figure from /proc/PID/status, in bytes.
func statusKB(pid int, key string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return ParseStatusKB(f, key)
}

// ParseStatusKB finds "Key:   N kB" in a /proc/PID/status stream and returns
// N*1024.
func ParseStatusKB(r io.Reader, key string) (int64, error) {
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
