// Package cli holds the command-line conventions shared by Kawa's commands
// (cmd/kawa, cmd/kawa-bench): flag sets that return their errors with the
// full usage, flags interspersed with arguments, the --brokers/--acks flags,
// and the exit statuses (0 success or help, 2 usage error, 1 any other
// failure, one line on stderr).
package cli

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
)

// DefaultBrokers is where every client subcommand looks for a broker unless
// --brokers says otherwise: the address `kawa serve` listens on by default.
const DefaultBrokers = "127.0.0.1:9092"

// UsageError is a bad command line: exit status 2 and the subcommand's usage.
type UsageError struct {
	cmd   string // subcommand path, e.g. "topic create"
	err   error
	usage string
}

func (e *UsageError) Error() string { return e.cmd + ": " + e.err.Error() }
func (e *UsageError) Unwrap() error { return e.err }

// HelpRequest is -h/--help: the usage goes to stdout and the exit status is 0.
type HelpRequest struct{ Usage string }

func (h *HelpRequest) Error() string { return "help requested" }

func UsageErrorf(cmd, usage, format string, args ...any) error {
	return &UsageError{cmd: cmd, err: fmt.Errorf(format, args...), usage: usage}
}

// FlagSet is a flag.FlagSet that knows its synopsis, so errors can carry the
// full usage text. Parse errors are returned, never printed by package flag.
type FlagSet struct {
	*flag.FlagSet
	synopsis string
}

func NewFlagSet(cmd, synopsis string) *FlagSet {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return &FlagSet{FlagSet: fs, synopsis: synopsis}
}

// UsageText renders "usage: <synopsis>" and the flag defaults.
func (fs *FlagSet) UsageText() string {
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

// UsageErr wraps err as a usage error of this flag set.
func (fs *FlagSet) UsageErr(format string, args ...any) error {
	return UsageErrorf(fs.Name(), fs.UsageText(), format, args...)
}

// ParseFlags parses args and rejects positional arguments.
func ParseFlags(fs *FlagSet, args []string) error {
	pos, err := ParseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fs.UsageErr("unexpected argument %q", pos[0])
	}
	return nil
}

// ParseInterspersed parses flags that may come before, between or after
// positional arguments (`topic create NAME --partitions 3`), which package
// flag alone does not allow. Everything after "--" is positional.
func ParseInterspersed(fs *FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, Help(fs.UsageText())
			}
			return nil, fs.UsageErr("%v", err)
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
func isFlagValue(fs *FlagSet, args []string, i int) bool {
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

// BrokersFlag registers --brokers on fs, and Kafka's --command-config
// (client security properties, see CommandConfigOpts), which ClientFor reads.
func BrokersFlag(fs *FlagSet) *string {
	CommandConfigFlag(fs)
	return fs.String("brokers", DefaultBrokers, "comma-separated `host:port` list of seed brokers")
}

// CommandConfigFlag registers --command-config on fs (BrokersFlag does it
// too); ClientFor reads it.
func CommandConfigFlag(fs *FlagSet) {
	fs.String(commandConfigFlag, "", "Kafka client properties `file`: security.protocol, sasl.mechanism, sasl.jaas.config, ssl.truststore.location")
}

// SeedBrokers splits a --brokers value, rejecting an empty list.
func SeedBrokers(fs *FlagSet, list string) ([]string, error) {
	var out []string
	for _, b := range strings.Split(list, ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	if len(out) == 0 {
		return nil, fs.UsageErr("--brokers is empty")
	}
	return out, nil
}

// ClientFor builds a kgo client for the given --brokers value, secured as
// fs's --command-config file says, if BrokersFlag registered it and it is set.
func ClientFor(fs *FlagSet, brokers string, opts ...kgo.Opt) (*kgo.Client, error) {
	seeds, err := SeedBrokers(fs, brokers)
	if err != nil {
		return nil, err
	}
	all := []kgo.Opt{kgo.SeedBrokers(seeds...)}
	if f := fs.Lookup(commandConfigFlag); f != nil && f.Value.String() != "" {
		sec, err := CommandConfigOpts(f.Value.String())
		if err != nil {
			return nil, err
		}
		all = append(all, sec...)
	}
	cl, err := kgo.NewClient(append(all, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	return cl, nil
}

// KVList is a repeatable `--config k=v` flag.
type KVList struct {
	keys   []string
	values map[string]string
}

func (l *KVList) String() string {
	if l == nil {
		return ""
	}
	var parts []string
	for _, k := range l.keys {
		parts = append(parts, k+"="+l.values[k])
	}
	return strings.Join(parts, ",")
}

func (l *KVList) Set(s string) error {
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

// Configs returns the pairs in the shape kadm wants (nil when empty).
func (l *KVList) Configs() map[string]*string {
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

// AcksFlag parses --acks all|1|0 (also -1 for all).
func AcksFlag(fs *FlagSet, s string) (kgo.Acks, error) {
	switch s {
	case "all", "-1":
		return kgo.AllISRAcks(), nil
	case "1":
		return kgo.LeaderAck(), nil
	case "0":
		return kgo.NoAck(), nil
	}
	return kgo.Acks{}, fs.UsageErr("--acks must be all, 1 or 0, got %q", s)
}

// ProducerOpts returns the kgo options for --acks and --idempotent. kgo's
// idempotent producer requires acks=all, so with acks 1 or 0 idempotence is
// turned off unless --idempotent was given explicitly, which is an error.
func ProducerOpts(fs *FlagSet, acks string, idempotent bool) ([]kgo.Opt, error) {
	a, err := AcksFlag(fs, acks)
	if err != nil {
		return nil, err
	}
	all := acks == "all" || acks == "-1"
	if !all && idempotent && IsSet(fs, "idempotent") {
		return nil, fs.UsageErr("--idempotent requires --acks all")
	}
	opts := []kgo.Opt{kgo.RequiredAcks(a)}
	if !all || !idempotent {
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	return opts, nil
}

// IsSet reports whether the flag name was given on the command line.
func IsSet(fs *FlagSet, name string) bool {
	found := false
	fs.Visit(func(f *flag.Flag) { found = found || f.Name == name })
	return found
}

// Help returns the error that asks for usage to be printed on stdout with
// exit status 0 (-h, --help, help).
func Help(usage string) error { return &HelpRequest{Usage: usage} }

// StringList is a repeatable string flag (`--delete k --delete k2`).
type StringList []string

func (l *StringList) String() string {
	if l == nil {
		return ""
	}
	return strings.Join(*l, ",")
}

func (l *StringList) Set(s string) error {
	if s == "" {
		return fmt.Errorf("empty value")
	}
	*l = append(*l, s)
	return nil
}
