// Command kawa-powercut runs the real `kawa serve` binary on a file system
// that loses power (cmd/internal/powerfs: FUSE, contents in memory, only
// what was fsynced survives a cut) under `kawa verify`'s workloads, and
// checks the history with verify's checkers: with --fsync=always there
// must be no lost acknowledged write, no duplicate, no aborted read and no
// committed offset rolled back, across every cut (issue 11, item 13).
//
// With --fsync=never the same run must show lost acknowledged writes: the
// exit status is then 0 only if the checker saw them, which shows it is not
// blind to what a power cut takes.
//
// It is its own command, not a `kawa verify` mode, so that the broker
// binary links no FUSE library; it needs /dev/fuse and the right to mount.
//
//	go build -o /tmp/kawa ./cmd/kawa
//	go run ./cmd/kawa-powercut --kawa /tmp/kawa --cuts 50
//	go run ./cmd/kawa-powercut --kawa /tmp/kawa --cuts 5 --fsync never
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
	"sync"
	"syscall"
	"time"

	"github.com/kawa-broker/kawa/cmd/internal/cli"
	"github.com/kawa-broker/kawa/cmd/internal/powerfs"
	"github.com/kawa-broker/kawa/internal/verify"
)

const synopsis = `kawa-powercut --kawa PATH [--cuts N] [--every D] [--fsync always|never] [--seed N] [--out DIR]

Mounts a power-loss file system (FUSE) under --out, runs PATH serve with its
--data-dir there and verify's workloads of every semantic against it
(idempotent producers, transactional writers and a consume-transform-produce
pipeline, committing consumer groups, read_committed readers; workers are
PATH verify worker processes), and cuts the power --cuts times, --every
apart: the broker is SIGKILLed, every write not fsynced and every directory
entry not made durable by fsyncing its directory is dropped, and the broker
restarts on what is left. Then it drains, scans and checks the history.

Exit status 0: with --fsync=always, every guarantee held and the broker
restarted after every cut; with --fsync=never, lost acknowledged writes
were reported (the checker sees what a power cut takes). Exit 1 otherwise.`

func main() {
	os.Exit(cli.ExitStatus("kawa-powercut", run(os.Args[1:], os.Stdout), os.Stdout, os.Stderr))
}

// options are the parsed flags.
type options struct {
	kawa  string
	cuts  int
	every time.Duration
	down  time.Duration
	fsync string
	fault verify.FaultKind
	seed  uint64
	rate  int
	out   string
}

func parse(args []string) (options, error) {
	fs := cli.NewFlagSet("", synopsis)
	var o options
	fs.StringVar(&o.kawa, "kawa", "", "path of the kawa binary to run (`go build -o /tmp/kawa ./cmd/kawa`)")
	fs.IntVar(&o.cuts, "cuts", 50, "power cuts to inject")
	fs.DurationVar(&o.every, "every", 3*time.Second, "time from one cut to the next (the broker's restart included)")
	fs.DurationVar(&o.down, "down", 200*time.Millisecond, "time the power stays off")
	fs.StringVar(&o.fsync, "fsync", "always", "the broker's --fsync: always (must pass) or never (must show lost writes)")
	fault := fs.String("fault", "power-cut", "power-cut, or kill (SIGKILL only, nothing dropped: the control run that tells a power-loss bug from a crash bug)")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the workers' random choices")
	fs.IntVar(&o.rate, "rate", 100, "records per second per producer")
	fs.StringVar(&o.out, "out", "", "directory for the mount point, result.json, history.jsonl and logs (default: a new temporary directory)")
	if err := cli.ParseFlags(fs, args); err != nil {
		return o, err
	}
	o.fault = verify.FaultKind(*fault)
	switch {
	case o.fault != verify.FaultPowerCut && o.fault != verify.FaultKill:
		return o, fs.UsageErr("--fault must be power-cut or kill")
	case o.kawa == "":
		return o, fs.UsageErr("--kawa is required")
	case o.cuts < 1:
		return o, fs.UsageErr("--cuts must be at least 1")
	case o.every < time.Second || o.down <= 0 || o.down >= o.every:
		return o, fs.UsageErr("--every must be at least 1s and --down positive and shorter than --every")
	case o.fsync != "always" && o.fsync != "never":
		return o, fs.UsageErr("--fsync must be always or never")
	case o.rate <= 0:
		return o, fs.UsageErr("--rate must be positive")
	}
	return o, nil
}

