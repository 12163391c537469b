package verify

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"syscall"
)

// Launcher starts workers.
type Launcher interface {
	// Launch starts a worker for spec; its events go to emit.
	Launch(spec WorkerSpec, emit Emit) (Worker, error)
}

// Worker is a running worker.
type Worker interface {
	// Stop asks the worker to finish its current step and exit.
	Stop()
	// Kill crashes the worker now: SIGKILL for a process.
	Kill()
	// Done is closed once the worker has exited and all its events were
	// emitted.
	Done() <-chan struct{}
	// Err is why the worker exited (nil: it was asked to stop, or finished);
	// valid after Done.
	Err() error
}

// ErrKilled is the exit reason of a worker crashed by Kill.
var ErrKilled = errors.New("killed")

// ProcLauncher runs each worker as a subprocess, so a crash is a real
// process death: whatever the worker had not yet written to its stdout pipe
// never happened.
type ProcLauncher struct {
	// Command returns the command for a worker given its spec as JSON, e.g.
	// `kawa verify worker SPEC`. Stdin, stdout and stderr are set by Launch.
	Command func(spec string) *exec.Cmd
	// Log receives the workers' stderr, each line prefixed by the instance.
	Log io.Writer
}

// Launch starts the process.
func (l *ProcLauncher) Launch(spec WorkerSpec, emit Emit) (Worker, error) {
	js, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	cmd := l.Command(string(js))
	setDeathSignal(cmd)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	tail := &tailWriter{prefix: spec.Name + ": ", w: l.Log}
	cmd.Stderr = tail
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start worker %s: %w", spec.Name, err)
	}
	p := &procWorker{cmd: cmd, stdin: stdin, done: make(chan struct{})}
	go p.pump(stdout, emit, tail)
	return p, nil
}

type procWorker struct {
	cmd    *exec.Cmd
	stdin  io.Closer
	done   chan struct{}
	err    error
	mu     sync.Mutex
	killed bool
}

// pump decodes the worker's event lines until EOF, then reaps the process.
// A line torn by a SIGKILL fails to decode and is dropped.
func (p *procWorker) pump(stdout io.Reader, emit Emit, tail *tailWriter) {
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<16), 1<<24)
	for sc.Scan() {
		var e Event
		if json.Unmarshal(sc.Bytes(), &e) == nil {
			emit(e)
		}
	}
	io.Copy(io.Discard, stdout)
	err := p.cmd.Wait()
	p.mu.Lock()
	switch {
	case p.killed:
		p.err = ErrKilled
	case err != nil:
		p.err = fmt.Errorf("%v: %s", err, tail.last())
	}
	p.mu.Unlock()
	close(p.done)
}

func (p *procWorker) Stop() { p.stdin.Close() }

func (p *procWorker) Kill() {
	p.mu.Lock()
	p.killed = true
	p.mu.Unlock()
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
}

func (p *procWorker) Done() <-chan struct{} { return p.done }

func (p *procWorker) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// tailWriter forwards a worker's stderr line by line with a prefix and keeps
// the last line for the exit reason.
type tailWriter struct {
	mu     sync.Mutex
	prefix string
	w      io.Writer
	buf    []byte
	lastLn string
}

func (t *tailWriter) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	for {
		i := strings.IndexByte(string(t.buf), '\n')
		if i < 0 {
			break
		}
		line := string(t.buf[:i])
		t.buf = t.buf[i+1:]
		if line != "" {
			t.lastLn = line
		}
		if t.w != nil {
			fmt.Fprintf(t.w, "%s%s\n", t.prefix, line)
		}
	}
	return len(b), nil
}

func (t *tailWriter) last() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.buf) > 0 {
		return string(t.buf)
	}
	return t.lastLn
}

// InprocLauncher runs workers as goroutines of this process. Kill cancels
// the worker's context, which abandons its step but still closes its client,
// so a crash is gentler than a SIGKILL; use it where subprocesses are not
// available (tests against an in-process broker).
type InprocLauncher struct{}

// Launch starts the goroutine.
func (InprocLauncher) Launch(spec WorkerSpec, emit Emit) (Worker, error) {
	ctx, cancel := context.WithCancel(context.Background())
	w := &inprocWorker{cancel: cancel, stop: make(chan struct{}), done: make(chan struct{})}
	stamped := func(evs ...Event) {
		stamp(evs)
		emit(evs...)
	}
	go func() {
		err := RunWorker(ctx, spec, w.stop, stamped)
		w.mu.Lock()
		if w.killed {
			err = ErrKilled
		}
		w.err = err
		w.mu.Unlock()
		close(w.done)
	}()
	return w, nil
}

type inprocWorker struct {
	cancel   context.CancelFunc
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
	mu       sync.Mutex
	killed   bool
	err      error
}

func (w *inprocWorker) Stop() { w.stopOnce.Do(func() { close(w.stop) }) }

func (w *inprocWorker) Kill() {
	w.mu.Lock()
	w.killed = true
	w.mu.Unlock()
	w.cancel()
}

func (w *inprocWorker) Done() <-chan struct{} { return w.done }

func (w *inprocWorker) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}
