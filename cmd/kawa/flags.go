package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
)

// defaultBrokers is where every client subcommand looks for a broker unless
// --brokers says otherwise: the address `kawa serve` listens on by default.
const defaultBrokers = "127.0.0.1:9092"

// usageError is a bad command line: exit status 2 and the subcommand's usage.
type usageError struct {
	cmd   string // subcommand path, e.g. "topic create"
	err   error
	usage string
}

func (e *usageError) Error() string { return e.cmd + ": " + e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// helpRequest is -h/--help: the usage goes to stdout and the exit status is 0.
type helpRequest struct{ usage string }

func (h *helpRequest) Error() string { return "help requested" }

func usageErrorf(cmd, usage, format string, args ...any) error {
	return &usageError{cmd: cmd, err: fmt.Errorf(format, args...), usage: usage}
}

// flagSet is a flag.FlagSet that knows its synopsis, so errors can carry the
// full usage text. Parse errors are returned, never printed by package flag.
type flagSet struct {
	*flag.FlagSet
	synopsis string
}

func newFlagSet(cmd, synopsis string) *flagSet {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return &flagSet{FlagSet: fs, synopsis: synopsis}
}

// usage renders "usage: <synopsis>" and the flag defaults.
func (fs *flagSet) usage() string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "usage: %s\n", fs.synopsis)
	hasFlags := false
	fs.VisitAll(func(*flag.Flag) { hasFlags = true })
	if hasFlags {
		b.WriteString("\nflags:\n")
		var d bytes.Buffer
		fs.SetOutput(&d)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
		// Package flag takes -x and --x alike; show the double-dash form.
		b.WriteString(strings.ReplaceAll("\n"+d.String(), "\n  -", "\n  --")[1:])
	}
	return b.String()
}

// usageErr wraps err as a usage error of this flag set.
func (fs *flagSet) usageErr(format string, args ...any) error {
	return usageErrorf(fs.Name(), fs.usage(), format, args...)
}

// parseFlags parses args and rejects positional arguments.
func parseFlags(fs *flagSet, args []string) error {
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fs.usageErr("unexpected argument %q", pos[0])
	}
	return nil
}

// parseInterspersed parses flags that may come before, between or after
// positional arguments (`topic create NAME --partitions 3`), which package
// flag alone does not allow. Everything after "--" is positional.
func parseInterspersed(fs *flagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, &helpRequest{usage: fs.usage()}
			}
			return nil, fs.usageErr("%v", err)
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" && !isFlagValue(fs, args, n-1) {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// isFlagValue reports whether args[i] was consumed as the value of the
// non-boolean flag written just before it (`--key-separator --`).
func isFlagValue(fs *flagSet, args []string, i int) bool {
	if i == 0 {
		return false
	}
	name := strings.TrimLeft(args[i-1], "-")
	if name == "" || strings.Contains(name, "=") || !strings.HasPrefix(args[i-1], "-") {
		return false
	}
	f := fs.Lookup(name)
	if f == nil {
		return false
	}
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return !ok || !b.IsBoolFlag()
}

// brokersFlag registers --brokers on fs.
func brokersFlag(fs *flagSet) *string {
	return fs.String("brokers", defaultBrokers, "comma-separated `host:port` list of seed brokers")
}

// seedBrokers splits a --brokers value, rejecting an empty list.
func seedBrokers(fs *flagSet, list string) ([]string, error) {
	var out []string
	for _, b := range strings.Split(list, ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	if len(out) == 0 {
		return nil, fs.usageErr("--brokers is empty")
	}
	return out, nil
}

// clientFor builds a kgo client for the given --brokers value.
func clientFor(fs *flagSet, brokers string, opts ...kgo.Opt) (*kgo.Client, error) {
	seeds, err := seedBrokers(fs, brokers)
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	return cl, nil
}

// kvList is a repeatable `--config k=v` flag.
type kvList struct {
	keys   []string
	values map[string]string
}

func (l *kvList) String() string {
	if l == nil {
		return ""
	}
	var parts []string
	for _, k := range l.keys {
		parts = append(parts, k+"="+l.values[k])
	}
	return strings.Join(parts, ",")
}

func (l *kvList) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("want key=value, got %q", s)
	}
	if l.values == nil {
		l.values = make(map[string]string)
	}
	if _, dup := l.values[k]; !dup {
		l.keys = append(l.keys, k)
	}
	l.values[k] = v
	return nil
}

// configs returns the pairs in the shape kadm wants (nil when empty).
func (l *kvList) configs() map[string]*string {
	if len(l.keys) == 0 {
		return nil
	}
	out := make(map[string]*string, len(l.keys))
	for _, k := range l.keys {
		v := l.values[k]
		out[k] = &v
	}
	return out
}

// acksFlag parses --acks all|1|0 (also -1 for all).
func acksFlag(fs *flagSet, s string) (kgo.Acks, error) {
	switch s {
	case "all", "-1":
		return kgo.AllISRAcks(), nil
	case "1":
		return kgo.LeaderAck(), nil
	case "0":
		return kgo.NoAck(), nil
	}
	return kgo.Acks{}, fs.usageErr("--acks must be all, 1 or 0, got %q", s)
}

// producerOpts returns the kgo options for --acks and --idempotent. kgo's
// idempotent producer requires acks=all, so with acks 1 or 0 idempotence is
// turned off unless --idempotent was given explicitly, which is an error.
func producerOpts(fs *flagSet, acks string, idempotent bool) ([]kgo.Opt, error) {
	a, err := acksFlag(fs, acks)
	if err != nil {
		return nil, err
	}
	all := acks == "all" || acks == "-1"
	if !all && idempotent && isSet(fs, "idempotent") {
		return nil, fs.usageErr("--idempotent requires --acks all")
	}
	opts := []kgo.Opt{kgo.RequiredAcks(a)}
	if !all || !idempotent {
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	return opts, nil
}

// isSet reports whether the flag name was given on the command line.
func isSet(fs *flagSet, name string) bool {
	found := false
	fs.Visit(func(f *flag.Flag) { found = found || f.Name == name })
	return found
}
