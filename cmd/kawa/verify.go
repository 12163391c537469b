package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/kawa-broker/kawa/cmd/internal/cli"
	"github.com/kawa-broker/kawa/internal/verify"
)

const verifySynopsis = `kawa verify [--semantics S] [--faults LIST] [--duration D] [--spawn | --brokers ADDR] [--seed N] [--out DIR]

Runs real client workloads for each delivery semantic, injects faults on a
schedule derived from --seed, records every send, read and commit, and checks
the history: lost acknowledged writes, duplicates, order, aborted and torn
transactional reads, commits past what was processed or produced, reads past
the LSO. The default semantics are all (at-most-once, at-least-once,
exactly-once) plus share, a KIP-932 share-group workload: three members on a two-partition topic acknowledging at random
(poison records always released), checked for records neither accepted,
rejected nor archived at the delivery-count limit, redelivery after a
confirmed accept or reject, delivery counts past the limit or not rising,
and share-partition start offsets short of the log end after a drain.
Prints a semantic x anomaly table and writes result.json,
history.jsonl and report.html to --out. Exits 1 if a semantic broke its
guarantee.

Faults: kill (SIGKILL the spawned broker, restart it), pause (SIGSTOP it past
the session and transaction timeouts), client-crash (SIGKILL a worker
process), drop (lose one response through the fault proxy), slow (delay write
responses through the proxy); also "all" and "none". kill and pause need
--spawn; the others also work with --brokers.

The checkers are shown not to be blind by the default run itself: with
--seed 1 (kill,client-crash, 60s) Kawa shows at-most-once losing records
and at-least-once processing some twice, both allowed, while exactly-once
shows neither. Progress goes to stderr, the table to stdout.`

// runVerify is `kawa verify`; `kawa verify worker SPEC` is the hidden worker
// process the controller starts.
func runVerify(args []string, stdin io.Reader, stdout io.Writer) error {
	if len(args) > 0 && args[0] == "worker" {
		return verify.WorkerMain(args[1:], stdin, stdout)
	}
	fs := cli.NewFlagSet("verify", verifySynopsis)
	semantics := fs.String("semantics", "all,share", "at-most-once, at-least-once, exactly-once, share, or all (the first three); comma-separated")
	faults := fs.String("faults", "", "comma-separated faults (default kill,client-crash with --spawn, client-crash with --brokers)")
	duration := fs.Duration("duration", 60*time.Second, "how long the workloads run (draining and checking come after)")
	brokers := fs.String("brokers", "", "drive this external broker (`host:port`) instead of spawning one")
	spawn := fs.Bool("spawn", true, "spawn kawa serve on a directory under --out (the default unless --brokers is given)")
	seed := fs.Uint64("seed", 1, "seed of the fault schedule and the workers' random choices")
	out := fs.String("out", "", "directory for result.json, history.jsonl, report.html and logs (default: a new temporary directory)")
	rate := fs.Int("rate", 200, "records per second per producer")
	workers := fs.String("workers", "process", "`mode` of the workers: process (a client crash is a real SIGKILL) or inproc (goroutines; a crash only cancels)")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := verifyConfig(fs, *semantics, *faults, *duration, *seed, *rate)
	if err != nil {
		return err
	}
	if *brokers != "" && cli.IsSet(fs, "spawn") && *spawn {
		return fs.UsageErr("--spawn and --brokers exclude each other")
	}
	dir, err := outDir(*out)
	if err != nil {
		return err
	}
	logs, err := os.Create(filepath.Join(dir, "workers.log"))
	if err != nil {
		return err
	}
	defer logs.Close()
	data, err := setupBroker(fs, &cfg, *brokers, dir)
	if err != nil {
		return err
	}
	if err := setupWorkers(fs, &cfg, *workers, logs); err != nil {
		return err
	}
	return runVerifyConfig(cfg, dir, data, stdout)
}

// verifyConfig parses the semantic, fault and size flags.
func verifyConfig(fs *cli.FlagSet, semantics, faults string, d time.Duration, seed uint64, rate int) (verify.Config, error) {
	var cfg verify.Config
	sems, err := verify.ParseSemantics(semantics)
	if err != nil {
		return cfg, fs.UsageErr("--semantics: %v", err)
	}
	if faults == "" {
		faults = "kill,client-crash"
		if cli.IsSet(fs, "brokers") {
			faults = "client-crash"
		}
	}
	fk, err := verify.ParseFaults(faults)
	if err != nil {
		return cfg, fs.UsageErr("--faults: %v", err)
	}
	if d <= 0 {
		return cfg, fs.UsageErr("--duration must be positive")
	}
	if rate <= 0 {
		return cfg, fs.UsageErr("--rate must be positive")
	}
	cfg = verify.Config{Semantics: sems, Faults: fk, Duration: d, Seed: seed, Rate: rate, Proxy: verify.NewProxy}
	return cfg, nil
}

