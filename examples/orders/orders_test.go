package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/kawa-broker/kawa/internal/kawatest"
	"github.com/kawa-broker/kawa/internal/sqltest"
)

// envMain makes the test binary act as the example's main (TestMain), so the
// tests run the supervisor and its re-executed children without a go build.
const envMain = "KAWA_ORDERS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(envMain) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// runExample runs the example as a process (its children SIGKILL themselves,
// the in-process broker of the test survives them) and returns its stdout,
// stderr and exit code.
func runExample(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), envMain+"=1")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code = cmd.ProcessState.ExitCode()
	if err != nil && code < 0 {
		t.Fatalf("example: %v\n%s", err, errb.String())
	}
	return out.String(), errb.String(), code
}

var crashesRE = regexp.MustCompile(`relay crashes (\d+), consumer crashes (\d+)`)

// TestCrashingRunVerifies is the end-to-end acceptance: a few hundred
// orders over tens of products, some application transactions rolled back,
// relay and consumer SIGKILLed at every named crash point in turn and
// restarted, on both backends and with both relay modes and both dedup keys;
// the example's own checks (verify.go: applied set = committed ids, stock and
// version per product, kawa-seq 1..n in apply order, rolled-back orders
// absent from the topic, one record per message id with the transactional
// relay, outbox and dead tables empty, offsets committed) must pass.
func TestCrashingRunVerifies(t *testing.T) {
	const orders = 200
	b := kawatest.NewBroker(t)
	combos := map[string][][2]string{ // backend -> {relay mode, dedup key}
		"sqlite":   {{"idempotent", "seq"}, {"transactional", "message-id"}},
		"postgres": {{"idempotent", "message-id"}, {"transactional", "seq"}},
	}
	sqltest.Each(t, func(t *testing.T, be sqltest.Backend) {
		for i, combo := range combos[be.Name] {
			t.Run(combo[0]+"-"+combo[1], func(t *testing.T) {
				out, errs, code := runExample(t, "--brokers", b.Addr, "--db", be.URL,
					"--orders", strconv.Itoa(orders), "--products", "12", "--crash-every", "25",
					"--relay-mode", combo[0], "--dedup-key", combo[1], "--seed", strconv.Itoa(7+i),
					"--run-id", fmt.Sprintf("t%d-%s", i, be.Name), "--timeout", "100s")
				lines := strings.Split(strings.TrimSpace(out), "\n")
				want := fmt.Sprintf("verified: %d orders, %d applied exactly once, inventory consistent", orders, orders)
				if code != 0 || lines[len(lines)-1] != want {
					t.Fatalf("exit %d, last line %q, want 0 and %q\nstdout:\n%s\nstderr:\n%s", code, lines[len(lines)-1], want, out, tail(errs, 40))
				}
				m := crashesRE.FindStringSubmatch(out)
				if m == nil || m[1] == "0" || m[2] == "0" {
					t.Fatalf("want relay and consumer crashes, got %q:\n%s", m, out)
				}
				t.Log(lines[0])
			})
		}
	})
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
