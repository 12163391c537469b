// Command kawa is Kawa's single binary: the broker (`kawa serve`) and the
// client-side tools that talk to any Kafka-compatible broker over franz-go
// (`topic`, `produce`, `consume`, ...). The benchmark harness is a separate
// command, cmd/kawa-bench, so this binary links no benchmark peer.
//
// Exit status: 0 on success, 2 on a usage error (unknown subcommand, bad or
// missing flag), 1 on any other failure. Failures print one line to stderr.
package main

import (
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"

	"github.com/kawa-broker/kawa/cmd/internal/cli"
)

// command is one row of the dispatch table.
type command struct {
	name    string
	summary string
	run     func(args []string, stdin io.Reader, stdout io.Writer) error
}

// commands is the dispatch table. It is built by a function rather than a
// package variable because `help` refers back to it.
func commands() []command {
	return []command{
		{"serve", "run the broker", func(args []string, _ io.Reader, _ io.Writer) error { return runServe(args) }},
		{"topic", "create, list, describe or delete topics", runTopic},
		{"produce", "write stdin lines to a topic, one record per line", runProduce},
		{"consume", "print a topic's records, one per line", runConsume},
		{"group", "list, describe, delete consumer groups or reset their offsets", runGroup},
		{"share-group", "list, describe share groups (KIP-932 queues) or reset their start offsets", runShareGroup},
		{"producers", "describe idempotent/transactional producer state per partition", runProducers},
		{"txn", "list, describe or abort transactions", runTxn},
		{"user", "set, list or delete SCRAM credentials in a data directory", runUser},
		{"acl", "create, list or delete ACLs (Kafka's kafka-acls vocabulary)", runACL},
		{"outbox", "show a transactional outbox's status, list, retry or drop its dead rows", runOutbox},
		{"verify", "check delivery semantics under faults (loss, duplicates, aborted reads)", runVerify},
		{"version", "print the build version", runVersion},
		{"help", "show help for kawa or a subcommand", runHelp},
	}
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run dispatches args[0] and maps the outcome to an exit status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, mainUsage())
		return 2
	}
	name := args[0]
	if name == "-h" || name == "--help" || name == "-help" {
		name = "help"
	}
	for _, c := range commands() {
		if c.name == name {
			return cli.ExitStatus("kawa", c.run(args[1:], stdin, stdout), stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "kawa: unknown subcommand %q\n\n%s", name, mainUsage())
	return 2
}

func mainUsage() string {
	var b strings.Builder
	b.WriteString("usage: kawa <subcommand> [flags]\n\nsubcommands:\n")
	for _, c := range commands() {
		fmt.Fprintf(&b, "  %-9s %s\n", c.name, c.summary)
	}
	b.WriteString("\nRun 'kawa help <subcommand>' or 'kawa <subcommand> -h' for its flags.\n")
	return b.String()
}

// runHelp prints the main usage, or a subcommand's usage by invoking it with -h.
func runHelp(args []string, stdin io.Reader, stdout io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stdout, mainUsage())
		return nil
	}
	for _, c := range commands() {
		if c.name == args[0] && c.name != "help" && c.name != "serve" {
			return c.run(append(args[1:len(args):len(args)], "-h"), stdin, stdout)
		}
	}
	if args[0] == "serve" {
		return runServe([]string{"-h"})
	}
	return cli.UsageErrorf("help", mainUsage(), "unknown subcommand %q", args[0])
}

// version is set at link time (-ldflags "-X main.version=v1.2.3"); without it
// the module version and VCS revision from the build info are printed.
var version = ""

func runVersion(args []string, _ io.Reader, stdout io.Writer) error {
	fs := cli.NewFlagSet("version", "kawa version")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "kawa %s\n", buildVersion())
	return nil
}

func buildVersion() string {
	if version != "" {
		return version
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown)"
	}
	v := info.Main.Version
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			v += " " + s.Value[:12]
		}
	}
	return strings.TrimSpace(v + " " + info.GoVersion)
}
