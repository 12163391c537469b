package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/kawa-broker/kawa/cmd/internal/cli"
)

// TestExitStatus checks the dispatch table's exit statuses and that a usage
// error names the problem on the first stderr line, followed by the usage.
func TestExitStatus(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args      []string
		status    int
		stderr1   string // first stderr line, exact
		stdoutPfx string
	}{
		{nil, 2, "usage: kawa <subcommand> [flags]", ""},
		{[]string{"nope"}, 2, `kawa: unknown subcommand "nope"`, ""},
		{[]string{"help"}, 0, "", "usage: kawa <subcommand> [flags]\n"},
		{[]string{"--help"}, 0, "", "usage: kawa <subcommand> [flags]\n"},
		{[]string{"help", "produce"}, 0, "", "usage: kawa produce --topic T"},
		{[]string{"help", "nope"}, 2, `kawa help: unknown subcommand "nope"`, ""},
		{[]string{"version"}, 0, "", "kawa "},
		{[]string{"version", "extra"}, 2, `kawa version: unexpected argument "extra"`, ""},
		{[]string{"produce", "-h"}, 0, "", "usage: kawa produce --topic T"},
		{[]string{"produce", "--bogus"}, 2, "kawa produce: flag provided but not defined: -bogus", ""},
		{[]string{"produce"}, 2, "kawa produce: --topic is required", ""},
		{[]string{"produce", "--topic", "t", "extra"}, 2, `kawa produce: unexpected argument "extra"`, ""},
		{[]string{"produce", "--topic", "t", "--acks", "2"}, 2, `kawa produce: --acks must be all, 1 or 0, got "2"`, ""},
		{[]string{"produce", "--topic", "t", "--acks", "1", "--idempotent"}, 2, "kawa produce: --idempotent requires --acks all", ""},
		{[]string{"produce", "--topic", "t", "--brokers", " , "}, 2, "kawa produce: --brokers is empty", ""},
		{[]string{"consume", "--topic", "t", "--offset", "5"}, 2, "kawa consume: --offset needs --partition", ""},
		{[]string{"consume", "--topic", "t", "--from-beginning", "--offset", "1", "--partition", "0"}, 2, "kawa consume: --from-beginning and --offset are exclusive", ""},
		{[]string{"consume", "--topic", "t", "--group", "g", "--partition", "0"}, 2, "kawa consume: --group and --partition are exclusive (the group assigns partitions)", ""},
		{[]string{"consume", "--topic", "t", "--isolation", "dirty"}, 2, `kawa consume: --isolation must be read_committed or read_uncommitted, got "dirty"`, ""},
		{[]string{"consume", "--topic", "t", "--timeout", "soon"}, 2, `kawa consume: invalid value "soon" for flag -timeout: parse error`, ""},
		{[]string{"topic"}, 2, "kawa topic: missing topic subcommand", ""},
		{[]string{"topic", "-h"}, 0, "", "usage: kawa topic <create|list|describe|alter-config|delete>"},
		{[]string{"topic", "frob"}, 2, `kawa topic: unknown topic subcommand "frob"`, ""},
		{[]string{"topic", "describe"}, 2, "kawa topic describe: want 1 argument(s), got 0", ""},
		{[]string{"topic", "create", "a", "b"}, 2, "kawa topic create: want 1 argument(s), got 2", ""},
		{[]string{"topic", "create", "a", "--config", "novalue"}, 2, `kawa topic create: invalid value "novalue" for flag -config: want key=value, got "novalue"`, ""},
		{[]string{"topic", "create", "a", "--partitions", "0"}, 2, "kawa topic create: --partitions must be between 1 and 1048576, got 0", ""},
		{[]string{"bench"}, 2, `kawa: unknown subcommand "bench"`, ""}, // cmd/kawa-bench
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, "_"), func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			status := run(tt.args, strings.NewReader(""), &stdout, &stderr)
			if status != tt.status {
				t.Fatalf("status %d, want %d; stderr:\n%s", status, tt.status, stderr.String())
			}
			if first, _, _ := strings.Cut(stderr.String(), "\n"); first != tt.stderr1 {
				t.Errorf("stderr first line %q, want %q", first, tt.stderr1)
			}
			if !strings.HasPrefix(stdout.String(), tt.stdoutPfx) {
				t.Errorf("stdout %q, want prefix %q", stdout.String(), tt.stdoutPfx)
			}
			if tt.status == 2 && tt.args != nil && !strings.Contains(stderr.String(), "\nusage: kawa") {
				t.Errorf("usage error without usage text:\n%s", stderr.String())
			}
		})
	}
}

// TestFailureIsOneLine checks that a failure (not a usage error) exits 1 with
// exactly one stderr line: here, no broker listening.
func TestFailureIsOneLine(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	status := run([]string{"topic", "list", "--brokers", "127.0.0.1:1", "--timeout", "5s"}, strings.NewReader(""), &stdout, &stderr)
	if status != 1 {
		t.Fatalf("status %d, want 1", status)
	}
	if !strings.HasPrefix(stderr.String(), "kawa: topic list: ") || strings.Count(stderr.String(), "\n") != 1 {
		t.Errorf("stderr %q, want one line starting with \"kawa: topic list: \"", stderr.String())
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout %q, want empty", stdout.String())
	}
}

func TestParseInterspersed(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args    []string
		pos     []string
		sep     string
		n       int
		verbose bool
	}{
		{[]string{"a", "--n", "3", "b"}, []string{"a", "b"}, "", 3, false},
		{[]string{"--n=2", "a", "-v"}, []string{"a"}, "", 2, true},
		{[]string{"a", "--", "-v", "--n"}, []string{"a", "-v", "--n"}, "", 0, false},
		{[]string{"--sep", "--", "a"}, []string{"a"}, "--", 0, false},
		{[]string{"-v", "--", "a"}, []string{"a"}, "", 0, true},
	}
	for _, tt := range tests {
		fs := cli.NewFlagSet("x", "x")
		sep := fs.String("sep", "", "")
		n := fs.Int("n", 0, "")
		v := fs.Bool("v", false, "")
		pos, err := cli.ParseInterspersed(fs, tt.args)
		if err != nil {
			t.Fatalf("%v: %v", tt.args, err)
		}
		if strings.Join(pos, " ") != strings.Join(tt.pos, " ") || *sep != tt.sep || *n != tt.n || *v != tt.verbose {
			t.Errorf("%v: pos %q sep %q n %d v %v; want %q %q %d %v", tt.args, pos, *sep, *n, *v, tt.pos, tt.sep, tt.n, tt.verbose)
		}
	}
}
