package verify

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"time"
)

// FaultKind is a kind of fault.
type FaultKind string

// Fault kinds.
const (
	FaultKill        FaultKind = "kill"         // SIGKILL the broker, restart it on the same address
	FaultPause       FaultKind = "pause"        // SIGSTOP the broker past session and transaction timeouts, then SIGCONT
	FaultClientCrash FaultKind = "client-crash" // SIGKILL one worker (mid-batch, mid-transaction)
	FaultDrop        FaultKind = "drop"         // the proxy drops one response (a lost acknowledgement)
	FaultSlow        FaultKind = "slow"         // the proxy delays every response for a while (slow disk)
	// FaultPowerCut kills the broker and drops every write its file system
	// was not asked to make durable, then restarts it; it needs a broker
	// that implements PowerCutter (cmd/kawa-powercut's FUSE file system).
	FaultPowerCut FaultKind = "power-cut"
)

// AllFaults lists every fault kind that works on any spawned broker; "all"
// means these. FaultPowerCut is left out: it needs a PowerCutter.
var AllFaults = []FaultKind{FaultKill, FaultPause, FaultClientCrash, FaultDrop, FaultSlow}

// PowerCutter is a BrokerControl whose data directory sits on a file
// system that can lose power.
type PowerCutter interface {
	BrokerControl
	// PowerCut kills the broker (SIGKILL) and then discards everything not
	// made durable: file contents written since the file's last fsync and
	// directory entries changed since the directory's last fsync. The next
	// Start runs on what is left.
	PowerCut() error
}

// ParseFaults parses a comma-separated list of fault kinds; "none" or ""
// is no faults and "all" every kind.
func ParseFaults(s string) ([]FaultKind, error) {
	switch strings.TrimSpace(s) {
	case "", "none":
		return nil, nil
	case "all":
		return AllFaults, nil
	}
	var out []FaultKind
	for _, p := range strings.Split(s, ",") {
		k := FaultKind(strings.TrimSpace(p))
		found := k == FaultPowerCut
		for _, f := range AllFaults {
			found = found || f == k
		}
		if !found {
			return nil, fmt.Errorf("unknown fault %q (want kill, pause, client-crash, drop, slow, power-cut, all or none)", p)
		}
		out = append(out, k)
	}
	return out, nil
}

// brokerSide reports whether the fault needs control of the broker process.
func (k FaultKind) brokerSide() bool { return k == FaultKill || k == FaultPause || k == FaultPowerCut }

// proxySide reports whether the fault needs the proxy.
func (k FaultKind) proxySide() bool { return k == FaultDrop || k == FaultSlow }

// ScheduledFault is one fault of a schedule.
type ScheduledFault struct {
	At     time.Duration `json:"at"`               // since the run started
	Kind   FaultKind     `json:"kind"`             //
	Dur    time.Duration `json:"dur,omitempty"`    // kill: down time; pause: stopped time; slow: window
	Target int           `json:"target,omitempty"` // client-crash: pick among crashable slots; drop: pick among the run's drop APIs
	Delay  time.Duration `json:"delay,omitempty"`  // slow: added latency per response
}

// dropAPIs are the requests whose response the drop fault loses: Produce,
// OffsetCommit, EndTxn and TxnOffsetCommit, the acknowledgements the
// semantics hinge on (a run drops those its workloads send, planDropAPIs).
var dropAPIs = []int16{0, 8, 26, 28}

// planDropAPIs are the drop fault's APIs for a run of plan: the ones its
// workloads send (a drop armed for an API nobody sends is never injected).
// Without a share group and with every classic semantic that is dropAPIs.
func planDropAPIs(plan *Plan) []int16 {
	out := []int16{0}
	if len(plan.Groups) > 0 {
		out = append(out, 8)
	}
	if plan.topicOf(ExactlyOnce, RoleIn) != "" {
		out = append(out, 26, 28)
	}
	if len(plan.ShareGroups) > 0 {
		out = append(out, shareDropAPIs...)
	}
	return out
}

// shareDropAPIs are ShareFetch (its acquisitions, and the acknowledgements
// it carries, unseen by the member) and ShareAcknowledge (acknowledgements
// with an unknown outcome).
var shareDropAPIs = []int16{apiShareFetch, apiShareAcknowledge}

// KIP-932 API keys.
const (
	apiShareFetch       = 78
	apiShareAcknowledge = 79
)

