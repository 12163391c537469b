package verify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Emit records events. Worker emits must be safe for concurrent use (produce
// promises call it from client goroutines). Each call is written as a unit:
// for a worker process, one write to the pipe.
type Emit func(evs ...Event)

// RunWorker runs one worker until it finishes (stop closed, or a reader saw
// the end-of-run fence) or fails. ctx ending is a crash: the worker returns
// at once without finishing its step. A returned error means the worker hit
// something it cannot recover from (a fenced transactional ID, say); the
// supervisor starts a new incarnation.
func RunWorker(ctx context.Context, spec WorkerSpec, stop <-chan struct{}, emit Emit) error {
	inner := emit
	emit = func(evs ...Event) {
		for i := range evs {
			if evs[i].W == "" {
				evs[i].W = spec.Name
			}
		}
		inner(evs...)
	}
	emit(Event{Kind: KindStart})
	switch spec.Role {
	case WorkerProducer:
		return runProducer(ctx, spec, stop, emit)
	case WorkerConsumer:
		return runConsumer(ctx, spec, stop, emit)
	case WorkerPipeline:
		return runPipeline(ctx, spec, stop, emit)
	case WorkerTxn:
		return runTxnWriter(ctx, spec, stop, emit)
	case WorkerReader:
		return runReader(ctx, spec, emit)
	case WorkerShare:
		return runShareMember(ctx, spec, stop, emit)
	}
	return fmt.Errorf("verify: unknown worker role %q", spec.Role)
}

// WorkerMain is the body of the hidden `kawa verify worker SPEC` subcommand:
// SPEC is a WorkerSpec as JSON, events go to stdout as JSON lines, and the
// worker is asked to stop when stdin reaches EOF or on SIGTERM. A SIGKILL
// from the controller is the client crash fault.
func WorkerMain(args []string, stdin io.Reader, stdout io.Writer) error {
	if len(args) != 1 {
		return errors.New("verify worker: want exactly one argument, the worker spec as JSON")
	}
	var spec WorkerSpec
	if err := json.Unmarshal([]byte(args[0]), &spec); err != nil {
		return fmt.Errorf("verify worker: spec: %w", err)
	}
	stop := make(chan struct{})
	var once sync.Once
	closeStop := func() { once.Do(func() { close(stop) }) }
	go func() {
		io.Copy(io.Discard, stdin)
		closeStop()
	}()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sig)
	go func() {
		if _, ok := <-sig; ok {
			closeStop()
		}
	}()
	lw := &lineWriter{w: stdout}
	return RunWorker(context.Background(), spec, stop, lw.emit)
}

// lineWriter turns events into JSON lines, one write per Emit call.
type lineWriter struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte
}

func (l *lineWriter) emit(evs ...Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = l.buf[:0]
	now := time.Now().UnixNano()
	for _, e := range evs {
		if e.T == 0 {
			e.T = now
		}
		b, _ := json.Marshal(e)
		l.buf = append(append(l.buf, b...), '\n')
	}
	l.w.Write(l.buf)
}

// stamp sets T on events that have none; used by in-process emitters.
func stamp(evs []Event) {
	now := time.Now().UnixNano()
	for i := range evs {
		if evs[i].T == 0 {
			evs[i].T = now
		}
	}
}

// baseOpts are the client options every worker shares. A short metadata
// age lets clients find a restarted broker quickly.
func baseOpts(spec WorkerSpec) []kgo.Opt {
	var log []kgo.Opt
	if lvl := os.Getenv("KAWA_VERIFY_CLIENT_LOG"); lvl != "" {
		// Debugging aid: the client's own log on the worker's stderr
		// (workers.log): "info" or "debug".
		level := kgo.LogLevelInfo
		if lvl == "debug" {
			level = kgo.LogLevelDebug
		}
		log = append(log, kgo.WithLogger(kgo.BasicLogger(os.Stderr, level, nil)))
	}
	return append(log,
		kgo.SeedBrokers(spec.Brokers...),
		kgo.ClientID("kawa-verify-"+spec.Name),
		kgo.MetadataMinAge(250*time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
	)
}

// groupOpts are the consumer-group options of consumers and pipelines.
func groupOpts(spec WorkerSpec, topic string) []kgo.Opt {
	hb := max(spec.Session/6, 100*time.Millisecond)
	return []kgo.Opt{
		kgo.ConsumerGroup(spec.Group),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.SessionTimeout(spec.Session),
		kgo.HeartbeatInterval(hb),
		kgo.RebalanceTimeout(2 * spec.Session),
	}
}

// workerRand is the worker's random source: the slot seed mixed with the
// instance name, so each incarnation differs yet a run is repeatable.
func workerRand(spec WorkerSpec) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(spec.Name))
	return rand.New(rand.NewPCG(spec.Seed, h.Sum64()))
}

// untilStop returns a context that ends when stop closes or parent ends.
func untilStop(parent context.Context, stop <-chan struct{}) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// sleepCtx sleeps d or until ctx ends, reporting whether it slept fully.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func nowMicros() int64 { return time.Now().UnixMicro() }
