package cleaner

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kawa-broker/kawa/internal/config"
	"github.com/kawa-broker/kawa/internal/log"
)

// Target is one partition as the cleaner sees it.
type Target struct {
	Name          string // "<topic>-<partition>", for logs
	Log           *log.Log
	LastStable    func() int64        // the last stable offset: nothing at or above it is cleaned
	HighWatermark func() int64        // markers are looked for up to here
	Config        func() config.Topic // the topic's current configs
	// ForgetMarkers, called before a pass removes transaction markers (all below upTo), drops the ABORT
	// markers' entries (by marker offset) from the partition's aborted-transaction index and makes sure a
	// producer-state snapshot covers upTo, so neither a read_committed fetch nor a restart needs a removed
	// marker. nil: markers are never removed.
	ForgetMarkers func(aborts []int64, upTo int64) error
}

// Options configures a Cleaner.
type Options struct {
	// Targets lists the partitions to consider each round (the broker's partitions).
	Targets func() []Target
	// MapEntries bounds the offset map of one pass (keys); 0 = DefaultMapEntries. Each entry costs about
	// 40 bytes (16-byte key hash, offset, map overhead).
	MapEntries int
	// Backoff is the wait between rounds (Kafka's log.cleaner.backoff.ms); 0 = 15 s.
	Backoff time.Duration
	Logger  *slog.Logger
	Now     func() time.Time // defaults to time.Now
}

// DefaultMapEntries is the default offset map capacity: about 128 MiB of map, as Kafka's default
// log.cleaner.dedupe.buffer.size (128 MiB, 24 bytes per entry).
const DefaultMapEntries = 128 << 20 / 40

// Stats are the cleaner's counters since New, for metrics.
type Stats struct {
	Passes         int64 // partition passes that rewrote at least one segment
	BytesRead      int64 // bytes of segments rewritten (before)
	BytesWritten   int64 // bytes of segments rewritten (after)
	RecordsRemoved int64 // records dropped (superseded, aborted, expired tombstones)
	MarkersRemoved int64 // COMMIT/ABORT markers removed after their data and delete horizon
	Errors         int64 // passes that failed
}

// Status is one partition's cleaning state, for `kawa topic describe`.
type Status struct {
	FirstDirty  int64     // offsets below it are clean (compacted); the log start before any pass
	LastCleaned time.Time // end of the last pass that rewrote segments; zero if none
	DirtyRatio  float64   // dirty / cleanable bytes at the last check

	nextHorizon int64 // earliest delete horizon of a kept tombstone batch (ms); a pass is due once it passes
}

// Cleaner compacts the logs of compacted topics in the background.
type Cleaner struct {
	o      Options
	roundM sync.Mutex // one round at a time

	mu    sync.Mutex // guards state
	state map[*log.Log]*Status

	passes, read, written, removed, markers, errs atomic.Int64

	stop    chan struct{}
	done    chan struct{} // closed when the goroutine returns
	running atomic.Bool   // Start was called
	once    sync.Once
}

// New returns a Cleaner; Start runs it.
func New(o Options) *Cleaner {
	if o.MapEntries <= 0 {
		o.MapEntries = DefaultMapEntries
	}
	if o.Backoff <= 0 {
		o.Backoff = 15 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Cleaner{o: o, state: map[*log.Log]*Status{}, stop: make(chan struct{}), done: make(chan struct{})}
}

// Start starts the cleaner's goroutine, which runs a round every Backoff until Stop.
func (c *Cleaner) Start() {
	c.running.Store(true)
	go func() {
		defer close(c.done)
		t := time.NewTicker(c.o.Backoff)
		defer t.Stop()
		for {
			select {
			case <-c.stop:
				return
			case <-t.C:
				c.round(false)
			}
		}
	}()
}

// Stop stops the goroutine Start started and waits for it (a pass in progress stops after its current
// segment). Safe to call more than once, and without Start.
func (c *Cleaner) Stop() {
	c.once.Do(func() { close(c.stop) })
	if c.running.Load() {
		<-c.done
	}
}

// CleanNow runs one round now on the caller's goroutine, ignoring the dirty ratio and max.compaction.lag.ms
// (every compacted partition with a dirty cleanable part is cleaned); it returns the first error.
func (c *Cleaner) CleanNow() error { return c.round(true) }

// Stats returns the counters.
func (c *Cleaner) Stats() Stats {
	return Stats{Passes: c.passes.Load(), BytesRead: c.read.Load(), BytesWritten: c.written.Load(),
		RecordsRemoved: c.removed.Load(), MarkersRemoved: c.markers.Load(), Errors: c.errs.Load()}
}

// StatusOf returns the cleaning state of l, and false if the cleaner never looked at it.
func (c *Cleaner) StatusOf(l *log.Log) (Status, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.state[l]
	if !ok {
		return Status{}, false
	}
	return *s, true
}

func (c *Cleaner) round(force bool) error {
	c.roundM.Lock()
	defer c.roundM.Unlock()
	targets := c.o.Targets()
	live := make(map[*log.Log]bool, len(targets))
	var first error
	for _, t := range targets {
		live[t.Log] = true
		select {
		case <-c.stop:
			return first
		default:
		}
		if !t.Config().Compact() {
			continue
		}
		if err := c.cleanOne(t, force); err != nil && !errors.Is(err, log.ErrClosed) {
			c.errs.Add(1)
			c.o.Logger.Warn("cleaner: pass failed", "partition", t.Name, "err", err)
			if first == nil {
				first = fmt.Errorf("cleaner: %s: %w", t.Name, err)
			}
		}
	}
	c.mu.Lock()
	for l := range c.state {
		if !live[l] {
			delete(c.state, l) // the partition was deleted
		}
	}
	c.mu.Unlock()
	return first
}

func (c *Cleaner) status(l *log.Log) *Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.state[l]
	if s == nil {
		s = &Status{FirstDirty: l.Start(), nextHorizon: math.MaxInt64}
		c.state[l] = s
	}
	return s
}

