// Command orders is the SDK's worked example (issue 9 item 4): an order
// service whose database writes reach a consumer's database exactly once,
// through package outbox, the broker, package delivery's at-least-once loop
// and package dedup.
//
//	go run ./examples/orders --brokers 127.0.0.1:9092 --db sqlite:///tmp/orders.db --orders 500 --crash-every 40
//
// The main process is a supervisor. It prepares the schema and topics, runs
// the application's order transactions itself, and re-executes its own binary
// with --role relay and --role consumer for the outbox relay and the consumer.
// With --crash-every N those children SIGKILL themselves at a named crash
// point of the SDK packages after every N records (the point rotates through
// outbox's, delivery's and dedup's Point/Crash constants), and the supervisor
// restarts them. When every order is applied it stops the children, checks
// the databases and the topic exactly (see verify.go) and prints, as its last
// line,
//
//	verified: 500 orders, 500 applied exactly once, inventory consistent
//
// or exits 1 with the first discrepancy. See README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kawa-broker/kawa/outbox"
)

// config is every flag; the supervisor passes it on to its children as flags
// (args), so one struct is the one source of a run's parameters.
type config struct {
	brokers     string
	db          string
	orders      int
	products    int
	rollbackPct int
	seed        uint64
	crashEvery  int
	relayMode   string
	dedupKey    string
	runID       string
	partitions  int
	shards      int
	batch       int
	consumers   int
	leaseTTL    time.Duration
	pollMax     time.Duration
	timeout     time.Duration
	latency     bool
	rate        int

	// Set by the supervisor for its children only.
	role        string
	crashIndex  int
	instance    int
	latencyFile string
	parentPipe  bool
}

func (c *config) flags(fs *flag.FlagSet) {
	fs.StringVar(&c.brokers, "brokers", "127.0.0.1:9092", "seed brokers, comma-separated host:port")
	fs.StringVar(&c.db, "db", "", "database URL: sqlite:///abs/path.db or postgres://... (package sqlurl); required")
	fs.IntVar(&c.orders, "orders", 500, "orders to commit (rolled-back transactions come on top)")
	fs.IntVar(&c.products, "products", 20, "products (record keys)")
	fs.IntVar(&c.rollbackPct, "rollback-pct", 5, "percent of application transactions rolled back after Enqueue, drawn from --seed")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of products, quantities and rollbacks")
	fs.IntVar(&c.crashEvery, "crash-every", 0, "relay and consumer SIGKILL themselves at a rotating named crash point after every N records (0: never)")
	fs.StringVar(&c.relayMode, "relay-mode", "idempotent", "outbox relay mode: idempotent or transactional")
	fs.StringVar(&c.dedupKey, "dedup-key", "seq", "dedup key: seq (sequence mode on kawa-seq) or message-id")
	fs.StringVar(&c.runID, "run-id", "", "names the topic, group, outbox source and dedup scope (default: derived from the start time, so repeated runs do not collide)")
	fs.IntVar(&c.partitions, "partitions", 3, "partitions of the orders topic")
	fs.IntVar(&c.shards, "shards", 4, "outbox shards (every process on one database must use the same count)")
	fs.IntVar(&c.batch, "batch", 20, "relay batch size (rows per produce batch or transaction)")
	fs.IntVar(&c.consumers, "consumers", 1, "consumer processes in the group")
	fs.DurationVar(&c.leaseTTL, "lease-ttl", 2*time.Second, "relay shard lease TTL: a killed relay's shards are taken over after it")
	fs.DurationVar(&c.pollMax, "poll-max", 100*time.Millisecond, "relay's longest idle poll interval")
	fs.DurationVar(&c.timeout, "timeout", 5*time.Minute, "give up (exit 1) when the run has not verified by then")
	fs.BoolVar(&c.latency, "latency", false, "print the end-to-end latency from the Enqueue transaction's commit to the consumer's offset commit (p50, p99)")
	fs.IntVar(&c.rate, "rate", 0, "application orders per second (0: as fast as the database takes them); pace it below capacity to measure --latency without queueing")
	fs.StringVar(&c.role, "role", "", "internal: relay or consumer (set by the supervisor)")
	fs.IntVar(&c.crashIndex, "crash-index", 0, "internal: which crash point of the rotation this child arms")
	fs.IntVar(&c.instance, "instance", 0, "internal: consumer instance number")
	fs.StringVar(&c.latencyFile, "latency-file", "", "internal: where the consumer appends offset-commit times")
	fs.BoolVar(&c.parentPipe, "parent-pipe", false, "internal: stdin is a pipe from the supervisor; stop when it closes")
}

