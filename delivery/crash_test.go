package delivery_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kawa-broker/kawa/delivery"
)

// The crash tests re-execute this test binary as a child consumer
// (TestCrashChild, selected with -test.run and configured by childEnv) that
// kills itself at a named crash point on its n-th hit, so the crash lands
// exactly in the window under test. The child appends what it handled and
// what it committed to a file, fsynced line by line; the broker is the
// parent's in-process one and survives the child.
const childEnv = "KAWA_DELIVERY_CRASH_CHILD"

type childSpec struct {
	Semantic   string // "amo", "alo", "eos"
	Broker     string
	Group      string
	Topic      string
	OutTopic   string // eos
	TxnID      string // eos
	InstanceID string // static membership, so a finisher takes over at once
	Out        string // the handled/committed log
	Point      string
	N          int    // the hit of Point that crashes
	Action     string // "kill" (SIGKILL) or "stop" (SIGSTOP, for zombies)
	Session    time.Duration
	Work       time.Duration // simulated handler work per record
}

// childLog is the child's fsynced record of events.
type childLog struct {
	mu sync.Mutex
	f  *os.File
}

func (l *childLog) line(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.f, format+"\n", args...)
	if err := l.f.Sync(); err != nil {
		panic(err)
	}
}

// tell writes a line to the parent on stdout (unbuffered).
func tell(format string, args ...any) {
	fmt.Fprintf(os.Stdout, "CHILD: "+format+"\n", args...)
}

// childHooks logs commits and, after a zombie resumed, the batch outcome.
type childHooks struct {
	delivery.NopHooks
	log     *childLog
	resumed *bool
	mu      *sync.Mutex
}

func (h childHooks) OnCommit(offs map[string]map[int32]kgo.EpochOffset, _ time.Duration, err error) {
	if err != nil {
		return
	}
	for _, ps := range offs {
		for p, eo := range ps {
			h.log.line("c %d %d", p, eo.Offset)
		}
	}
}

func (h childHooks) OnError(err error) {
	var ab *delivery.BatchAbortedError
	h.mu.Lock()
	defer h.mu.Unlock()
	if errors.As(err, &ab) && *h.resumed {
		tell("aborted")
	}
}

func (h childHooks) OnProcessed(*kgo.Record) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if *h.resumed {
		tell("committed")
		*h.resumed = false
	}
}