// setupBroker points cfg at the external broker or a spawned `kawa serve`,
// returning the spawned broker's data directory.
func setupBroker(fs *cli.FlagSet, cfg *verify.Config, brokers, dir string) (string, error) {
	if brokers != "" {
		seeds, err := cli.SeedBrokers(fs, brokers)
		if err != nil {
			return "", err
		}
		for _, f := range cfg.Faults {
			if f == verify.FaultKill || f == verify.FaultPause {
				return "", fs.UsageErr("--faults %s needs --spawn: against --brokers only client-side faults apply", f)
			}
		}
		cfg.Brokers = seeds
		return "", nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	data := filepath.Join(dir, "broker-data")
	blog, err := os.Create(filepath.Join(dir, "broker.log"))
	if err != nil {
		return "", err
	}
	cfg.Broker = &verify.SpawnedBroker{
		Command: func(listen string) *exec.Cmd {
			return exec.Command(exe, "serve", "--listen", listen, "--data-dir", data)
		},
		Log: blog,
	}
	return data, nil
}

// setupWorkers picks the launcher.
func setupWorkers(fs *cli.FlagSet, cfg *verify.Config, mode string, logs io.Writer) error {
	switch mode {
	case "process":
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		cfg.Launcher = &verify.ProcLauncher{
			Command: func(spec string) *exec.Cmd { return exec.Command(exe, "verify", "worker", spec) },
			Log:     logs,
		}
	case "inproc":
		cfg.Launcher = verify.InprocLauncher{}
	default:
		return fs.UsageErr("--workers must be process or inproc, got %q", mode)
	}
	return nil
}

// outDir creates the output directory (a temporary one when dir is empty).
func outDir(dir string) (string, error) {
	if dir == "" {
		return os.MkdirTemp("", "kawa-verify-")
	}
	return dir, os.MkdirAll(dir, 0o755)
}

// runVerifyConfig runs, writes the files and the table, and turns a broken
// guarantee into an error (exit status 1). The spawned broker's data is
// removed after a passing run and kept for a post-mortem otherwise.
func runVerifyConfig(cfg verify.Config, dir, data string, stdout io.Writer) error {
	hist, err := os.Create(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		return err
	}
	defer hist.Close()
	cfg.History = hist
	cfg.Progress = progressPrinter(os.Stderr)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(os.Stderr, "kawa verify: semantics %s, faults %s, %v, seed %d, output in %s\n",
		joinSems(cfg.Semantics), joinFaults(cfg.Faults), cfg.Duration, cfg.Seed, dir)
	res, err := verify.Run(ctx, cfg)
	fmt.Fprintln(os.Stderr)
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	if err := writeReports(res, dir); err != nil {
		return err
	}
	res.WriteTable(stdout)
	fmt.Fprintf(stdout, "report: %s\n", filepath.Join(dir, "report.html"))
	if res.Pass() && data != "" {
		os.RemoveAll(data)
	}
	if v := res.Violations(); len(v) > 0 {
		var parts []string
		for _, f := range v {
			parts = append(parts, fmt.Sprintf("%s %s=%d (expected %s)", f.Semantic, f.Check, f.Observed, f.Expected))
		}
		return errors.New("verify: guarantee violated: " + strings.Join(parts, ", "))
	}
	return nil
}

func writeReports(res *verify.Result, dir string) error {
	for name, write := range map[string]func(io.Writer) error{
		"result.json": res.WriteJSON,
		"report.html": res.WriteHTML,
	} {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		err = write(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	return nil
}

// progressPrinter returns the progress callback: one line rewritten in place
// on a terminal, a new line every five seconds otherwise (CI logs).
func progressPrinter(w *os.File) func(verify.Progress) {
	tty := false
	if st, err := w.Stat(); err == nil {
		tty = st.Mode()&os.ModeCharDevice != 0
	}
	var last time.Time
	return func(p verify.Progress) {
		line := fmt.Sprintf("[%s] %3.0fs/%v  acked %d  processed %d  faults %d  workers %d/%d",
			p.Phase, p.Elapsed.Seconds(), p.Duration, p.Acked, p.Processed, p.Faults, p.Running, p.Slots)
		if tty {
			fmt.Fprintf(w, "\r\033[K%s", line)
			return
		}
		if time.Since(last) >= 5*time.Second {
			last = time.Now()
			fmt.Fprintln(w, line)
		}
	}
}

func joinSems(s []verify.Semantic) string {
	parts := make([]string, len(s))
	for i, v := range s {
		parts[i] = string(v)
	}
	return strings.Join(parts, ",")
}

func joinFaults(f []verify.FaultKind) string {
	if len(f) == 0 {
		return "none"
	}
	parts := make([]string, len(f))
	for i, v := range f {
		parts[i] = string(v)
	}
	return strings.Join(parts, ",")
}
