package replica

import (
	"container/heap"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/cryptotest"
	"time"

	"github.com/kawa-broker/kawa/internal/batch"
	"github.com/kawa-broker/kawa/internal/log"
	"github.com/kawa-broker/kawa/internal/vfs"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// The deterministic simulation: N nodes, each a Scheduler (one worker, so a cycle's order is fixed) over its
// own in-memory file system, in one goroutine on virtual time. The network loses, delays (and so reorders)
// and partitions messages; nodes crash, losing every write not fsynced (vfs.MemFS.CrashClone), either between
// cycles or in the middle of one (the k-th file operation of the cycle fails, as if the power went), and
// restart. Every random choice comes from the seed; raft's own randomness (election timeouts, from
// crypto/rand) is made deterministic by cryptotest.SetGlobalRandom, so a seed replays exactly.
//
// Checkers, run as the simulation goes and at the end:
//   - committed entries never change: every node applies, at each index, the entry any node applied there;
//   - no committed entry is lost: after the faults stop and the network heals, every node's log and applied
//     sequence hold every entry ever applied anywhere, at the same index;
//   - no proposal is committed twice;
//   - one leader per term per group: no two nodes lead one term, and a follower only follows a node that
//     became leader of that term;
//   - a restarted node's durable log agrees with the committed entries up to its durable commit index.

var (
	seedFlag  = flag.Int64("seed", -1, "TestSim: run only this seed, logging its trace")
	seedsFlag = flag.Int("seeds", 0, "TestSim: number of seeds per cluster size (default 100, or $KAWA_SIM_SEEDS)")
)

const (
	simTickMs      = 10    // virtual ms per raft tick
	simRunMs       = 3000  // virtual ms with faults
	simSettleMaxMs = 20000 // virtual ms allowed for convergence after the faults stop
)

type simConfig struct {
	nodes, groups int
	faults        bool
	lyingFsync    bool // File.Sync does nothing: the checkers must catch the loss
	checkSends    bool // check every sent message against what a power cut at that moment would leave
	// batchLog runs the groups on BatchLog (the partition log) instead of FileLog, with Kafka batches as
	// proposals, and checks Kafka offsets too: every node stores each committed data entry at the same
	// offset, and offsets run contiguously over the data entries (raft's own entries take none).
	batchLog bool
	// offsetBug (with batchLog): node 1 reads its data entries back one offset too high, a bug only the
	// offset check can see.
	offsetBug bool
}

type simEvent struct {
	at  int64
	seq uint64
	fn  func()
}

type eventHeap []simEvent

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(simEvent)) }
func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

type entryRec struct {
	term uint64
	typ  pb.EntryType
	data string
}

type sim struct {
	cfg    simConfig
	seed   uint64
	rng    *rand.Rand
	now    int64
	seq    uint64
	events eventHeap
	nodes  []*simNode // nodes[i] has ID i+1
	dirty  map[*simNode]bool
	trace  func(string)
	digest io.Writer // every trace line, for the replay test

	blocked  map[[2]uint64]bool // directed links that drop everything
	lossPct  int
	maxDelay int64
	faulting bool

	committed map[GroupID][]entryRec
	offsets   map[GroupID][]int64           // batchLog: base offset of each committed index as first checked (-1: not data)
	leaders   map[GroupID]map[uint64]uint64 // term → leader
	proposals int
	stats     simStats
	err       error // first violation
}

// simStats counts the faults a run went through, to show the seeds exercise them.
type simStats struct {
	crashes, powerCuts, netFaults, truncations int
}

func (a *simStats) add(b simStats) {
	a.crashes += b.crashes
	a.powerCuts += b.powerCuts
	a.netFaults += b.netFaults
	a.truncations += b.truncations
}

// simLog is a group's LogStore in the simulation: a FileLog or a BatchLog.
type simLog interface {
	LogStore
	Close() error
}

// truncLog counts appends that replace a conflicting suffix.
type truncLog struct {
	simLog
	s    *sim
	node uint64
}

func (l truncLog) Append(ents []*pb.Entry) error {
	if last, _ := l.LastIndex(); len(ents) > 0 && ents[0].GetIndex() <= last {
		l.s.stats.truncations++
		l.s.logf("log truncated at index %d (was at %d)", ents[0].GetIndex(), last)
	}
	return l.simLog.Append(ents)
}

