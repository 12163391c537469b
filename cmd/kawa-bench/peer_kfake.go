package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/kawa-broker/kawa/cmd/internal/cli"
	"github.com/twmb/franz-go/pkg/kfake"
)

// runBenchPeerKfake implements `kawa-bench peer-kfake`: franz-go's kfake as
// a one-broker peer on a fixed port until SIGINT/SIGTERM.
func runBenchPeerKfake(args []string, stdout io.Writer) error {
	fs := cli.NewFlagSet("peer-kfake", "kawa-bench peer-kfake [--port 19092] [--data-dir D] [--sync-writes]")
	port := fs.Int("port", 19092, "port to listen on at 127.0.0.1 (0: any free port)")
	dataDir := fs.String("data-dir", "", "persist to this directory (kfake.DataDir); empty: in memory, which grows without bound")
	syncWrites := fs.Bool("sync-writes", false, "fsync every produced batch before acking (kfake.SyncWrites); needs --data-dir")
	seed := fs.String("seed-topic", "", "create this topic at start")
	partitions := fs.Int("partitions", 1, "partitions of --seed-topic")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case *port < 0 || *port > 65535:
		return fs.UsageErr("--port must be in [0, 65535]")
	case *syncWrites && *dataDir == "":
		return fs.UsageErr("--sync-writes needs --data-dir")
	case *partitions < 1:
		return fs.UsageErr("--partitions must be >= 1")
	}
	opts := []kfake.Opt{kfake.Ports(*port)}
	if *dataDir != "" {
		opts = append(opts, kfake.DataDir(*dataDir))
	}
	if *syncWrites {
		opts = append(opts, kfake.SyncWrites())
	}
	if *seed != "" {
		opts = append(opts, kfake.SeedTopics(int32(*partitions), *seed))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return servePeerKfake(ctx, opts, stdout)
}

// servePeerKfake runs a kfake cluster until ctx ends, printing its address
// once it listens (scripts wait for that line).
func servePeerKfake(ctx context.Context, opts []kfake.Opt, stdout io.Writer) error {
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return fmt.Errorf("bench peer-kfake: %w", err)
	}
	fmt.Fprintf(stdout, "kfake listening on %s\n", c.ListenAddrs()[0])
	<-ctx.Done()
	c.Close() // with a data dir, syncs and closes segments
	fmt.Fprintln(stdout, "kfake stopped")
	return nil
}
