package replica

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kawa-broker/kawa/internal/vfs"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// GroupID names a raft group on every node that holds a replica of it (later: one per partition, plus the
// metadata group).
type GroupID uint64

// Message is one raft message of one group, as a Transport carries it.
type Message struct {
	Group GroupID
	Msg   *pb.Message
}

// Transport carries messages to other nodes. Send is called from the scheduler's cycle, only after the log
// entries and HardState the messages depend on are durable; msgs all go to node to, in the order raft
// produced them within each group. Send must not block on the network (queue and return): a lost message is
// fine for raft, a stalled cycle stalls every group of the node.
type Transport interface {
	Send(to uint64, msgs []Message)
}

// LogStore is one group's raft log: raft.Storage's log methods (Entries, Term, LastIndex, FirstIndex,
// Snapshot; see raft.Storage for their contracts and errors) plus the two writes the scheduler makes.
// The scheduler keeps HardState itself (one node-wide file), so a LogStore holds only entries.
type LogStore interface {
	Entries(lo, hi, maxSize uint64) ([]*pb.Entry, error)
	Term(i uint64) (uint64, error)
	LastIndex() (uint64, error)
	FirstIndex() (uint64, error)
	Snapshot() (*pb.Snapshot, error)
	// Append writes ents (consecutive indexes), first discarding every entry at or after ents[0]'s index
	// (raft's rule for a conflicting suffix). It need not be durable before Sync.
	Append(ents []*pb.Entry) error
	// Sync makes every appended entry durable.
	Sync() error
}

// StateMachine receives one group's committed entries and leadership changes. Its methods are called from
// the scheduler's workers, never two at once for one group.
type StateMachine interface {
	// Apply gets newly committed entries in index order, each once per scheduler lifetime (after a restart
	// raft delivers the committed entries again from the first index). Entries include raft's own: the empty
	// entry of a new leader and configuration changes.
	Apply(ents []*pb.Entry)
	// LeaderChanged reports the group's leader as this node sees it (lead 0: none known) and the term,
	// after the HardState holding that term is durable.
	LeaderChanged(lead, term uint64)
}

// Errors of Scheduler methods.
var (
	ErrUnknownGroup = errors.New("replica: unknown raft group")
	ErrGroupExists  = errors.New("replica: raft group already added")
	ErrStopped      = errors.New("replica: scheduler stopped")
)

// Config configures a Scheduler. Ticks are the unit of raft time: ElectionTicks ticks without hearing from a
// leader start an election (randomised over [ElectionTicks, 2*ElectionTicks)), a leader sends heartbeats every
// HeartbeatTicks.
type Config struct {
	NodeID    uint64 // this node's raft ID, > 0
	FS        vfs.FS
	Dir       string // holds HardStateFile; created durably if missing
	Transport Transport
	Logger    *slog.Logger // default slog.Default()

	Workers        int           // goroutines that process groups, the cycle's own included; default 2
	TickInterval   time.Duration // wall time per tick when driven by Start, default 100ms
	ElectionTicks  int           // default 10
	HeartbeatTicks int           // default 1
	// MaxTicksPerCycle caps the ticks one group catches up in one cycle, so a node that fell behind does not
	// fire a burst of elections (CockroachDB's maxTicks); default 3.
	MaxTicksPerCycle int

	MaxSizePerMsg             uint64 // bytes of entries per append message, default 1 MiB
	MaxInflightMsgs           int    // append messages in flight per follower, default 64
	MaxUncommittedEntriesSize uint64 // bytes a leader holds uncommitted before dropping proposals, default 64 MiB
}