func TestCrashChild(t *testing.T) {
	raw := os.Getenv(childEnv)
	if raw == "" {
		t.Skip("the child consumer of the crash tests; runs only when re-executed by them")
	}
	var spec childSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(spec.Out, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	log := &childLog{f: f}
	var mu sync.Mutex
	resumed := false
	hits := 0
	conf := delivery.Config{
		Brokers: []string{spec.Broker}, Group: spec.Group, Topics: []string{spec.Topic},
		MaxPollRecords: 10,
		Hooks:          childHooks{log: log, resumed: &resumed, mu: &mu},
		CrashPoint: func(point string) {
			if point != spec.Point {
				return
			}
			mu.Lock()
			hits++
			hit := hits
			mu.Unlock()
			if hit != spec.N {
				return
			}
			// The signal goes to this thread (tgkill), so this thread takes
			// it on its way back from the syscall and runs no further; a
			// process-directed kill may be taken by another thread while
			// this one goes on past the point for a moment.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			if spec.Action == "stop" {
				tell("stopped")
				_ = syscall.Tgkill(os.Getpid(), syscall.Gettid(), syscall.SIGSTOP)
				mu.Lock()
				resumed = true
				mu.Unlock()
				return
			}
			_ = syscall.Tgkill(os.Getpid(), syscall.Gettid(), syscall.SIGKILL)
			select {} // SIGKILL is not deferred; never run past the point
		},
	}
	// The child's stderr is shown when a crash test fails.
	conf.KgoOpts = append(conf.KgoOpts, kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelInfo, nil)))
	if spec.InstanceID != "" {
		conf.KgoOpts = append(conf.KgoOpts, kgo.InstanceID(spec.InstanceID))
	}
	if spec.Session > 0 {
		conf.KgoOpts = append(conf.KgoOpts, kgo.SessionTimeout(spec.Session), kgo.RebalanceTimeout(spec.Session),
			kgo.HeartbeatInterval(spec.Session/6))
	}
	var first sync.Once
	handle := func(_ context.Context, r *kgo.Record) error {
		time.Sleep(spec.Work) // simulated work, so rebalances land mid-run
		log.line("h %d %d %s", r.Partition, r.Offset, r.Value)
		first.Do(func() { tell("handled") })
		return nil
	}
	var c *delivery.Consumer
	switch spec.Semantic {
	case "amo":
		c, err = delivery.NewAtMostOnce(conf, handle)
	case "alo":
		c, err = delivery.NewAtLeastOnce(conf, handle, delivery.AtLeastOnceOptions{KeyConcurrency: 2})
	case "eos":
		c, err = delivery.NewExactlyOnce(conf, spec.TxnID, func(_ context.Context, r *kgo.Record, emit func(*kgo.Record)) error {
			emit(&kgo.Record{Topic: spec.OutTopic, Key: r.Key, Value: r.Value})
			return nil
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	tell("running")
	err = c.Run(context.Background())
	tell("run returned: %v", err)
}

// child is a running child consumer.
type child struct {
	cmd    *exec.Cmd
	lines  chan string
	stderr bytes.Buffer
}

func startChild(t *testing.T, spec childSpec) *child {
	t.Helper()
	raw, _ := json.Marshal(spec)
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+string(raw))
	c := &child{cmd: cmd, lines: make(chan string, 16)}
	cmd.Stderr = &c.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The reader ends when the child's stdout closes (it exits or is killed).
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if l, ok := strings.CutPrefix(sc.Text(), "CHILD: "); ok {
				c.lines <- l
			}
		}
	}()
	t.Cleanup(func() {
		if t.Failed() {
			e := c.stderr.String()
			t.Logf("child stderr (last 6000 bytes):\n%s", e[max(0, len(e)-6000):])
		}
		_ = cmd.Process.Kill()
		_ = cmd.Process.Signal(syscall.SIGCONT)
		for range c.lines {
		}
		_ = cmd.Wait()
	})
	return c
}

// next returns the child's next line.
func (c *child) next(t *testing.T) string {
	t.Helper()
	select {
	case l, ok := <-c.lines:
		if !ok {
			t.Fatalf("child exited; stderr:\n%s", c.stderr.String())
		}
		return l
	case <-time.After(90 * time.Second):
		t.Fatalf("child said nothing for 90s; stderr:\n%s", c.stderr.String())
	}
	return ""
}

// waitKilled waits for the child to die by its own SIGKILL at the point.
func (c *child) waitKilled(t *testing.T) {
	t.Helper()
	for l := range c.lines {
		if strings.HasPrefix(l, "run returned") {
			t.Fatalf("child's Run returned instead of crashing: %s; stderr:\n%s", l, c.stderr.String())
		}
	}
	err := c.cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("child exit: %v", err)
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child ended with %v, want SIGKILL; stderr:\n%s", err, c.stderr.String())
	}
}

type po struct {
	p   int32
	off int64
}

// parseLog reads a child's log: handled (partition, offset) in order and the
// commits in order.
func parseLog(t *testing.T, path string) (handled []po, commits []po) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var x po
		var v string
		switch {
		case strings.HasPrefix(l, "h "):
			fmt.Sscanf(l, "h %d %d %s", &x.p, &x.off, &v)
			handled = append(handled, x)
		case strings.HasPrefix(l, "c "):
			fmt.Sscanf(l, "c %d %d", &x.p, &x.off)
			commits = append(commits, x)
		}
	}
	return handled, commits
}