// Entries applies the offsetBug, if configured, on node 1.
func (l truncLog) Entries(lo, hi, maxSize uint64) ([]*pb.Entry, error) {
	ents, err := l.simLog.Entries(lo, hi, maxSize)
	if !l.s.cfg.offsetBug || l.node != 1 {
		return ents, err
	}
	for i, e := range ents {
		if h, herr := batch.ParseHeader(e.GetData()); herr == nil && e.GetType() == pb.EntryType_EntryNormal {
			d := slices.Clone(e.GetData())
			batch.SetBaseOffset(d, h.BaseOffset+1)
			ents[i] = &pb.Entry{Index: e.Index, Term: e.Term, Type: e.Type, Data: d}
		}
	}
	return ents, err
}

// openLog opens group g's log on fsys. A BatchLog gets a file cache of its own, so no descriptor is ever
// closed and reopened behind the simulation's back (the armed power cut counts file operations).
func (s *sim) openLog(fsys vfs.FS, files *log.FileCache, g GroupID) (simLog, error) {
	if !s.cfg.batchLog {
		return OpenFileLog(fsys, "/raft/group-"+strconv.Itoa(int(g))+".log")
	}
	return OpenBatchLog("/raft/group-"+strconv.Itoa(int(g)), log.Options{
		FS: fsys, Files: files, SegmentBytes: 2048, IndexIntervalBytes: 256, Logger: slog.New(slog.DiscardHandler),
	})
}

type simNode struct {
	s     *sim
	id    uint64
	mem   *vfs.MemFS
	sched *Scheduler
	logs  map[GroupID]simLog
	sms   map[GroupID]*simSM
	up    bool
	// Crash in the middle of a cycle: after opsLeft more file operations, every operation fails.
	armed   bool
	opsLeft int
	powered bool // false once the armed crash fired
}

type simSM struct {
	n       *simNode
	g       GroupID
	applied uint64
	lead    uint64
}

func (s *sim) logf(format string, args ...any) {
	line := fmt.Sprintf("%6dms ", s.now) + fmt.Sprintf(format, args...)
	if s.trace != nil {
		s.trace(line)
	}
	if s.digest != nil {
		io.WriteString(s.digest, line+"\n")
	}
}

func (s *sim) violate(format string, args ...any) {
	if s.err == nil {
		s.err = fmt.Errorf("at %dms: %s", s.now, fmt.Sprintf(format, args...))
		s.logf("VIOLATION %v", s.err)
	}
}

func (s *sim) at(t int64, fn func()) {
	s.seq++
	heap.Push(&s.events, simEvent{at: t, seq: s.seq, fn: fn})
}

func newSim(cfg simConfig, seed uint64) *sim {
	s := &sim{
		cfg:       cfg,
		seed:      seed,
		rng:       rand.New(rand.NewPCG(seed, 0x6b617761)),
		dirty:     map[*simNode]bool{},
		blocked:   map[[2]uint64]bool{},
		committed: map[GroupID][]entryRec{},
		offsets:   map[GroupID][]int64{},
		leaders:   map[GroupID]map[uint64]uint64{},
		maxDelay:  1,
	}
	if cfg.faults {
		s.lossPct = s.rng.IntN(15)
		s.maxDelay = 1 + s.rng.Int64N(30)
		s.faulting = true
	}
	for i := range cfg.nodes {
		s.nodes = append(s.nodes, &simNode{s: s, id: uint64(i + 1), mem: vfs.NewMem()})
	}
	return s
}

func (s *sim) voters() []uint64 {
	v := make([]uint64, len(s.nodes))
	for i := range v {
		v[i] = uint64(i + 1)
	}
	return v
}

// fs is the node's file system: its MemFS, behind the armed-crash switch and, for the lying-fsync check,
// with Sync made a no-op.
func (n *simNode) fs() vfs.FS {
	inner := vfs.FS(n.mem)
	if n.s.cfg.lyingFsync {
		// Over BatchLog the segments' .raft files stay honest: a lost one is corruption that Open reports
		// at once, and the point is to see raft's checkers catch lost entries.
		inner = lyingFS{n.mem, n.s.cfg.batchLog}
	}
	return vfs.NewErrorFS(inner, func(op, name string) error {
		if !n.powered {
			return errPowerCut
		}
		if n.armed {
			if n.opsLeft == 0 {
				n.powered = false
				n.s.stats.powerCuts++
				n.s.logf("node %d: power cut at %s %s", n.id, op, filepath.Base(name))
				return errPowerCut
			}
			n.opsLeft--
		}
		return nil
	})
}