func run(args []string, stdout io.Writer) error {
	o, err := parse(args)
	if err != nil {
		return err
	}
	kawa, err := filepath.Abs(o.kawa)
	if err != nil {
		return err
	}
	if err := powerfs.Available(); err != nil {
		return err
	}
	dir := o.out
	if dir == "" {
		if dir, err = os.MkdirTemp("", "kawa-powercut-"); err != nil {
			return err
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	mnt := filepath.Join(dir, "mnt")
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		return err
	}
	pfs, err := powerfs.Mount(mnt)
	if err != nil {
		return err
	}
	defer pfs.Unmount()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	res, broker, err := runVerify(ctx, o, kawa, dir, pfs)
	if err != nil {
		return err
	}
	err = report(o, res, broker, pfs, dir, stdout)
	if err != nil {
		// The mount's contents go with the unmount: keep the broker's data
		// (as its clean stop at the end of the run left it) for a post-mortem.
		if cerr := os.CopyFS(filepath.Join(dir, "broker-data"), os.DirFS(filepath.Join(pfs.Dir(), "kawa-data"))); cerr != nil {
			fmt.Fprintf(os.Stderr, "kawa-powercut: keeping the broker's data: %v\n", cerr)
		}
	}
	return err
}

// schedule is one power cut every o.every after a first o.every of
// warm-up; the workloads run one more o.every after the last cut.
func schedule(o options) ([]verify.ScheduledFault, time.Duration) {
	var s []verify.ScheduledFault
	for i := range o.cuts {
		s = append(s, verify.ScheduledFault{At: time.Duration(i+1) * o.every, Kind: o.fault, Dur: o.down})
	}
	return s, time.Duration(o.cuts+2) * o.every
}

func runVerify(ctx context.Context, o options, kawa, dir string, pfs *powerfs.FS) (*verify.Result, *cutBroker, error) {
	blog, err := os.Create(filepath.Join(dir, "broker.log"))
	if err != nil {
		return nil, nil, err
	}
	defer blog.Close()
	wlog, err := os.Create(filepath.Join(dir, "workers.log"))
	if err != nil {
		return nil, nil, err
	}
	defer wlog.Close()
	hist, err := os.Create(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		return nil, nil, err
	}
	defer hist.Close()

	data := filepath.Join(pfs.Dir(), "kawa-data") // created by kawa serve itself: its entry must be made durable too
	broker := &cutBroker{fs: pfs, SpawnedBroker: verify.SpawnedBroker{
		Command: func(listen string) *exec.Cmd {
			return exec.Command(kawa, "serve", "--listen", listen, "--data-dir", data, "--fsync", o.fsync)
		},
		Log: blog,
	}}
	sched, d := schedule(o)
	cfg := verify.Config{
		Semantics: verify.AllSemantics,
		Faults:    []verify.FaultKind{o.fault},
		Schedule:  sched,
		Duration:  d,
		Seed:      o.seed,
		Rate:      o.rate,
		Broker:    broker,
		Launcher: &verify.ProcLauncher{
			Command: func(spec string) *exec.Cmd { return exec.Command(kawa, "verify", "worker", spec) },
			Log:     wlog,
		},
		History:  hist,
		Progress: progress(o.fault, o.cuts),
	}
	fmt.Fprintf(os.Stderr, "kawa-powercut: %d cuts every %v, --fsync=%s, seed %d, output in %s\n", o.cuts, o.every, o.fsync, o.seed, dir)
	res, err := verify.Run(ctx, cfg)
	fmt.Fprintln(os.Stderr)
	if err != nil {
		return nil, nil, fmt.Errorf("verify: %w", err)
	}
	f, err := os.Create(filepath.Join(dir, "result.json"))
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	if err := res.WriteJSON(f); err != nil {
		return nil, nil, err
	}
	return res, broker, nil
}

// progress prints a line every five seconds (CI logs, go test -v).
func progress(fault verify.FaultKind, n int) func(verify.Progress) {
	var last time.Time
	return func(p verify.Progress) {
		if time.Since(last) < 5*time.Second {
			return
		}
		last = time.Now()
		fmt.Fprintf(os.Stderr, "[%s] %3.0fs/%v  acked %d  processed %d  %s %d/%d\n", p.Phase, p.Elapsed.Seconds(), p.Duration,
			p.Acked, p.Processed, fault, p.Faults, n)
	}
}

// report prints the table and turns the outcome into the exit status.
func report(o options, res *verify.Result, broker *cutBroker, pfs *powerfs.FS, dir string, stdout io.Writer) error {
	res.WriteTable(stdout)
	cuts, restartErrs := pfs.Cuts(), broker.restartErrors()
	if o.fault == verify.FaultKill {
		cuts = res.FaultsInjected
	}
	lost := 0
	for _, f := range res.Findings {
		if f.Check == verify.CheckLostWrite && f.Expected == verify.ExpectZero {
			lost += f.Observed
		}
	}
	fmt.Fprintf(stdout, "%s faults: %d of %d; restarts that failed: %d; lost acknowledged writes (at-least-once, exactly-once): %d\noutput: %s\n",
		o.fault, cuts, o.cuts, len(restartErrs), lost, dir)
	var problems []string
	if cuts < o.cuts {
		problems = append(problems, fmt.Sprintf("only %d of %d %s faults happened", cuts, o.cuts, o.fault))
	}
	for _, e := range restartErrs {
		problems = append(problems, "broker did not start after a fault: "+e)
	}
	if o.fsync == "never" {
		if lost == 0 {
			problems = append(problems, "--fsync=never lost no acknowledged write: the checker is blind to power loss")
		}
	} else {
		for _, f := range res.Violations() {
			problems = append(problems, fmt.Sprintf("%s %s=%d (expected %s)", f.Semantic, f.Check, f.Observed, f.Expected))
		}
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

// cutBroker is a spawned `kawa serve` whose data directory is on a
// power-loss file system.
type cutBroker struct {
	verify.SpawnedBroker
	fs *powerfs.FS

	mu       sync.Mutex
	killed   bool     // killed (or cut) since the last Start
	startErr []string // failed starts after a kill or cut
}

var _ verify.PowerCutter = (*cutBroker)(nil)

// PowerCut implements verify.PowerCutter: SIGKILL, then the cut (which
// needs the broker's files closed: the kill comes first, as with power).
func (b *cutBroker) PowerCut() error {
	if err := b.Kill(); err != nil {
		return err
	}
	return b.fs.Cut()
}

// Kill implements verify.BrokerControl; the next Start is a restart after
// a crash, whose failure is recorded.
func (b *cutBroker) Kill() error {
	err := b.SpawnedBroker.Kill()
	b.mu.Lock()
	b.killed = true
	b.mu.Unlock()
	return err
}

// Start implements verify.BrokerControl, noting a start that fails after
// a kill or cut: the broker must always start on what a power cut left.
func (b *cutBroker) Start(ctx context.Context) error {
	err := b.SpawnedBroker.Start(ctx)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.killed && err != nil {
		b.startErr = append(b.startErr, err.Error())
	}
	b.killed = false
	return err
}

func (b *cutBroker) restartErrors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.startErr...)
}
