package main

import (
	"fmt"
	"io"
	"slices"

	"github.com/kawa-broker/kawa/cmd/internal/cli"
	"github.com/kawa-broker/kawa/internal/auth"
	"github.com/kawa-broker/kawa/internal/vfs"
)

const userUsage = `usage: kawa user <set|list|delete> [flags]

  set NAME --mechanism SCRAM-SHA-512 --password P [--iterations 4096]
  list
  delete NAME --mechanism SCRAM-SHA-512

SCRAM credentials (salt, iterations, StoredKey, ServerKey; never the
password). Every form takes --data-dir DIR and edits the store of a broker
that is not running, as kafka-storage format --add-scram does: that is how
the first administrator is created before the broker starts.
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
	dataDir := fs.String("data-dir", "", "the broker's data directory (required; the broker must not be running)")
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
	if *dataDir == "" {
		return fs.UsageErr("--data-dir is required")
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
		if *password == "" {
			return fs.UsageErr("--password is required")
		}
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