var errPowerCut = errors.New("sim: power cut")

func (n *simNode) start() {
	s := n.s
	n.up, n.powered, n.armed = true, true, false
	fsys := n.fs()
	sched, err := New(Config{
		NodeID: n.id, FS: fsys, Dir: "/raft", Transport: simTransport{n},
		Logger:  slog.New(slog.DiscardHandler),
		Workers: 1, ElectionTicks: 10, HeartbeatTicks: 1, MaxInflightMsgs: 16, MaxSizePerMsg: 4096,
	})
	if err != nil {
		s.violate("node %d: restart: %v", n.id, err)
		return
	}
	n.sched = sched
	n.logs = map[GroupID]simLog{}
	n.sms = map[GroupID]*simSM{}
	files := log.NewFileCache(1 << 20)
	for g := GroupID(1); g <= GroupID(s.cfg.groups); g++ {
		lg, err := s.openLog(fsys, files, g)
		if err != nil {
			s.violate("node %d group %d: open log: %v", n.id, g, err)
			return
		}
		n.checkDurablePrefix(g, lg, sched.hs.get(g))
		sm := &simSM{n: n, g: g}
		tl := truncLog{lg, s, n.id}
		if err := sched.AddGroup(g, tl, s.voters(), sm); err != nil {
			s.violate("node %d group %d: add: %v", n.id, g, err)
			return
		}
		n.logs[g], n.sms[g] = tl, sm
	}
	s.logf("node %d: up", n.id)
	s.dirty[n] = true
}

// checkDurablePrefix: what survived on disk up to the durable commit index is what the cluster committed.
func (n *simNode) checkDurablePrefix(g GroupID, lg simLog, hs *pb.HardState) {
	last, _ := lg.LastIndex()
	if hs.GetCommit() > last {
		n.s.violate("node %d group %d: durable commit %d beyond durable log end %d", n.id, g, hs.GetCommit(), last)
		return
	}
	n.s.checkLog(n, g, lg, min(hs.GetCommit(), uint64(len(n.s.committed[g]))))
}

func (s *sim) checkLog(n *simNode, g GroupID, lg simLog, upTo uint64) {
	if upTo == 0 {
		return
	}
	ents, err := lg.Entries(1, upTo+1, ^uint64(0))
	if err != nil || uint64(len(ents)) != upTo {
		s.violate("node %d group %d: log lacks committed entries 1..%d (%d entries, %v)", n.id, g, upTo, len(ents), err)
		return
	}
	for i, e := range ents {
		if rec(e) != s.committed[g][i] {
			s.violate("node %d group %d: log index %d is %+v, committed was %+v", n.id, g, i+1, rec(e), s.committed[g][i])
			return
		}
	}
	if s.cfg.batchLog {
		s.checkOffsets(n, g, ents)
	}
}

// checkOffsets (BatchLog): the stored committed entries' Kafka offsets run contiguously from 0 over the data
// entries, and every node stores each one at the offset the first node checked had.
func (s *sim) checkOffsets(n *simNode, g GroupID, ents []*pb.Entry) {
	offs := s.offsets[g]
	var next int64
	for i, e := range ents {
		off := int64(-1) // raft's own entries take no offset
		if e.GetType() == pb.EntryType_EntryNormal && len(e.GetData()) > 0 {
			h, err := batch.ParseHeader(e.GetData())
			if err != nil || h.BaseOffset != next {
				s.violate("node %d group %d: index %d stored at offset %d, the data entries before it end at %d (%v)", n.id, g, i+1, h.BaseOffset, next, err)
				return
			}
			off, next = h.BaseOffset, h.LastOffset()+1
		}
		if i == len(offs) {
			offs = append(offs, off)
		} else if offs[i] != off {
			s.violate("node %d group %d: committed index %d at offset %d, another node has it at %d", n.id, g, i+1, off, offs[i])
			return
		}
	}
	s.offsets[g] = offs
}

