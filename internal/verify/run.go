package verify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync/atomic"
	"time"
)

// Config is one verify run.
type Config struct {
	Semantics []Semantic
	Faults    []FaultKind
	Duration  time.Duration // how long the workloads produce; the end-of-run steps come after
	Seed      uint64
	// Schedule, when set, replaces the schedule derived from Seed (a run
	// that needs many faults of one kind, such as 50 power cuts).
	Schedule []ScheduledFault

	// Broker is a broker Run may kill, pause and restart (spawn mode); Run
	// starts it and closes it. When nil, Brokers is an external broker and
	// only client-side faults apply.
	Broker  BrokerControl
	Brokers []string
	// Proxy builds the fault proxy in front of target, for the drop and slow
	// faults; nil when no proxy is available.
	Proxy func(target string) (NetFaults, error)

	Launcher   Launcher
	CrashRoles []string // limit client-crash to these worker roles (default: all but readers)
	Rate       int      // records per second per producer (default 200)
	Partitions int32    // per topic (default 3)

	History      io.Writer      // receives every event as a JSON line; optional
	Progress     func(Progress) // called about once a second; optional
	DrainTimeout time.Duration  // bound on each end-of-run wait; the final scan's bound on a wait without progress (default 20s)
}

// Progress is a snapshot of a running verify.
type Progress struct {
	Phase     string
	Elapsed   time.Duration
	Duration  time.Duration
	Acked     int64
	Processed int64
	Faults    int64
	Running   int
	Slots     int
}

// validate checks that the faults asked for can be injected.
func (c *Config) validate() error {
	if len(c.Semantics) == 0 {
		return errors.New("no semantics")
	}
	if c.Duration <= 0 {
		return errors.New("duration must be positive")
	}
	if c.Launcher == nil {
		return errors.New("no worker launcher")
	}
	if c.Broker == nil && len(c.Brokers) == 0 {
		return errors.New("no broker: spawn one or give --brokers")
	}
	for _, f := range c.Faults {
		if f.brokerSide() && c.Broker == nil {
			return fmt.Errorf("fault %s needs a spawned broker (--spawn); against --brokers only client-side faults apply", f)
		}
		if _, ok := c.Broker.(PowerCutter); f == FaultPowerCut && !ok {
			return fmt.Errorf("fault %s needs a broker on a file system that can lose power (cmd/kawa-powercut)", f)
		}
		if f.proxySide() && c.Proxy == nil {
			return fmt.Errorf("fault %s needs the fault proxy (internal/proxy), which this build does not have", f)
		}
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = 20 * time.Second
	}
	return nil
}

// Run runs the workloads for cfg.Duration under the fault schedule, then
// drains, scans and checks. The error is for a run that could not be
// carried out (broker would not start, topics could not be created, ctx
// ended); guarantee violations are in the Result.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	res := &Result{Semantics: cfg.Semantics, Faults: cfg.Faults, Seed: cfg.Seed,
		Duration: cfg.Duration.String(), Started: time.Now()}
	brokers := cfg.Brokers
	res.Mode = "brokers"
	if cfg.Broker != nil {
		res.Mode = "spawn"
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := cfg.Broker.Start(sctx)
		cancel()
		if err != nil {
			return nil, err
		}
		defer cfg.Broker.Close()
		brokers = []string{cfg.Broker.Addr()}
	}
	res.Brokers = brokers
	clientBrokers := brokers
	if cfg.Proxy != nil && needsProxy(cfg.Faults) {
		nf, err := cfg.Proxy(brokers[0])
		if err != nil {
			return nil, fmt.Errorf("proxy: %w", err)
		}
		defer nf.Close()
		res.proxy = nf
		clientBrokers = []string{nf.Addr()}
	}
	adm, err := newAdmin(brokers)
	if err != nil {
		return nil, err
	}
	defer adm.close()

	opts := PlanOptions{RunID: strconv.FormatUint(uint64(time.Now().UnixNano())&0xffffff, 36),
		Semantics: cfg.Semantics, Partitions: cfg.Partitions, Rate: cfg.Rate, Seed: cfg.Seed}
	res.Plan = NewPlan(opts)
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = adm.createTopics(cctx, res.Plan)
	if err == nil {
		err = adm.setShareGroupConfigs(cctx, res.Plan)
	}
	cancel()
	if err != nil {
		return nil, err
	}
	hist := NewHistory(cfg.History)
	if err := runPhases(ctx, cfg, res, hist, adm, clientBrokers, opts); err != nil {
		return nil, err
	}
	if cfg.Broker != nil {
		if err := cfg.Broker.Close(); err != nil {
			res.Notes = append(res.Notes, "broker: "+err.Error())
		}
	}
	if err := hist.Flush(); err != nil {
		res.Notes = append(res.Notes, "history file: "+err.Error())
	}
	res.check(hist.Events())
	return res, nil
}

