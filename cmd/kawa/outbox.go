package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/kawa-broker/kawa/cmd/internal/cli"
	"github.com/kawa-broker/kawa/outbox"
	"github.com/kawa-broker/kawa/sqlurl"
)

const outboxUsage = `usage: kawa outbox status --db URL
       kawa outbox dead list --db URL [--limit N]
       kawa outbox dead retry ID --db URL
       kawa outbox dead drop ID --db URL

Inspects a transactional outbox (package outbox) in its database.
--db is sqlite:///absolute/path.db or postgres://... (the sqlurl form).

  status       rows unsent, oldest unsent age, dead rows, parked keys and
               rows, and each shard's lease (owner, epoch, expiry)
  dead list    the dead rows: records that failed every publish attempt;
               each parks its key (later rows of the key wait)
  dead retry   move dead row ID back into the outbox, to be published
               before the later rows of its key, with its original kawa-seq
  dead drop    delete dead row ID for good (consumers see a kawa-seq gap)
`

// runOutbox implements `kawa outbox`.
func runOutbox(args []string, _ io.Reader, stdout io.Writer) error {
	if len(args) == 0 {
		return cli.UsageErrorf("outbox", outboxUsage, "missing outbox subcommand")
	}
	switch args[0] {
	case "-h", "--help", "help":
		return cli.Help(outboxUsage)
	case "status":
		return outboxCmd("outbox status", "kawa outbox status --db URL", args[1:], 0, func(ctx context.Context, ob *outbox.Outbox, _ []string, _ int) error {
			st, err := ob.Status(ctx)
			if err != nil {
				return err
			}
			printOutboxStatus(stdout, st)
			return nil
		})
	case "dead":
		if len(args) < 2 {
			return cli.UsageErrorf("outbox dead", outboxUsage, "missing dead subcommand (list, retry, drop)")
		}
		switch args[1] {
		case "list", "ls":
			return outboxCmd("outbox dead list", "kawa outbox dead list --db URL [--limit N]", args[2:], 0, func(ctx context.Context, ob *outbox.Outbox, _ []string, limit int) error {
				dead, err := ob.ListDead(ctx, limit)
				if err != nil {
					return err
				}
				printDeadRows(stdout, dead)
				return nil
			})
		case "retry":
			return outboxDeadOp("retry", args[2:], stdout, (*outbox.Outbox).RetryDead, "moved back to the outbox")
		case "drop", "rm":
			return outboxDeadOp("drop", args[2:], stdout, (*outbox.Outbox).DropDead, "dropped")
		}
		return cli.UsageErrorf("outbox dead", outboxUsage, "unknown dead subcommand %q", args[1])
	}
	return cli.UsageErrorf("outbox", outboxUsage, "unknown outbox subcommand %q", args[0])
}

// outboxDeadOp runs `kawa outbox dead retry|drop ID`.
func outboxDeadOp(verb string, args []string, stdout io.Writer, op func(*outbox.Outbox, context.Context, int64) error, done string) error {
	name := "outbox dead " + verb
	return outboxCmd(name, "kawa "+name+" ID --db URL", args, 1, func(ctx context.Context, ob *outbox.Outbox, pos []string, _ int) error {
		id, err := strconv.ParseInt(pos[0], 10, 64)
		if err != nil {
			return cli.UsageErrorf(name, outboxUsage, "ID %q is not a row id", pos[0])
		}
		if err := op(ob, ctx, id); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "dead row %d %s\n", id, done)
		return nil
	})
}

// outboxCmd parses --db (and --limit), wants nargs positional arguments,
// opens the database and runs fn on its outbox.
func outboxCmd(name, synopsis string, args []string, nargs int, fn func(context.Context, *outbox.Outbox, []string, int) error) error {
	fs := cli.NewFlagSet(name, synopsis)
	dbURL := fs.String("db", "", "outbox database: sqlite:///path.db or postgres://...")
	limit := fs.Int("limit", 0, "dead list: print at most this many rows (0: all)")
	timeout := fs.Duration("timeout", 30*time.Second, "give up on the database after this long")
	pos, err := cli.ParseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != nargs {
		return fs.UsageErr("want %d argument(s), got %d", nargs, len(pos))
	}
	if *dbURL == "" {
		return fs.UsageErr("--db is required")
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	db, d, err := sqlurl.OpenExisting(ctx, *dbURL) // inspecting never creates a database
	if err != nil {
		return err
	}
	defer db.Close()
	ob, err := outbox.New(db, d, outbox.Config{})
	if err != nil {
		return err
	}
	return fn(ctx, ob, pos, *limit)
}

func printOutboxStatus(w io.Writer, st outbox.Status) {
	fmt.Fprintf(w, "unsent rows:   %d\n", st.Unsent)
	fmt.Fprintf(w, "oldest unsent: %s\n", st.OldestUnsent.Round(time.Millisecond))
	fmt.Fprintf(w, "dead rows:     %d\n", st.Dead)
	fmt.Fprintf(w, "parked keys:   %d (%d rows waiting)\n", st.ParkedKeys, st.ParkedRows)
	if len(st.Leases) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SHARD\tOWNER\tEPOCH\tEXPIRES")
	for _, l := range st.Leases {
		owner, expires := l.Owner, "-"
		if owner == "" {
			owner = "-"
		}
		if !l.ExpiresAt.IsZero() {
			expires = l.ExpiresAt.UTC().Format(time.RFC3339Nano)
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\n", l.Shard, owner, l.Epoch, expires)
	}
	tw.Flush()
}

func printDeadRows(w io.Writer, dead []outbox.DeadRow) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTOPIC\tKEY\tSEQ\tMESSAGE-ID\tATTEMPTS\tDIED\tERROR")
	for _, d := range dead {
		fmt.Fprintf(tw, "%d\t%s\t%q\t%d\t%s\t%d\t%s\t%s\n", d.ID, d.Topic, d.Key, d.Seq, d.MessageID, d.Attempts,
			d.DiedAt.UTC().Format(time.RFC3339), d.Error)
	}
	tw.Flush()
}