// rec is what the checkers compare of an entry. A Kafka batch's base offset and partitionLeaderEpoch (outside
// its CRC) are left out: raft hands out the proposal's bytes until it reads the entry back from a BatchLog,
// which has them assigned (checkOffsets checks those).
// proposalName is the proposal's name ("g1-p5"): the data, or the records' value of a Kafka batch.
func proposalName(e *pb.Entry) string {
	if recs, err := batch.Records(e.GetData()); err == nil && len(recs) > 0 {
		return string(recs[0].Value)
	}
	return string(e.GetData())
}

func rec(e *pb.Entry) entryRec {
	d := e.GetData()
	if e.GetType() == pb.EntryType_EntryNormal && len(d) >= batch.HeaderSize && d[16] == 2 {
		d = slices.Clone(d)
		clear(d[0:8])
		clear(d[12:16])
	}
	return entryRec{e.GetTerm(), e.GetType(), string(d)}
}

func (n *simNode) crash() {
	if !n.up {
		return
	}
	n.sched.Close()
	// The clone comes first: closing a BatchLog fsyncs it, which a power cut would not have done.
	n.mem = n.mem.CrashCloneFunc(n.s.tornTail)
	for _, lg := range n.logs {
		lg.Close()
	}
	n.up = false
	n.s.stats.crashes++
	n.s.logf("node %d: crashed", n.id)
}

type simTransport struct{ n *simNode }

func (t simTransport) Send(to uint64, msgs []Message) {
	s := t.n.s
	from := t.n.id
	if s.cfg.checkSends {
		t.n.checkSends(msgs)
	}
	for _, m := range msgs {
		if s.blocked[[2]uint64{from, to}] || s.rng.IntN(100) < s.lossPct {
			continue
		}
		// Through the wire format, as a real transport would carry it.
		b, err := proto.Marshal(m.Msg)
		if err != nil {
			s.violate("marshal: %v", err)
			return
		}
		g := m.Group
		s.at(s.now+1+s.rng.Int64N(s.maxDelay), func() {
			dst := s.nodes[to-1]
			if !dst.up {
				return
			}
			var msg pb.Message
			if err := proto.Unmarshal(b, &msg); err != nil {
				s.violate("unmarshal: %v", err)
				return
			}
			dst.sched.Step([]Message{{Group: g, Msg: &msg}})
			s.dirty[dst] = true
		})
	}
}

// checkSends: every message may depend only on durable state. What a power cut now would leave must hold
// the HardState term (and vote) the message carries and the entries it sends or acknowledges.
func (n *simNode) checkSends(msgs []Message) {
	s := n.s
	clone := n.mem.CrashClone()
	hs, err := openHardStates(clone, "/raft")
	if err != nil {
		s.violate("node %d: durable hardstate: %v", n.id, err)
		return
	}
	logs := map[GroupID]simLog{}
	files := log.NewFileCache(1 << 20)
	for _, m := range msgs {
		lg := logs[m.Group]
		if lg == nil {
			if lg, err = s.openLog(clone, files, m.Group); err != nil {
				s.violate("node %d: durable log: %v", n.id, err)
				return
			}
			defer lg.Close()
			logs[m.Group] = lg
		}
		st, msg := hs.get(m.Group), m.Msg
		typ := msg.GetType()
		if typ != pb.MsgPreVote && typ != pb.MsgPreVoteResp && st.GetTerm() < msg.GetTerm() {
			s.violate("node %d group %d: sends %v at term %d, durable term is %d", n.id, m.Group, typ, msg.GetTerm(), st.GetTerm())
		}
		if typ == pb.MsgVoteResp && !msg.GetReject() && (st.GetVote() != msg.GetTo() || st.GetTerm() != msg.GetTerm()) {
			s.violate("node %d group %d: grants its vote to %d at term %d, durable vote is %d at term %d", n.id, m.Group, msg.GetTo(), msg.GetTerm(), st.GetVote(), st.GetTerm())
		}
		for _, e := range msg.GetEntries() {
			if tm, err := lg.Term(e.GetIndex()); err != nil || tm != e.GetTerm() {
				s.violate("node %d group %d: sends entry %d term %d, durable log has term %d (%v)", n.id, m.Group, e.GetIndex(), e.GetTerm(), tm, err)
			}
		}
		if last, _ := lg.LastIndex(); typ == pb.MsgAppResp && !msg.GetReject() && last < msg.GetIndex() {
			s.violate("node %d group %d: acknowledges index %d, durable log ends at %d", n.id, m.Group, msg.GetIndex(), last)
		}
	}
}