func needsProxy(kinds []FaultKind) bool {
	for _, k := range kinds {
		if k.proxySide() {
			return true
		}
	}
	return false
}

// runPhases runs the workloads and faults, then the end-of-run steps.
func runPhases(ctx context.Context, cfg Config, res *Result, hist *History, adm *admin, clientBrokers []string, opts PlanOptions) error {
	sup := NewSupervisor(cfg.Launcher, res.Plan.Slots, clientBrokers, stamped(hist.Add))
	sup.CrashRoles = cfg.CrashRoles
	defer sup.Stop(0) // whatever is still running when a step fails
	start := time.Now()
	inj := &injector{broker: cfg.Broker, net: res.proxy, sup: sup, emit: hist.Add, start: start, drops: planDropAPIs(res.Plan)}
	opts.defaults()
	res.Schedule = cfg.Schedule
	if res.Schedule == nil {
		res.Schedule = Schedule(cfg.Seed, cfg.Faults, cfg.Duration, max(opts.Session, opts.TxnTimeout)+3*time.Second)
	}
	fctx, fcancel := context.WithCancel(ctx)
	injDone := make(chan struct{})
	go func() { inj.run(fctx, res.Schedule); close(injDone) }()

	var phase atomic.Value
	phase.Store("run")
	report := func() {
		if cfg.Progress != nil {
			cfg.Progress(Progress{Phase: phase.Load().(string), Elapsed: time.Since(start), Duration: cfg.Duration, Acked: hist.Acked(),
				Processed: hist.Processed(), Faults: inj.count.Load(), Running: sup.Running(), Slots: len(res.Plan.Slots)})
		}
	}
	stopProgress := ticking(time.Second, report)
	defer stopProgress()

	sleepCtx(ctx, cfg.Duration)
	fcancel()
	<-injDone
	res.FaultsInjected = int(inj.count.Load())
	if ctx.Err() != nil {
		return ctx.Err()
	}
	phase.Store("stopping producers")
	report()
	sup.Stop(flushTimeout+5*time.Second, WorkerProducer, WorkerTxn)
	phase.Store("draining groups")
	report()
	dctx, cancel := context.WithTimeout(ctx, cfg.DrainTimeout)
	for _, g := range adm.waitDrained(dctx, res.Plan.Groups) {
		res.Notes = append(res.Notes, fmt.Sprintf("group %s did not commit up to the log end within %v; its lost-e2e count includes records it never reached", g, cfg.DrainTimeout))
	}
	cancel()
	unresolved := waitShareResolved(ctx, stallTimeout, res.Plan, adm)
	sup.Stop(15*time.Second, WorkerConsumer, WorkerPipeline, WorkerShare)
	if len(unresolved) > 0 {
		phase.Store("draining share groups")
		report()
		for _, g := range drainShare(ctx, cfg.DrainTimeout, clientBrokers, unresolved, adm, hist.Add) {
			res.Notes = append(res.Notes, "share drain of "+g+"; its records left in flight count as share-lost")
		}
	}
	phase.Store("final scan")
	report()
	return endOfRun(ctx, cfg, res, hist, adm, sup)
}

// endOfRun records end offsets, fences the topics, lets the readers reach
// the fences and scans the topics.
func endOfRun(ctx context.Context, cfg Config, res *Result, hist *History, adm *admin, sup *Supervisor) error {
	ectx, cancel := context.WithTimeout(ctx, cfg.DrainTimeout)
	defer cancel()
	if err := adm.endOffsets(ectx, res.Plan, stamped(hist.Add)); err != nil {
		return err
	}
	if err := adm.shareOffsets(ectx, res.Plan, stamped(hist.Add)); err != nil {
		res.Notes = append(res.Notes, err.Error())
	}
	if err := adm.writeFences(ectx, res.Plan); err != nil {
		return fmt.Errorf("write fences: %w", err)
	}
	sup.Stop(cfg.DrainTimeout, WorkerReader)
	res.Slots = sup.Status()
	if err := finalScan(ctx, cfg.DrainTimeout, res.Brokers, res.Plan, stamped(hist.Add)); err != nil {
		res.Notes = append(res.Notes, err.Error())
	}
	return nil
}

// stamped wraps emit to set T on events without one.
func stamped(emit Emit) Emit {
	return func(evs ...Event) {
		stamp(evs)
		emit(evs...)
	}
}

// ticking calls f every d until the returned stop is called.
func ticking(d time.Duration, f func()) (stop func()) {
	done := make(chan struct{})
	t := time.NewTicker(d)
	go func() {
		defer t.Stop()
		for {
			select {
			case <-t.C:
				f()
			case <-done:
				return
			}
		}
	}()
	return func() { close(done) }
}