func (c *Cleaner) setStatus(l *log.Log, fn func(*Status)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.state[l]; s != nil {
		fn(s)
	}
}

// cleanOne runs one pass over t if it is due (always when force): see the package documentation.
func (c *Cleaner) cleanOne(t Target, force bool) error {
	l, cfg, now := t.Log, t.Config(), c.o.Now()
	nowMs := now.UnixMilli()
	st := c.status(l)
	c.mu.Lock()
	firstDirty, nextHorizon := max(st.FirstDirty, l.Start()), st.nextHorizon
	c.mu.Unlock()
	lso, start := t.LastStable(), l.Start()
	var cleanable []log.SegmentInfo
	for _, s := range l.Segments() {
		if s.Active || s.End > lso || cfg.MinCompactionLagMs > 0 && s.MaxTimestamp > nowMs-cfg.MinCompactionLagMs {
			break
		}
		if s.End > start {
			cleanable = append(cleanable, s)
		}
	}
	if len(cleanable) == 0 {
		return nil
	}
	cleanEnd := cleanable[len(cleanable)-1].End
	var total, dirty int64
	oldestDirty := int64(math.MaxInt64)
	for _, s := range cleanable {
		total += s.Size
		if s.End > firstDirty {
			dirty += s.Size
			oldestDirty = min(oldestDirty, s.MaxTimestamp)
		}
	}
	ratio := float64(dirty) / float64(max(total, 1))
	c.setStatus(l, func(s *Status) { s.DirtyRatio = ratio })
	hasDirty := firstDirty < cleanEnd
	due := hasDirty && (force || ratio >= cfg.MinCleanableDirtyRatio ||
		cfg.MaxCompactionLagMs < math.MaxInt64 && oldestDirty <= nowMs-cfg.MaxCompactionLagMs)
	if !due && nowMs < nextHorizon { // tombstones whose delete horizon passed are due too (KIP-534)
		return nil
	}
	tv, err := scanTxns(l, t.HighWatermark())
	if err != nil {
		return err
	}
	mapEnd := firstDirty
	var om offsetMap
	if hasDirty {
		if om, mapEnd, err = buildMap(l, firstDirty, cleanEnd, tv, c.o.MapEntries); err != nil {
			return err
		}
	} else {
		mapEnd = cleanEnd
	}
	var rewrite []log.SegmentInfo // every cleanable segment up to the mapped end
	for _, s := range cleanable {
		if s.Base >= mapEnd {
			break
		}
		rewrite = append(rewrite, s)
	}
	w := &rewriter{tv: tv, om: om, nowMs: nowMs, cfg: cfg, horizon: math.MaxInt64}
	if t.ForgetMarkers != nil && len(rewrite) > 0 {
		upTo := rewrite[len(rewrite)-1].End
		gone, aborts := tv.removableMarkers(rewrite[0].Base, upTo, nowMs)
		if len(gone) > 0 {
			if err := t.ForgetMarkers(aborts, upTo); err != nil {
				return fmt.Errorf("forget transaction markers: %w", err)
			}
			w.gone = gone
		}
	}
	var read, written int64
	for _, s := range rewrite {
		select {
		case <-c.stop:
			return nil
		default:
		}
		r, wr, err := w.rewriteSegment(l, s)
		if errors.Is(err, log.ErrSegmentGone) {
			continue
		}
		if err != nil {
			return err
		}
		read, written = read+r, written+wr
	}
	c.passes.Add(1)
	c.read.Add(read)
	c.written.Add(written)
	c.removed.Add(w.removed)
	c.markers.Add(w.markers)
	c.setStatus(l, func(s *Status) {
		s.FirstDirty = max(s.FirstDirty, mapEnd)
		s.LastCleaned = now
		s.nextHorizon = w.horizon
	})
	c.o.Logger.Debug("cleaner: cleaned", "partition", t.Name, "upTo", mapEnd, "read", read, "written", written, "removed", w.removed)
	return nil
}