func (c Config) withDefaults() (Config, error) {
	if c.NodeID == 0 || c.FS == nil || c.Dir == "" || c.Transport == nil {
		return c, errors.New("replica: Config needs NodeID > 0, FS, Dir and Transport")
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.Workers, 2)
	def(&c.ElectionTicks, 10)
	def(&c.HeartbeatTicks, 1)
	def(&c.MaxTicksPerCycle, 3)
	def(&c.MaxInflightMsgs, 64)
	if c.TickInterval <= 0 {
		c.TickInterval = 100 * time.Millisecond
	}
	if c.MaxSizePerMsg == 0 {
		c.MaxSizePerMsg = 1 << 20
	}
	if c.MaxUncommittedEntriesSize == 0 {
		c.MaxUncommittedEntriesSize = 64 << 20
	}
	if c.ElectionTicks <= c.HeartbeatTicks {
		return c, fmt.Errorf("replica: ElectionTicks (%d) must exceed HeartbeatTicks (%d)", c.ElectionTicks, c.HeartbeatTicks)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}

// Scheduler drives every raft group of one node (etcd raft RawNodes) from a fixed pool of Workers
// goroutines, never a goroutine per group. Work arrives as messages (Step), proposals (Propose) and ticks
// (Tick); each queues its group once. A cycle takes every queued group and:
//
//  1. steps its messages and proposals, applies its ticks, takes its Ready and appends the Ready's entries to
//     its LogStore, then Syncs the LogStore (in parallel over the workers, one fsync per group);
//  2. writes the changed HardStates of all groups in one append to the node-wide HardState file, fsynced
//     when a term or vote changed (not for commit indexes alone, see hardStates.save);
//  3. sends the Ready's messages, batched per destination node;
//  4. applies committed entries, reports leader changes and calls Advance (in parallel).
//
// So entries and HardState are durable before any message that depends on them leaves the node, and at most
// one HardState fsync covers all groups of a cycle. A group whose LogStore fails, or whose raft panics (raft
// reports broken invariants by panicking), is failed: its messages of that cycle are dropped and it is not
// processed again (GroupErr). A failed HardState write fails the whole node (Err): nothing of that cycle is
// sent or applied.
//
// Goroutines: the Workers, started by New; with Start, one driver goroutine that ticks every TickInterval and
// runs cycles when work is queued. Close stops both. Locks: mu guards the group table, the queue and every
// group's pending inputs; cycleMu serialises cycles; a group's RawNode is touched only by the cycle that holds
// it, and the Transport and StateMachine are called with no scheduler lock held except cycleMu.
type Scheduler struct {
	cfg   Config
	tasks chan func()
	wg    sync.WaitGroup // workers and driver
	work  chan struct{}  // poked when the queue becomes non-empty
	stop  chan struct{}  // closed by Close

	cycleMu sync.Mutex
	hs      *hardStates // under cycleMu

	mu      sync.Mutex
	groups  map[GroupID]*group
	queue   []*group // groups with pending inputs, each once (group.queued)
	err     error    // sticky: the node has failed
	closed  bool
	started bool
}

type group struct {
	id GroupID
	rn *raft.RawNode
	lg LogStore
	sm StateMachine

	// Under Scheduler.mu.
	queued bool
	msgs   []*pb.Message
	props  [][]byte
	ticks  int
	// reports are the transport's local messages (MsgUnreachable, MsgSnapStatus), which raft takes only
	// through RawNode.ReportUnreachable and ReportSnapshot, not Step.
	reports []*pb.Message
	err     error // the group has failed

	// Under cycleMu.
	lead, term uint64 // as last reported to sm
}

// New opens the HardState file under cfg.Dir and starts the worker pool. Groups are added with AddGroup;
// cycles run when Start drives them.
func New(cfg Config) (*Scheduler, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := vfs.MkdirAllDurable(cfg.FS, cfg.Dir); err != nil {
		return nil, err
	}
	hs, err := openHardStates(cfg.FS, cfg.Dir)
	if err != nil {
		return nil, err
	}
	s := &Scheduler{
		cfg:    cfg,
		tasks:  make(chan func()),
		work:   make(chan struct{}, 1),
		stop:   make(chan struct{}),
		hs:     hs,
		groups: map[GroupID]*group{},
	}
	for range cfg.Workers - 1 { // the cycle's own goroutine is the last worker
		s.wg.Go(func() {
			for f := range s.tasks {
				f()
			}
		})
	}
	return s, nil
}

// AddGroup adds group id with static voters (raft node IDs, this node among them) over lg, restoring the
// group's HardState from the node-wide file. Membership changes (ConfChangeV2) are not supported yet, so every
// node must add a group with the same voters.
func (s *Scheduler) AddGroup(id GroupID, lg LogStore, voters []uint64, sm StateMachine) error {
	if !slices.Contains(voters, s.cfg.NodeID) {
		return fmt.Errorf("replica: group %d: voters %v do not include this node %d", id, voters, s.cfg.NodeID)
	}
	s.cycleMu.Lock()
	hs := s.hs.get(id)
	s.cycleMu.Unlock()
	st := &raftStorage{LogStore: lg, hs: hs, cs: &pb.ConfState{Voters: slices.Clone(voters)}}
	rc := &raft.Config{
		ID:                        s.cfg.NodeID,
		ElectionTick:              s.cfg.ElectionTicks,
		HeartbeatTick:             s.cfg.HeartbeatTicks,
		Storage:                   st,
		MaxSizePerMsg:             s.cfg.MaxSizePerMsg,
		MaxInflightMsgs:           s.cfg.MaxInflightMsgs,
		MaxUncommittedEntriesSize: s.cfg.MaxUncommittedEntriesSize,
		CheckQuorum:               true,
		PreVote:                   true,
		// Kawa answers NOT_LEADER_OR_FOLLOWER to a producer that reaches a follower, as Kafka does,
		// instead of forwarding its batch.
		DisableProposalForwarding: true,
		StepDownOnRemoval:         true,
		Logger:                    raftLogger{l: s.cfg.Logger, group: id},
	}
	rn, err := newRawNode(rc)
	if err != nil {
		return fmt.Errorf("replica: group %d: %w", id, err)
	}
	g := &group{id: id, rn: rn, lg: lg, sm: sm}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return ErrStopped
	case s.groups[id] != nil:
		return fmt.Errorf("%w: %d", ErrGroupExists, id)
	}
	s.groups[id] = g
	s.enqueueLocked(g)
	return nil
}