func (sm *simSM) Apply(ents []*pb.Entry) {
	s := sm.n.s
	for _, e := range ents {
		if e.GetIndex() != sm.applied+1 {
			s.violate("node %d group %d: applied index %d after %d", sm.n.id, sm.g, e.GetIndex(), sm.applied)
			return
		}
		sm.applied++
		c := s.committed[sm.g]
		switch {
		case e.GetIndex() <= uint64(len(c)):
			if c[e.GetIndex()-1] != rec(e) {
				s.violate("node %d group %d: committed index %d changed from %+v to %+v", sm.n.id, sm.g, e.GetIndex(), c[e.GetIndex()-1], rec(e))
			}
		default:
			r := rec(e)
			if len(e.GetData()) > 0 && slices.ContainsFunc(c, func(c entryRec) bool { return c.data == r.data }) {
				s.violate("group %d: proposal %q committed twice (index %d)", sm.g, proposalName(e), e.GetIndex())
			}
			s.committed[sm.g] = append(c, r)
			s.logf("group %d: commit %d %q (term %d, on node %d)", sm.g, e.GetIndex(), proposalName(e), e.GetTerm(), sm.n.id)
		}
	}
}

func (sm *simSM) LeaderChanged(lead, term uint64) {
	s := sm.n.s
	sm.lead = lead
	if lead == 0 {
		return
	}
	byTerm := s.leaders[sm.g]
	if byTerm == nil {
		byTerm = map[uint64]uint64{}
		s.leaders[sm.g] = byTerm
	}
	got, ok := byTerm[term]
	switch {
	case lead == sm.n.id && ok && got != lead:
		s.violate("group %d term %d: node %d became leader, node %d already was", sm.g, term, lead, got)
	case lead == sm.n.id:
		byTerm[term] = lead
		s.logf("group %d: node %d leads term %d", sm.g, lead, term)
	case !ok || got != lead:
		s.violate("group %d term %d: node %d follows node %d, which did not become leader of that term (leader: %d)", sm.g, term, sm.n.id, lead, got)
	}
}

// tornTail decides what a crash leaves of each file: its synced bytes and, for half of the files that grew
// since their last fsync, some of the unsynced tail, with a hole of zeros in it half of the time (pages
// written back out of order). Choices come from the seed, the crash count and the path, not from s.rng: the
// file system calls keep in map order.
func (s *sim) tornTail(name string, synced, current []byte) []byte {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%d/%s", s.seed, s.stats.crashes, name)
	r := rand.New(rand.NewPCG(h.Sum64(), 1))
	extra := len(current) - len(synced)
	if extra <= 0 || string(current[:len(synced)]) != string(synced) || r.IntN(2) == 0 {
		return synced
	}
	out := slices.Clone(current[:len(synced)+1+r.IntN(extra)])
	if r.IntN(2) == 0 {
		from := len(synced) + r.IntN(len(out)-len(synced))
		clear(out[from : from+r.IntN(len(out)-from+1)])
	}
	return out
}

// lyingFS is a MemFS whose files' Sync does nothing, so nothing ever becomes durable (with honestRaft,
// except <base>.raft files).
type lyingFS struct {
	*vfs.MemFS
	honestRaft bool
}

func (l lyingFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	f, err := l.MemFS.OpenFile(name, flag, perm)
	if err != nil || l.honestRaft && strings.Contains(filepath.Base(name), ".raft") {
		return f, err
	}
	return lyingFile{f}, nil
}

type lyingFile struct{ vfs.File }

func (lyingFile) Sync() error { return nil }

func (s *sim) schedule() {
	for _, n := range s.nodes {
		s.tickLoop(n, s.rng.Int64N(simTickMs))
	}
	s.proposeLoop(1)
	if s.cfg.faults {
		s.at(100+s.rng.Int64N(500), s.networkFault)
		s.at(200+s.rng.Int64N(800), s.crashFault)
	}
}

