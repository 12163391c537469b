package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/kawa-broker/kawa/cmd/internal/cli"
	"github.com/twmb/franz-go/pkg/kadm"
)

// adminFunc runs one admin subcommand against the broker.
type adminFunc = func(ctx context.Context, adm *kadm.Client, args []string, w io.Writer) error

// adminCmd is one subcommand of a kadm-based command group (`kawa topic`,
// `kawa group`): its name, synopsis, required positional arguments, and a
// setup that declares its flags and returns what to run.
type adminCmd struct {
	name     string
	synopsis string
	nargs    int // required positional arguments
	setup    func(fs *cli.FlagSet) adminFunc
	// extraTime, if set, is added to the default --timeout once the flags are
	// parsed: work that grows with a flag (the partitions of `topic create`)
	// gets time in proportion. An explicit --timeout is taken as given.
	extraTime func(fs *cli.FlagSet) time.Duration
}

// defaultAdminTimeout is --timeout's default.
const defaultAdminTimeout = 10 * time.Second

// flagSet reports whether the flag name was given on the command line.
func flagSet(fs *cli.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// noFlags adapts a subcommand that declares no flags of its own.
func noFlags(f adminFunc) func(*cli.FlagSet) adminFunc {
	return func(*cli.FlagSet) adminFunc { return f }
}

// runAdmin dispatches args[0] among cmds of the command group group.
func runAdmin(group, usage string, cmds []adminCmd, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return cli.UsageErrorf(group, usage, "missing %s subcommand", group)
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		return cli.Help(usage)
	}
	for _, c := range cmds {
		if c.name == args[0] {
			return c.run(group, args[1:], stdout)
		}
	}
	return cli.UsageErrorf(group, usage, "unknown %s subcommand %q", group, args[0])
}

// run parses the subcommand's flags, connects and runs it with a timeout.
func (c adminCmd) run(group string, args []string, stdout io.Writer) error {
	fs := cli.NewFlagSet(group+" "+c.name, c.synopsis)
	brokers := cli.BrokersFlag(fs)
	timeout := fs.Duration("timeout", defaultAdminTimeout, "give up on the broker after this long")
	exec := c.setup(fs)
	pos, err := cli.ParseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if c.extraTime != nil && !flagSet(fs, "timeout") {
		*timeout += c.extraTime(fs)
	}
	if len(pos) != c.nargs {
		return fs.UsageErr("want %d argument(s), got %d", c.nargs, len(pos))
	}
	cl, err := cli.ClientFor(fs, *brokers)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	adm := kadm.NewClient(cl)
	// The broker-side timeout of CreateTopics and the like (kadm's default is
	// 15 s) follows --timeout too, so a long one is not cut short there.
	adm.SetTimeoutMillis(int32(min(timeout.Milliseconds(), math.MaxInt32)))
	if err := exec(ctx, adm, pos, stdout); err != nil {
		return fmt.Errorf("%s %s: %w", group, c.name, err)
	}
	return nil
}