// newRawNode turns raft's panics on a bad config or storage into an error.
func newRawNode(rc *raft.Config) (rn *raft.RawNode, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("raft: %v", r)
		}
	}()
	return raft.NewRawNode(rc)
}

// raftStorage is a LogStore seen as a raft.Storage: InitialState comes from the node-wide HardState file and
// the static voters.
type raftStorage struct {
	LogStore
	hs *pb.HardState
	cs *pb.ConfState
}

func (r *raftStorage) InitialState() (*pb.HardState, *pb.ConfState, error) { return r.hs, r.cs, nil }

// Step hands messages received from a peer to their groups; they are stepped in the next cycle. Messages of
// unknown or failed groups are dropped, as a network would.
func (s *Scheduler) Step(msgs []Message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range msgs {
		if g := s.groups[m.Group]; g != nil && g.err == nil && m.Msg != nil {
			g.msgs = append(g.msgs, m.Msg)
			s.enqueueLocked(g)
		}
	}
}

// Propose queues data as a proposal to group id. Raft drops a proposal this node cannot take (it is not the
// leader, or MaxUncommittedEntriesSize is reached) silently, as it drops a message: the caller learns of
// success only when the entry reaches Apply.
func (s *Scheduler) Propose(id GroupID, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrStopped
	}
	g := s.groups[id]
	switch {
	case g == nil:
		return fmt.Errorf("%w: %d", ErrUnknownGroup, id)
	case g.err != nil:
		return g.err
	}
	g.props = append(g.props, data)
	s.enqueueLocked(g)
	return nil
}

// Tick advances every group's raft clock by one tick (applied in the next cycle).
func (s *Scheduler) Tick() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range slices.Sorted(maps.Keys(s.groups)) {
		g := s.groups[id]
		if g.err == nil {
			g.ticks = min(g.ticks+1, s.cfg.MaxTicksPerCycle)
			s.enqueueLocked(g)
		}
	}
}

func (s *Scheduler) enqueueLocked(g *group) {
	if g.queued {
		return
	}
	g.queued = true
	s.queue = append(s.queue, g)
	select {
	case s.work <- struct{}{}:
	default:
	}
}

// GroupErr returns why group id failed, nil while it works.
func (s *Scheduler) GroupErr(id GroupID) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if g := s.groups[id]; g != nil {
		return g.err
	}
	return fmt.Errorf("%w: %d", ErrUnknownGroup, id)
}

// Err returns why the node failed (a HardState write failed), nil while it works.
func (s *Scheduler) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Start starts the driver goroutine: a tick every TickInterval, and cycles while groups are queued. Without
// Start, nothing runs (the simulation calls Tick and cycle itself, on virtual time).
func (s *Scheduler) Start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started || s.closed {
		return
	}
	s.started = true
	s.wg.Go(func() {
		t := time.NewTicker(s.cfg.TickInterval)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
				s.Tick()
			case <-s.work:
			}
			for s.cycle() {
			}
		}
	})
}

// Close stops the driver and the workers and waits for them. It writes nothing: every cycle already left its
// state durable. The LogStores stay open (their owner closes them).
func (s *Scheduler) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.mu.Unlock()
	close(s.stop)
	s.cycleMu.Lock() // waits out a running cycle; later cycles see closed
	close(s.tasks)
	s.cycleMu.Unlock()
	s.wg.Wait()
}

// work is one group's share of a cycle.
type work struct {
	g       *group
	msgs    []*pb.Message
	props   [][]byte
	ticks   int
	reports []*pb.Message
	rd      raft.Ready
	hasRd   bool
	err     error
}

