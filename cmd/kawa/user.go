package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kawa-broker/kawa/cmd/internal/cli"
	"github.com/kawa-broker/kawa/internal/auth"
	"github.com/kawa-broker/kawa/internal/vfs"
)

const userUsage = `usage: kawa user <set|list|delete> [flags]

  set NAME --mechanism SCRAM-SHA-512 --password P [--iterations 4096]
  list
  delete NAME --mechanism SCRAM-SHA-512

SCRAM credentials (salt, iterations, StoredKey, ServerKey; never the
password). With --data-dir DIR every form edits the store of a broker that
is not running, as kafka-storage format --add-scram does: that is how the
first administrator is created before the broker starts. With --brokers
(and --command-config for a secured listener) it goes through the broker's
AlterUserScramCredentials / DescribeUserScramCredentials (KIP-554).
`

// runUser manages SCRAM credentials offline in a data directory.
func runUser(args []string, _ io.Reader, stdout io.Writer) error {
	if len(args) == 0 {
		return cli.UsageErrorf("user", userUsage, "missing user subcommand")
	}
	sub := args[0]
	if sub == "-h" || sub == "--help" || sub == "help" {
		return cli.Help(userUsage)
	}
	if sub != "set" && sub != "list" && sub != "delete" {
		return cli.UsageErrorf("user", userUsage, "unknown user subcommand %q", sub)
	}
	fs := cli.NewFlagSet("user "+sub, "manage SCRAM credentials in a data directory")
	dataDir := fs.String("data-dir", "", "the broker's data directory (offline: the broker must not be running)")
	brokers := cli.BrokersFlag(fs)
	timeout := fs.Duration("timeout", 10*time.Second, "give up on the broker after this long (--brokers)")
	mech := fs.String("mechanism", auth.ScramSHA512, "SCRAM-SHA-256 or SCRAM-SHA-512")
	password := fs.String("password", "", "the password (set)")
	iters := fs.Int("iterations", auth.MinIterations, fmt.Sprintf("PBKDF2 iterations, %d-%d (set)", auth.MinIterations, auth.MaxIterations))
	pos, err := cli.ParseInterspersed(fs, args[1:])
	if err != nil {
		return err
	}
	want := 1
	if sub == "list" {
		want = 0
	}
	if len(pos) != want {
		return fs.UsageErr("want %d argument(s), got %d", want, len(pos))
	}
	if sub == "set" && *password == "" {
		return fs.UsageErr("--password is required")
	}
	online := cli.IsSet(fs, "brokers")
	if online == (*dataDir != "") {
		return fs.UsageErr("give exactly one of --data-dir (offline) and --brokers (online)")
	}
	if online {
		return userOnline(fs, *brokers, *timeout, sub, pos, *mech, *password, *iters, stdout)
	}
	// The broker holds this lock while it runs: editing its store under it
	// would be overwritten by the broker's next write.
	unlock, err := lockDataDir(*dataDir)
	if err != nil {
		return err
	}
	defer unlock()
	store, err := auth.OpenStore(vfs.OS, *dataDir)
	if err != nil {
		return err
	}
	switch sub {
	case "set":
		if err := store.SetPassword(pos[0], *mech, *password, *iters); err != nil {
			return fmt.Errorf("user set: %w", err)
		}
		fmt.Fprintf(stdout, "set %s credential of %s (%d iterations)\n", *mech, pos[0], *iters)
	case "delete":
		if err := store.Delete(pos[0], *mech); err != nil {
			return fmt.Errorf("user delete %s %s: %w", pos[0], *mech, err)
		}
		fmt.Fprintf(stdout, "deleted %s credential of %s\n", *mech, pos[0])
	case "list":
		users := store.Users()
		names := make([]string, 0, len(users))
		for u := range users {
			names = append(names, u)
		}
		slices.Sort(names)
		for _, u := range names {
			for _, c := range users[u] {
				fmt.Fprintf(stdout, "%s\t%s\t%d\n", u, c.Mechanism, c.Iterations)
			}
		}
	}
	return nil
}

// userOnline runs a `kawa user` form through the broker (KIP-554).
func userOnline(fs *cli.FlagSet, brokers string, timeout time.Duration, sub string, pos []string, mech, password string, iters int, stdout io.Writer) error {
	var km kadm.ScramMechanism
	switch mech {
	case auth.ScramSHA256:
		km = kadm.ScramSha256
	case auth.ScramSHA512:
		km = kadm.ScramSha512
	default:
		return fs.UsageErr("--mechanism %q: want SCRAM-SHA-256 or SCRAM-SHA-512", mech)
	}
	cl, err := cli.ClientFor(fs, brokers)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	adm := kadm.NewClient(cl)
	switch sub {
	case "set", "delete":
		var up []kadm.UpsertSCRAM
		var del []kadm.DeleteSCRAM
		if sub == "set" {
			up = []kadm.UpsertSCRAM{{User: pos[0], Mechanism: km, Iterations: int32(iters), Password: password}}
		} else {
			del = []kadm.DeleteSCRAM{{User: pos[0], Mechanism: km}}
		}
		res, err := adm.AlterUserSCRAMs(ctx, del, up)
		if err == nil {
			err = res.Error()
		}
		if err != nil {
			return fmt.Errorf("user %s %s: %w", sub, pos[0], err)
		}
		fmt.Fprintf(stdout, "%s %s credential of %s\n", map[string]string{"set": "set", "delete": "deleted"}[sub], mech, pos[0])
	case "list":
		d, err := adm.DescribeUserSCRAMs(ctx)
		if err == nil {
			err = d.Error()
		}
		if err != nil {
			return fmt.Errorf("user list: %w", err)
		}
		names := make([]string, 0, len(d))
		for u := range d {
			names = append(names, u)
		}
		slices.Sort(names)
		for _, u := range names {
			for _, c := range d[u].CredInfos {
				fmt.Fprintf(stdout, "%s\t%s\t%d\n", u, c.Mechanism, c.Iterations)
			}
		}
	}
	return nil
}