// Schedule derives the fault schedule from seed alone, so a run is
// repeatable: faults start after a tenth of the run, stop at eight tenths
// (leaving time to recover before the end-of-run checks), and are spaced by
// d/20 to d/20+d/10 plus the previous fault's own duration. pause is the
// stop length of the pause fault, chosen by the caller to exceed the
// session and transaction timeouts.
func Schedule(seed uint64, kinds []FaultKind, d, pause time.Duration) []ScheduledFault {
	if len(kinds) == 0 || d <= 0 {
		return nil
	}
	rng := rand.New(rand.NewPCG(seed, 0xfa017))
	var out []ScheduledFault
	gap := func() time.Duration { return d/20 + time.Duration(rng.Int64N(int64(d/10)+1)) }
	for at := d / 10; at < d*8/10; {
		f := ScheduledFault{At: at, Kind: kinds[rng.IntN(len(kinds))]}
		switch f.Kind {
		case FaultKill, FaultPowerCut:
			f.Dur = 200*time.Millisecond + time.Duration(rng.Int64N(int64(1800*time.Millisecond)))
		case FaultPause:
			f.Dur = pause
		case FaultClientCrash:
			f.Target = rng.IntN(1 << 16)
		case FaultDrop:
			f.Target = rng.IntN(1 << 16)
		case FaultSlow:
			f.Dur = 2*time.Second + time.Duration(rng.Int64N(int64(3*time.Second)))
			f.Delay = 100*time.Millisecond + time.Duration(rng.Int64N(int64(400*time.Millisecond)))
		}
		out = append(out, f)
		at += f.Dur + gap()
	}
	return out
}

// NetFaults is what the drop and slow faults need from a TCP proxy that
// sits between the workers and the broker (and rewrites Metadata and
// FindCoordinator so clients stay behind it).
type NetFaults interface {
	// Addr is where clients connect instead of the broker.
	Addr() string
	// DropResponse drops the next response to a request with this API key
	// and cuts that connection, so the client never learns the outcome.
	DropResponse(apiKey int16)
	// SetDelay holds every response for d; 0 stops delaying.
	SetDelay(d time.Duration)
	// Close stops the proxy.
	Close() error
}

// injector applies a schedule.
type injector struct {
	broker BrokerControl
	net    NetFaults
	sup    *Supervisor
	drops  []int16 // the drop fault's APIs; dropAPIs when nil
	emit   Emit
	start  time.Time
	count  atomic.Int64
}

// run applies each fault at its time until the schedule is done or ctx
// ends. A fault in progress when ctx ends is still undone (the broker is
// resumed or restarted, the delay cleared) before run returns.
func (in *injector) run(ctx context.Context, sched []ScheduledFault) {
	for _, f := range sched {
		if !sleepCtx(ctx, time.Until(in.start.Add(f.At))) {
			return
		}
		in.count.Add(1)
		began := time.Now()
		target, err := in.apply(ctx, f)
		in.emit(Event{T: began.UnixNano(), End: time.Now().UnixNano(), Kind: KindFault, Fault: string(f.Kind),
			W: target, Err: errString(err)})
	}
}

// apply injects one fault and returns what it hit.
func (in *injector) apply(ctx context.Context, f ScheduledFault) (string, error) {
	switch f.Kind {
	case FaultKill:
		if err := in.broker.Kill(); err != nil {
			return "broker", err
		}
		sleepCtx(ctx, f.Dur)
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		return "broker", in.broker.Start(rctx)
	case FaultPowerCut:
		pc, ok := in.broker.(PowerCutter)
		if !ok {
			return "broker", fmt.Errorf("broker cannot lose power")
		}
		if err := pc.PowerCut(); err != nil {
			return "broker", err
		}
		sleepCtx(ctx, f.Dur)
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		return "broker", in.broker.Start(rctx)
	case FaultPause:
		if err := in.broker.Pause(); err != nil {
			return "broker", err
		}
		sleepCtx(ctx, f.Dur)
		return "broker", in.broker.Resume()
	case FaultClientCrash:
		targets := in.sup.CrashTargets()
		if len(targets) == 0 {
			return "", fmt.Errorf("no worker to crash")
		}
		name := in.sup.Crash(targets[f.Target%len(targets)])
		if name == "" {
			return "", fmt.Errorf("target was restarting")
		}
		return name, nil
	case FaultDrop:
		apis := in.drops
		if apis == nil {
			apis = dropAPIs
		}
		key := apis[f.Target%len(apis)]
		in.net.DropResponse(key)
		return fmt.Sprintf("api %d", key), nil
	case FaultSlow:
		in.net.SetDelay(f.Delay)
		sleepCtx(ctx, f.Dur)
		in.net.SetDelay(0)
		return fmt.Sprintf("+%v", f.Delay), nil
	}
	return "", fmt.Errorf("unknown fault %q", f.Kind)
}