func (s *sim) tickLoop(n *simNode, at int64) {
	s.at(at, func() {
		if n.up {
			n.sched.Tick()
			s.dirty[n] = true
		}
		s.tickLoop(n, s.now+simTickMs)
	})
}

func (s *sim) proposeLoop(at int64) {
	s.at(at, func() {
		if !s.faulting && s.now > simRunMs {
			return // the settle phase proposes nothing, so it can converge
		}
		g := GroupID(1 + s.rng.IntN(s.cfg.groups))
		var n *simNode
		if s.rng.IntN(10) < 8 {
			// To whom an up node believes leads, as a client refreshing metadata would.
			for _, c := range s.nodes {
				if c.up && c.sms[g].lead != 0 && s.nodes[c.sms[g].lead-1].up {
					n = s.nodes[c.sms[g].lead-1]
					break
				}
			}
		}
		if n == nil {
			n = s.nodes[s.rng.IntN(len(s.nodes))]
		}
		if n.up {
			s.proposals++
			data := []byte(fmt.Sprintf("g%d-p%d", g, s.proposals))
			if s.cfg.batchLog {
				data = kafkaBatch(string(data), 1+s.rng.IntN(3))
			}
			if err := n.sched.Propose(g, data); err == nil {
				s.dirty[n] = true
			}
		}
		s.proposeLoop(s.now + 1 + s.rng.Int64N(20))
	})
}

func (s *sim) networkFault() {
	if !s.faulting {
		return
	}
	clear(s.blocked)
	ids := s.voters()
	block := func(a, b uint64) { s.blocked[[2]uint64{a, b}] = true }
	switch s.rng.IntN(5) {
	case 0:
		s.logf("network: healed")
	case 1:
		x := ids[s.rng.IntN(len(ids))]
		for _, y := range ids {
			if y != x {
				block(x, y)
				block(y, x)
			}
		}
		s.logf("network: node %d isolated", x)
	case 2:
		a, b := ids[s.rng.IntN(len(ids))], ids[s.rng.IntN(len(ids))]
		if a != b {
			block(a, b)
		}
		s.logf("network: %d -> %d dropped", a, b)
	default:
		s.rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
		k := 1 + s.rng.IntN(len(ids)-1)
		for _, a := range ids[:k] {
			for _, b := range ids[k:] {
				block(a, b)
				block(b, a)
			}
		}
		s.logf("network: split %v | %v", ids[:k], ids[k:])
	}
	s.lossPct = s.rng.IntN(15)
	s.stats.netFaults++
	s.at(s.now+100+s.rng.Int64N(800), s.networkFault)
}

func (s *sim) crashFault() {
	if !s.faulting {
		return
	}
	n := s.nodes[s.rng.IntN(len(s.nodes))]
	if n.up {
		if s.rng.IntN(2) == 0 {
			n.crash()
		} else {
			// Mid-cycle: a later cycle's k-th file operation fails and the node goes down at once.
			n.armed, n.opsLeft = true, s.rng.IntN(12)
			s.logf("node %d: power cut armed after %d file operations", n.id, n.opsLeft)
		}
		s.at(s.now+50+s.rng.Int64N(600), func() {
			if !n.up && s.faulting {
				n.start()
			}
		})
	}
	s.at(s.now+100+s.rng.Int64N(900), s.crashFault)
}

// runCycles runs cycles on every node with work until none has any (messages go out at now+1 or later).
func (s *sim) runCycles() {
	for len(s.dirty) > 0 && s.err == nil {
		nodes := make([]*simNode, 0, len(s.dirty))
		for n := range s.dirty {
			nodes = append(nodes, n)
		}
		slices.SortFunc(nodes, func(a, b *simNode) int { return int(a.id) - int(b.id) })
		clear(s.dirty)
		for _, n := range nodes {
			for n.up && n.sched.cycle() {
			}
			if n.up && !n.powered {
				n.crash()
				s.at(s.now+50+s.rng.Int64N(600), func() {
					if !n.up && s.faulting {
						n.start()
					}
				})
			}
		}
	}
}

func (s *sim) converged() bool {
	for g := GroupID(1); g <= GroupID(s.cfg.groups); g++ {
		want := uint64(len(s.committed[g]))
		for _, n := range s.nodes {
			if !n.up || n.sms[g].applied != want {
				return false
			}
		}
	}
	return true
}

