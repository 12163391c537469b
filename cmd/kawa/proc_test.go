package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// kawaBin is the kawa binary built once for process-level tests.
var (
	kawaBinOnce sync.Once
	kawaBinPath string
	kawaBinErr  error
)

func kawaBinary(t *testing.T) string {
	t.Helper()
	kawaBinOnce.Do(func() {
		dir, err := os.MkdirTemp("", "kawa-bin")
		if err != nil {
			kawaBinErr = err
			return
		}
		kawaBinPath = filepath.Join(dir, "kawa")
		out, err := exec.Command("go", "build", "-o", kawaBinPath, ".").CombinedOutput()
		if err != nil {
			kawaBinErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if kawaBinErr != nil {
		t.Fatal(kawaBinErr)
	}
	return kawaBinPath
}

// kawaProc is a real `kawa serve` process.
type kawaProc struct {
	cmd  *exec.Cmd
	Addr string
	done chan struct{}

	mu     sync.Mutex
	stderr []string // every line the process wrote to stderr
}

// Logged returns the stderr lines so far that contain substr.
func (p *kawaProc) Logged(substr string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, l := range p.stderr {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return out
}

var listenRE = regexp.MustCompile(`kawa listening" addr=(\S+)`)

// startKawa runs `kawa serve` on dir with extra flags and waits until it
// listens. It is SIGKILLed at cleanup if still running.
func startKawa(t *testing.T, dir string, extra ...string) *kawaProc {
	t.Helper()
	return startKawaWrapped(t, nil, dir, extra...)
}

// startKawaWrapped is startKawa with the command run by wrapper (e.g.
// prlimit with its options), which must exec it so the PID is kawa's.
func startKawaWrapped(t *testing.T, wrapper []string, dir string, extra ...string) *kawaProc {
	t.Helper()
	args := append([]string{kawaBinary(t), "serve", "--listen", "127.0.0.1:0", "--data-dir", dir}, extra...)
	args = append(append([]string(nil), wrapper...), args...)
	cmd := exec.Command(args[0], args[1:]...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &kawaProc{cmd: cmd, done: make(chan struct{})}
	addrc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			p.mu.Lock()
			p.stderr = append(p.stderr, sc.Text())
			p.mu.Unlock()
			if m := listenRE.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case addrc <- m[1]:
				default:
				}
			}
			if testing.Verbose() {
				t.Log("kawa:", sc.Text())
			}
		}
	}()
	go func() { cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { p.Kill() })
	select {
	case p.Addr = <-addrc:
	case <-p.done:
		t.Fatalf("kawa exited before listening")
	case <-time.After(3 * time.Minute): // a start recovers every partition: slow on a loaded machine
		t.Fatalf("kawa did not start listening")
	}
	return p
}

// Kill sends SIGKILL and waits for the process to die.
func (p *kawaProc) Kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// Stop sends SIGTERM and waits for a graceful exit.
func (p *kawaProc) Stop(ctx context.Context) error {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		if code := p.cmd.ProcessState.ExitCode(); code != 0 {
			return fmt.Errorf("kawa exited with status %d", code)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