// args renders c as the flags of a child process with the given role.
func (c *config) args(role string, crashIndex, instance int) []string {
	return []string{
		"--brokers=" + c.brokers, "--db=" + c.db, "--orders=" + strconv.Itoa(c.orders),
		"--products=" + strconv.Itoa(c.products), "--crash-every=" + strconv.Itoa(c.crashEvery),
		"--relay-mode=" + c.relayMode, "--dedup-key=" + c.dedupKey, "--run-id=" + c.runID,
		"--partitions=" + strconv.Itoa(c.partitions), "--shards=" + strconv.Itoa(c.shards),
		"--batch=" + strconv.Itoa(c.batch), "--lease-ttl=" + c.leaseTTL.String(),
		"--poll-max=" + c.pollMax.String(), "--latency-file=" + c.latencyFile,
		"--role=" + role, "--crash-index=" + strconv.Itoa(crashIndex), "--instance=" + strconv.Itoa(instance),
	}
}

func (c *config) validate() error {
	switch {
	case c.db == "":
		return errors.New("--db is required")
	case c.orders < 1, c.products < 1, c.partitions < 1, c.shards < 1, c.batch < 1, c.consumers < 1:
		return errors.New("--orders, --products, --partitions, --shards, --batch and --consumers must be positive")
	case c.rollbackPct < 0 || c.rollbackPct > 90:
		return errors.New("--rollback-pct must be in 0..90")
	case c.crashEvery < 0 || c.rate < 0:
		return errors.New("--crash-every and --rate must not be negative")
	case c.relayMode != "idempotent" && c.relayMode != "transactional":
		return fmt.Errorf("--relay-mode %q: want idempotent or transactional", c.relayMode)
	case c.dedupKey != "seq" && c.dedupKey != "message-id":
		return fmt.Errorf("--dedup-key %q: want seq or message-id", c.dedupKey)
	case c.role != "" && c.role != "relay" && c.role != "consumer":
		return fmt.Errorf("--role %q: want relay or consumer", c.role)
	case c.leaseTTL < 300*time.Millisecond:
		return errors.New("--lease-ttl must be at least 300ms")
	}
	return nil
}

func (c *config) mode() outbox.Mode {
	if c.relayMode == "transactional" {
		return outbox.Transactional
	}
	return outbox.Idempotent
}

// The names a run uses, all derived from --run-id.
func (c *config) topic() string         { return "orders-" + c.runID }
func (c *config) dlt() string           { return c.topic() + ".DLT" }
func (c *config) group() string         { return "orders-consumer-" + c.runID }
func (c *config) source() string        { return "orders-" + c.runID }
func (c *config) seedBrokers() []string { return strings.Split(c.brokers, ",") }

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the whole program: it parses args, runs the role and returns the
// exit code (0 verified or a child's clean stop, 1 a failure, 2 bad flags).
func run(args []string, stdout, stderr io.Writer) int {
	var c config
	fs := flag.NewFlagSet("orders", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c.flags(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "orders: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if err := c.validate(); err != nil {
		fmt.Fprintln(stderr, "orders:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if c.parentPipe {
		// The supervisor holds the pipe's write end and never writes: EOF
		// means it died (even by SIGKILL), and its children must not outlive it.
		go func() {
			io.Copy(io.Discard, os.Stdin)
			stop()
		}()
	}
	var err error
	switch c.role {
	case "relay":
		err = runRelay(ctx, &c, stderr)
	case "consumer":
		err = runConsumer(ctx, &c, stderr)
	default:
		if c.runID == "" {
			c.runID = strconv.FormatInt(time.Now().UnixNano(), 36)
		}
		err = supervise(ctx, &c, stdout, stderr)
	}
	if err != nil {
		fmt.Fprintf(stderr, "orders %s: %v\n", roleName(c.role), err)
		if c.role == "" {
			fmt.Fprintf(stdout, "FAILED: %v\n", err)
		}
		return 1
	}
	return 0
}

func roleName(role string) string {
	if role == "" {
		return "supervisor"
	}
	return role
}