// run runs the simulation and returns the first violation.
func (s *sim) run() error {
	defer func() {
		for _, n := range s.nodes {
			n.crash()
		}
	}()
	for _, n := range s.nodes {
		n.start()
	}
	s.schedule()
	stopFaults := false
	for s.err == nil && s.events.Len() > 0 {
		e := heap.Pop(&s.events).(simEvent)
		if e.at > s.now {
			s.runCycles()
			if stopFaults && s.converged() {
				break
			}
			s.now = e.at
		}
		if !stopFaults && s.now >= simRunMs {
			stopFaults = true
			s.faulting = false
			clear(s.blocked)
			s.lossPct = 0
			for _, n := range s.nodes {
				if !n.up {
					n.start()
				}
				n.armed = false
			}
			s.logf("faults stopped, network healed")
		}
		e.fn()
		if s.now > simRunMs+simSettleMaxMs {
			return fmt.Errorf("no convergence %dms after the faults stopped: %s", simSettleMaxMs, s.progress())
		}
	}
	if s.err != nil {
		return s.err
	}
	for g := GroupID(1); g <= GroupID(s.cfg.groups); g++ {
		for _, n := range s.nodes {
			s.checkLog(n, g, n.logs[g], uint64(len(s.committed[g])))
		}
		if len(s.leaders[g]) == 0 {
			s.violate("group %d never elected a leader", g)
		}
	}
	return s.err
}

func (s *sim) progress() string {
	out := ""
	for g := GroupID(1); g <= GroupID(s.cfg.groups); g++ {
		out += fmt.Sprintf(" g%d:committed=%d", g, len(s.committed[g]))
		for _, n := range s.nodes {
			if n.up {
				out += fmt.Sprintf(",n%d=%d", n.id, n.sms[g].applied)
			}
		}
	}
	return out
}

func simSeeds() int {
	if *seedsFlag > 0 {
		return *seedsFlag
	}
	if v, err := strconv.Atoi(os.Getenv("KAWA_SIM_SEEDS")); err == nil && v > 0 {
		return v
	}
	return 100
}

var simClusters = []simConfig{
	{nodes: 3, groups: 8, faults: true},
	{nodes: 5, groups: 5, faults: true},
}

// clusters returns simClusters, with $KAWA_SIM_GROUPS groups when set (the acceptance size is 20;
// CI runs fewer groups and more seeds).
func clusters() []simConfig {
	out := slices.Clone(simClusters)
	if v, err := strconv.Atoi(os.Getenv("KAWA_SIM_GROUPS")); err == nil && v > 0 {
		for i := range out {
			out[i].groups = v
		}
	}
	return out
}

// TestSim runs the simulation over many seeds (-seeds or $KAWA_SIM_SEEDS per cluster size; seed s of the
// 5-node cluster is 1,000,000+s; $KAWA_SIM_GROUPS groups). A failure prints the one command that replays it
// with a trace.
func TestSim(t *testing.T) { runSimSeeds(t, "TestSim", false) }

// runSimSeeds is TestSim (name) over FileLog, or over BatchLog with batchLog.
func runSimSeeds(t *testing.T, name string, batchLog bool) {
	if *seedFlag >= 0 {
		seed := uint64(*seedFlag)
		cfg := clusters()[0]
		if seed >= 1_000_000 {
			cfg = clusters()[1]
		}
		cfg.batchLog = batchLog
		cryptotest.SetGlobalRandom(t, seed)
		s := newSim(cfg, seed)
		s.trace = func(l string) { t.Log(l) }
		if err := s.run(); err != nil {
			t.Fatalf("seed %d (%d nodes, %d groups): %v", seed, cfg.nodes, cfg.groups, err)
		}
		t.Logf("seed %d: %d proposals, %s", seed, s.proposals, s.progress())
		return
	}
	n := simSeeds()
	start := time.Now()
	var proposals, commits int
	var stats simStats
	for ci, cfg := range clusters() {
		cfg.batchLog = batchLog
		for i := range n {
			seed := uint64(ci*1_000_000 + i)
			cryptotest.SetGlobalRandom(t, seed)
			s := newSim(cfg, seed)
			if err := s.run(); err != nil {
				env := ""
				if cfg.groups != simClusters[ci].groups {
					env = fmt.Sprintf("KAWA_SIM_GROUPS=%d ", cfg.groups)
				}
				t.Fatalf("seed %d (%d nodes, %d groups, BatchLog %v): %v\nreproduce: %sgo test ./internal/replica -run '%s$' -seed %d -v", seed, cfg.nodes, cfg.groups, batchLog, err, env, name, seed)
			}
			proposals += s.proposals
			stats.add(s.stats)
			for _, c := range s.committed {
				commits += len(c)
			}
		}
	}
	el := time.Since(start)
	t.Logf("%d seeds in %v (%v per seed): %d proposals, %d committed entries; %d crashes (%d of them power cuts in a cycle), %d network faults, %d log truncations",
		2*n, el.Round(time.Millisecond), (el / time.Duration(2*n)).Round(time.Millisecond), proposals, commits, stats.crashes, stats.powerCuts, stats.netFaults, stats.truncations)
}