// cycle runs one scheduler cycle over the queued groups (see Scheduler) and reports whether there was any
// work; false also when the node has failed or is closed.
func (s *Scheduler) cycle() bool {
	s.cycleMu.Lock()
	defer s.cycleMu.Unlock()
	s.mu.Lock()
	if s.closed || s.err != nil || len(s.queue) == 0 {
		s.mu.Unlock()
		return false
	}
	ws := make([]*work, 0, len(s.queue))
	for _, g := range s.queue {
		g.queued = false
		if g.err != nil {
			continue
		}
		ws = append(ws, &work{g: g, msgs: g.msgs, props: g.props, ticks: g.ticks, reports: g.reports})
		g.msgs, g.props, g.ticks, g.reports = nil, nil, 0, nil
	}
	s.queue = s.queue[:0]
	s.mu.Unlock()

	s.parallel(ws, s.readyAndPersist)
	changes := map[GroupID]*pb.HardState{}
	for _, w := range ws {
		if w.err == nil && w.hasRd && w.rd.HardState != nil {
			changes[w.g.id] = proto.CloneOf(w.rd.HardState)
		}
	}
	if err := s.hs.save(changes); err != nil {
		s.mu.Lock()
		s.err = fmt.Errorf("replica: node %d: hardstate: %w", s.cfg.NodeID, err)
		s.mu.Unlock()
		return false
	}
	s.send(ws)
	s.parallel(ws, s.applyAndAdvance)

	s.mu.Lock()
	for _, w := range ws {
		if w.err != nil && w.g.err == nil {
			w.g.err = w.err
		} else if w.err == nil && w.g.rn.HasReady() {
			s.enqueueLocked(w.g)
		}
	}
	s.mu.Unlock()
	return true
}

// parallel runs fn for every work item and waits for all: the calling goroutine works through the items
// with up to Workers-1 pool goroutines helping, so a cycle with one group (or Workers = 1) runs inline, in
// item order. A panic in fn (raft's way of reporting a broken invariant) fails that group only.
func (s *Scheduler) parallel(ws []*work, fn func(*work) error) {
	var next atomic.Int64
	run := func() {
		for {
			i := next.Add(1) - 1
			if i >= int64(len(ws)) {
				return
			}
			if w := ws[i]; w.err == nil {
				s.guard(w, fn)
			}
		}
	}
	var wg sync.WaitGroup
	for range min(s.cfg.Workers-1, len(ws)-1) {
		wg.Add(1)
		s.tasks <- func() {
			defer wg.Done()
			run()
		}
	}
	run()
	wg.Wait()
}

func (s *Scheduler) guard(w *work, fn func(*work) error) {
	defer func() {
		if r := recover(); r != nil {
			w.err = fmt.Errorf("replica: group %d: raft panic: %v", w.g.id, r)
		}
	}()
	if err := fn(w); err != nil {
		w.err = fmt.Errorf("replica: group %d: %w", w.g.id, err)
	}
}

// readyAndPersist is phase 1: inputs into raft, then the Ready's entries onto the LogStore, durably.
func (s *Scheduler) readyAndPersist(w *work) error {
	rn := w.g.rn
	for _, m := range w.msgs {
		// An error is a message raft refuses (a local message type from the network, a response from a
		// peer not in the group): dropped, as the network could have.
		_ = rn.Step(m)
	}
	for _, m := range w.reports {
		if m.GetType() == pb.MsgUnreachable {
			rn.ReportUnreachable(m.GetFrom())
		} else {
			rn.ReportSnapshot(m.GetFrom(), snapshotStatus(m.GetReject()))
		}
	}
	for _, p := range w.props {
		_ = rn.Propose(p) // ErrProposalDropped: see Propose
	}
	for range w.ticks {
		rn.Tick()
	}
	if !rn.HasReady() {
		return nil
	}
	w.rd, w.hasRd = rn.Ready(), true
	if !raft.IsEmptySnap(w.rd.Snapshot) {
		return errors.New("raft snapshot received; snapshots are not supported yet")
	}
	if len(w.rd.Entries) == 0 {
		return nil
	}
	if err := w.g.lg.Append(w.rd.Entries); err != nil {
		return err
	}
	if w.rd.MustSync {
		return w.g.lg.Sync()
	}
	return nil
}

// send is phase 3: the cycle's messages, one Send per destination node, in ascending node order.
func (s *Scheduler) send(ws []*work) {
	out := map[uint64][]Message{}
	for _, w := range ws {
		if w.err != nil || !w.hasRd {
			continue
		}
		for _, m := range w.rd.Messages {
			out[m.GetTo()] = append(out[m.GetTo()], Message{Group: w.g.id, Msg: m})
		}
	}
	for _, to := range slices.Sorted(maps.Keys(out)) {
		s.cfg.Transport.Send(to, out[to])
	}
}

// applyAndAdvance is phase 4.
func (s *Scheduler) applyAndAdvance(w *work) error {
	if !w.hasRd {
		return nil
	}
	g := w.g
	if len(w.rd.CommittedEntries) > 0 {
		g.sm.Apply(w.rd.CommittedEntries)
	}
	if st := g.rn.BasicStatus(); st.Lead != g.lead || (st.Lead != raft.None && st.GetTerm() != g.term) {
		g.lead, g.term = st.Lead, st.GetTerm()
		g.sm.LeaderChanged(st.Lead, st.GetTerm())
	}
	g.rn.Advance(w.rd)
	return nil
}
