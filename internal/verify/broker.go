package verify

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"sync"
	"syscall"
	"time"
)

// BrokerControl is a broker the process faults can act on. Run only uses it
// in spawn mode; against an external broker it is nil and only client-side
// faults apply.
type BrokerControl interface {
	// Addr is the broker's client address; stable across restarts.
	Addr() string
	// Start starts the broker (again, on the same address after the first
	// time) and returns once it accepts connections.
	Start(ctx context.Context) error
	// Kill sends SIGKILL and waits for the process to die.
	Kill() error
	// Pause sends SIGSTOP; Resume sends SIGCONT.
	Pause() error
	Resume() error
	// Close stops the broker gracefully (SIGTERM), killing it if it takes
	// longer than a few seconds.
	Close() error
}

// listeningRE finds the address in `kawa serve`'s slog line
// `msg="kawa listening" addr=127.0.0.1:40123`.
var listeningRE = regexp.MustCompile(`kawa listening" addr=(\S+)`)

// SpawnedBroker runs `kawa serve` as a child process. The first Start binds
// 127.0.0.1:0; later Starts reuse that address so clients reconnect to the
// same place after a kill.
type SpawnedBroker struct {
	// Command returns the serve command for a listen address, e.g.
	// `kawa serve --listen ADDR --data-dir DIR`. Stderr is set by Start.
	Command func(listen string) *exec.Cmd
	// Log receives the broker's stderr.
	Log io.Writer

	mu     sync.Mutex
	addr   string
	cmd    *exec.Cmd
	exited chan struct{}
	last   *tailWriter
}

// Addr implements BrokerControl.
func (b *SpawnedBroker) Addr() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.addr
}

// Start implements BrokerControl. The port of a killed broker can take a
// moment to be free again, so a bind failure is retried until ctx ends.
func (b *SpawnedBroker) Start(ctx context.Context) error {
	for {
		err := b.startOnce(ctx)
		if err == nil || ctx.Err() != nil {
			return err
		}
		if b.Addr() == "" {
			return err // the first start has nothing to wait for
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("restart broker: %w (last: %v)", ctx.Err(), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (b *SpawnedBroker) startOnce(ctx context.Context) error {
	listen := b.Addr()
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	cmd := b.Command(listen)
	setDeathSignal(cmd)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start broker: %w", err)
	}
	tail := &tailWriter{prefix: "broker: ", w: b.Log}
	addrc := make(chan string, 1)
	exited := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			tail.Write([]byte(line + "\n"))
			if m := listeningRE.FindStringSubmatch(line); m != nil {
				select {
				case addrc <- m[1]:
				default:
				}
			}
		}
		cmd.Wait()
		close(exited)
	}()
	select {
	case addr := <-addrc:
		b.mu.Lock()
		b.addr, b.cmd, b.exited, b.last = addr, cmd, exited, tail
		b.mu.Unlock()
		return nil
	case <-exited:
		return fmt.Errorf("broker exited before listening: %s", tail.last())
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		<-exited
		return fmt.Errorf("broker did not start listening: %w", ctx.Err())
	}
}

func (b *SpawnedBroker) proc() (*exec.Cmd, chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cmd, b.exited
}

// Kill implements BrokerControl.
func (b *SpawnedBroker) Kill() error {
	cmd, exited := b.proc()
	if cmd == nil {
		return errors.New("broker not started")
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-exited
	return nil
}

// Pause implements BrokerControl.
func (b *SpawnedBroker) Pause() error { return b.signal(syscall.SIGSTOP) }

// Resume implements BrokerControl.
func (b *SpawnedBroker) Resume() error { return b.signal(syscall.SIGCONT) }

func (b *SpawnedBroker) signal(sig syscall.Signal) error {
	cmd, _ := b.proc()
	if cmd == nil {
		return errors.New("broker not started")
	}
	return cmd.Process.Signal(sig)
}

// Close implements BrokerControl.
func (b *SpawnedBroker) Close() error {
	cmd, exited := b.proc()
	if cmd == nil {
		return nil
	}
	_ = cmd.Process.Signal(syscall.SIGCONT) // a paused broker cannot handle SIGTERM
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-exited
	}
	if code := cmd.ProcessState.ExitCode(); code > 0 {
		return fmt.Errorf("broker exited with status %d: %s", code, b.last.last())
	}
	return nil
}