// TestSimReplaysExactly: one seed run twice gives the same trace, byte for byte.
func TestSimReplaysExactly(t *testing.T) {
	digest := func() uint64 {
		cryptotest.SetGlobalRandom(t, 7)
		s := newSim(simClusters[0], 7)
		h := fnv.New64a()
		s.digest = h
		if err := s.run(); err != nil {
			t.Fatal(err)
		}
		return h.Sum64()
	}
	if a, b := digest(), digest(); a != b {
		t.Fatalf("seed 7 replayed differently: trace digests %x, %x", a, b)
	}
}

// TestSimSendsFollowDurableState: on a few seeds, every message sent is checked against the state a power
// cut at that moment would leave (see checkSends); the whole HardState and log are cloned per send, so this
// runs fewer seeds than TestSim.
func TestSimSendsFollowDurableState(t *testing.T) {
	for _, batchLog := range []bool{false, true} {
		seeds := uint64(2)
		if batchLog {
			seeds = 1 // recovering every BatchLog of the clone per send is slow
		}
		for seed := range seeds {
			cryptotest.SetGlobalRandom(t, seed)
			cfg := simClusters[0]
			cfg.checkSends, cfg.batchLog = true, batchLog
			if err := newSim(cfg, seed).run(); err != nil {
				t.Fatalf("seed %d (BatchLog %v): %v", seed, batchLog, err)
			}
		}
	}
}

// TestSimCatchesLyingFsync: with File.Sync a no-op, crashes lose acknowledged raft state, and the checkers
// must say so on some seed (else they check nothing).
func TestSimCatchesLyingFsync(t *testing.T) {
	for seed := range uint64(50) {
		cryptotest.SetGlobalRandom(t, seed)
		cfg := simClusters[0]
		cfg.lyingFsync = true
		if err := newSim(cfg, seed).run(); err != nil {
			t.Logf("seed %d: caught: %v", seed, err)
			return
		}
	}
	t.Fatal("50 seeds with a lying fsync and crashes, and no checker noticed")
}

// TestSimBatchLog runs the simulation over BatchLog, the partition log (TestSim's seeds, faults and flags),
// with Kafka batches as proposals and the offset check added.
func TestSimBatchLog(t *testing.T) { runSimSeeds(t, "TestSimBatchLog", true) }

// TestSimBatchLogCatchesBugs: over BatchLog, a lying fsync and a replica reading its entries back at the wrong
// Kafka offset are each caught on some seed.
func TestSimBatchLogCatchesBugs(t *testing.T) {
	for name, bug := range map[string]func(*simConfig){
		"lying fsync": func(c *simConfig) { c.lyingFsync = true },
		"offset bug":  func(c *simConfig) { c.offsetBug = true },
	} {
		caught := false
		for seed := range uint64(50) {
			cryptotest.SetGlobalRandom(t, seed)
			cfg := simClusters[0]
			cfg.batchLog = true
			bug(&cfg)
			// A log that fails to open is caught too, but says nothing of the checkers.
			if err := newSim(cfg, seed).run(); err != nil && !strings.Contains(err.Error(), "open log") {
				t.Logf("%s: seed %d: caught: %v", name, seed, err)
				caught = true
				break
			}
		}
		if !caught {
			t.Errorf("%s: 50 seeds over BatchLog and no checker noticed", name)
		}
	}
}
