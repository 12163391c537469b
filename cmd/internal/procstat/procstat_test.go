package procstat

import (
	"strings"
	"testing"
)

func TestParseStatCPU(t *testing.T) {
	t.Parallel()
	// A command name with spaces and parentheses; utime 1234, stime 566.
	stat := "4242 (my (odd) cmd) S 1 4242 4242 0 -1 4194560 100 0 0 0 1234 566 0 0 20 0 9 0 12345 1000000 250 18446744073709551615\n"
	u, s, err := parseStatCPU([]byte(stat))
	if err != nil || u != 1234 || s != 566 {
		t.Errorf("got utime %d stime %d, %v; want 1234, 566", u, s, err)
	}
	if _, _, err := parseStatCPU([]byte("4242 (x) S 1 2")); err == nil {
		t.Error("short stat line accepted")
	}
	if _, _, err := parseStatCPU([]byte("no parens")); err == nil {
		t.Error("stat line without ')' accepted")
	}
}

func TestParseStatusKB(t *testing.T) {
	t.Parallel()
	status := "Name:\tkawa\nVmPeak:\t  999 kB\nVmHWM:\t   20480 kB\nVmRSS:\t   10240 kB\n"
	got, err := ParseStatusKB(strings.NewReader(status), "VmHWM:")
	if err != nil || got != 20480*1024 {
		t.Errorf("got %d, %v; want %d", got, err, 20480*1024)
	}
	if _, err := ParseStatusKB(strings.NewReader("Name:\tx\n"), "VmHWM:"); err == nil {
		t.Error("missing VmHWM accepted")
	}
}
