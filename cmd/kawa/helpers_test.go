package main

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// cmdFunc is the shape of every client subcommand.
type cmdFunc func(args []string, stdin io.Reader, stdout io.Writer) error

// runCmd runs a subcommand in-process and returns its stdout.
func runCmd(t *testing.T, fn cmdFunc, stdin string, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := fn(args, strings.NewReader(stdin), &out)
	return out.String(), err
}

// mustRun is runCmd that fails the test on error.
func mustRun(t *testing.T, fn cmdFunc, stdin string, args ...string) string {
	t.Helper()
	out, err := runCmd(t, fn, stdin, args...)
	if err != nil {
		t.Fatalf("%v: %v (stdout %q)", args, err, out)
	}
	return out
}
