package main

import (
	"bytes"
	"strings"
	"testing"
)

// runCmd runs a bench mode in-process and returns its stdout.
func runCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := runBench(args, strings.NewReader(""), &out)
	return out.String(), err
}

// mustRun is runCmd that fails the test on error.
func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	out, err := runCmd(t, args...)
	if err != nil {
		t.Fatalf("%v: %v (stdout %q)", args, err, out)
	}
	return out
}
