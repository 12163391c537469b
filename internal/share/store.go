package share

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
)

// Record is one record of the share-group state log (__share_group_state):
// Key names a group's configs, a share-partition's snapshot or an update of
// it, Value is the state (nil: a tombstone, the state is gone). Offset is
// the record's offset in the log (Load's input; Append ignores it).
type Record struct {
	Key, Value []byte
	Offset     int64
}

// Store is the share-group state log the coordinator appends to. Append
// appends recs in order, after everything appended before, at consecutive
// offsets from first, and returns a wait that blocks until they (and so
// everything before them) are durable. The coordinator appends under its
// lock, so the log order is the order of the changes, and waits after
// unlocking, so concurrent changes share one fsync. Prune deletes the
// records below offset (the log start offset advances, as Kafka's share
// coordinator does with DeleteRecords); the coordinator asks only for
// offsets whose replacements are durable, and a lower offset than an
// earlier Prune's changes nothing.
type Store interface {
	Append(recs []Record) (first int64, wait func(context.Context) error, err error)
	Prune(offset int64) error
}

// The record kinds (the key's "type"), after Kafka's share coordinator
// records: a group record holds the group's configs; a partition record is
// a ShareSnapshot (the whole state of one share-partition); an update
// record is a ShareUpdate (what changed since the previous record of that
// share-partition), written between snapshots.
const (
	keyGroup     = "group"     // value: groupSnap (the group exists; its configs)
	keyPartition = "partition" // value: partSnap, the whole state
	keyUpdate    = "update"    // value: partSnap of the changed offsets only (stateNone: no entry)
)

// stateNone marks, in an update record, an offset of the window that no
// longer has an entry (gone from the log: a gap).
const stateNone int8 = -1

// stateKey is a record key, as JSON.
type stateKey struct {
	Type      string `json:"type"`
	Group     string `json:"group"`
	Topic     string `json:"topic,omitempty"`
	Partition int32  `json:"partition,omitempty"`
}

type groupSnap struct {
	Configs map[string]string `json:"configs,omitempty"`
}

// partSnap is one share-partition: its SPSO, SPEO and the state of every
// offset between them that has one, as runs in offset order.
type partSnap struct {
	Start int64     `json:"spso"`
	End   int64     `json:"speo"`
	Runs  []runSnap `json:"runs,omitempty"`
}

// runSnap is offsets [First, Last] with one state and delivery count.
type runSnap struct {
	First int64 `json:"first"`
	Last  int64 `json:"last"`
	State int8  `json:"state"`
	Count int16 `json:"count"`
}

// maxWindow bounds SPEO - SPSO in a loaded record: every offset in the
// window may get an entry, so a corrupt record must not claim more.
const maxWindow = 1 << 24

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("share: encode %T: %v", v, err)) // only plain structs and maps of strings
	}
	return b
}

func groupKey(id string) []byte { return mustJSON(stateKey{Type: keyGroup, Group: id}) }

func groupRecord(g *group) Record {
	return Record{Key: groupKey(g.id), Value: mustJSON(groupSnap{Configs: g.configs})}
}

func partKey(id string, tp TP) []byte {
	return mustJSON(stateKey{Type: keyPartition, Group: id, Topic: tp.Topic, Partition: tp.Partition})
}

// saved is one offset's state as the state log has it.
type saved struct {
	state int8
	count int16
}

// persisted is sp's state as a restart would find it: a restart ends every
// acquisition lock as an expiry would, so an acquired record is written as
// available again, or archived when its delivery count reached limit.
func (sp *sharePartition) persisted(limit int) map[int64]saved {
	out := make(map[int64]saved, len(sp.recs))
	for o, r := range sp.recs {
		st := r.state
		if st == stateAcquired {
			st = stateAvailable
			if int(r.count) >= limit {
				st = stateArchived
			}
		}
		out[o] = saved{st, r.count}
	}
	return out
}

// runsOf run-length encodes the offsets of m in [start, end) in offset
// order; with base (an update), only offsets whose state differs from
// base's, an offset base has and m has not being stateNone.
func runsOf(m, base map[int64]saved, start, end int64) []runSnap {
	offs := make([]int64, 0, len(m))
	for o, v := range m {
		if b, ok := base[o]; base == nil || !ok || b != v {
			offs = append(offs, o)
		}
	}
	for o := range base {
		if _, ok := m[o]; !ok && o >= start && o < end {
			offs = append(offs, o)
		}
	}
	sort.Slice(offs, func(i, j int) bool { return offs[i] < offs[j] })
	var runs []runSnap
	for _, o := range offs {
		v, ok := m[o]
		if !ok {
			v = saved{state: stateNone}
		}
		if k := len(runs) - 1; k >= 0 && runs[k].Last == o-1 && runs[k].State == v.state && runs[k].Count == v.count {
			runs[k].Last = o
			continue
		}
		runs = append(runs, runSnap{First: o, Last: o, State: v.state, Count: v.count})
	}
	return runs
}

// change is one record to append with what it does to the coordinator
// once appended: commit (may be nil) runs then, and need says whether it
// is the record replay starts from for its key (a snapshot or a group
// record) or, with tomb, ends the key.
type change struct {
	rec    Record
	need   bool
	tomb   bool
	commit func()
}

// partChangeLocked is the record of tp's current state: a snapshot when
// the state log has none of it yet or share.coordinator.snapshot.update.records.per.snapshot
// updates followed its last one (or force), else an update of what
// changed since the last record.
func (c *Coordinator) partChangeLocked(g *group, tp TP, force bool) change {
	sp := g.parts[tp]
	cur := sp.persisted(g.limit())
	ps := partSnap{Start: sp.start, End: sp.end}
	if force || sp.saved == nil || sp.updates >= c.lim.SnapshotUpdateRecords {
		ps.Runs = runsOf(cur, nil, sp.start, sp.end)
		return change{rec: Record{Key: partKey(g.id, tp), Value: mustJSON(ps)}, need: true,
			commit: func() { sp.saved, sp.updates = cur, 0 }}
	}
	ps.Runs = runsOf(cur, sp.saved, sp.start, sp.end)
	return change{rec: Record{Key: mustJSON(stateKey{Type: keyUpdate, Group: g.id, Topic: tp.Topic, Partition: tp.Partition}), Value: mustJSON(ps)},
		commit: func() { sp.saved, sp.updates = cur, sp.updates+1 }}
}

// partChangesLocked is partChangeLocked of each of g's partitions in tps.
func (c *Coordinator) partChangesLocked(g *group, tps []TP) []change {
	out := make([]change, 0, len(tps))
	for _, tp := range tps {
		if g.parts[tp] != nil {
			out = append(out, c.partChangeLocked(g, tp, false))
		}
	}
	return out
}

// appendLocked appends chs to the store and applies them (see change); the
// caller waits (unlocked) with the returned wait before answering. When a
// prune round is due (share.coordinator.state.topic.prune.interval.ms since
// the last), keys whose replay still starts below the previous round's end
// (nothing rewrote them for a whole interval: cold, as Kafka's
// share.coordinator.cold.partition.snapshot.interval.ms) get a fresh
// snapshot in the same append, and once the append is durable the log
// start advances to the lowest offset any key's replay starts from: every
// record below it was superseded by a durable snapshot.
func (c *Coordinator) appendLocked(chs ...change) (func(context.Context) error, error) {
	if len(chs) == 0 {
		return nil, nil
	}
	now := c.now()
	prune := !now.Before(c.nextPrune)
	if prune {
		chs = append(chs, c.coldLocked()...)
	}
	recs := make([]Record, len(chs))
	for i, ch := range chs {
		recs[i] = ch.rec
	}
	first, wait, err := c.store.Append(recs)
	if err != nil {
		return nil, err
	}
	for i, ch := range chs {
		if ch.commit != nil {
			ch.commit()
		}
		switch k := string(ch.rec.Key); {
		case ch.tomb:
			delete(c.need, k)
		case ch.need:
			c.need[k] = first + int64(i)
		}
	}
	if !prune {
		return wait, nil
	}
	end := first + int64(len(recs))
	c.nextPrune, c.coldBelow = now.Add(c.lim.PruneInterval), end
	upTo := end
	for _, o := range c.need {
		upTo = min(upTo, o)
	}
	return func(ctx context.Context) error {
		if err := wait(ctx); err != nil {
			return err
		}
		// A failed prune only leaves records a later round deletes.
		_ = c.store.Prune(upTo)
		return nil
	}, nil
}

// coldLocked is a fresh record of every key whose replay starts below
// coldBelow.
func (c *Coordinator) coldLocked() []change {
	var out []change
	for _, g := range c.groups {
		if o, ok := c.need[string(groupKey(g.id))]; ok && o < c.coldBelow {
			out = append(out, change{rec: groupRecord(g), need: true})
		}
		for tp := range g.parts {
			if o, ok := c.need[string(partKey(g.id, tp))]; !ok || o < c.coldBelow {
				out = append(out, c.partChangeLocked(g, tp, true))
			}
		}
	}
	return out
}

// Load replays the state log, in order from its log start, into the
// coordinator (at start, before serving). Errors: a record that does not
// decode (bad input is an error, never a panic).
func (c *Coordinator) Load(recs []Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, r := range recs {
		if err := c.loadLocked(r); err != nil {
			return fmt.Errorf("share: state record %d (offset %d): %w", i, r.Offset, err)
		}
	}
	for _, g := range c.groups {
		for _, sp := range g.parts {
			sp.saved = sp.persisted(g.limit()) // what the log holds, for the next update
			sp.advance()                       // records archived by the restart (delivery limit) may end the window's head
		}
	}
	c.nextPrune = c.now().Add(c.lim.PruneInterval)
	return nil
}

var errBadRecord = errors.New("bad share state record")

func (c *Coordinator) loadLocked(r Record) error {
	var k stateKey
	if err := json.Unmarshal(r.Key, &k); err != nil {
		return fmt.Errorf("%w: key: %v", errBadRecord, err)
	}
	switch k.Type {
	case keyGroup:
		if r.Value == nil {
			delete(c.groups, k.Group)
			delete(c.need, string(r.Key))
			return nil
		}
		c.need[string(r.Key)] = r.Offset
		var gs groupSnap
		if err := json.Unmarshal(r.Value, &gs); err != nil {
			return fmt.Errorf("%w: group %q: %v", errBadRecord, k.Group, err)
		}
		g := c.groupLocked(k.Group, true)
		g.configs = gs.Configs
		if g.configs == nil {
			g.configs = map[string]string{}
		}
	case keyPartition:
		tp := TP{k.Topic, k.Partition}
		if r.Value == nil {
			if g := c.groups[k.Group]; g != nil {
				delete(g.parts, tp)
			}
			delete(c.need, string(r.Key))
			return nil
		}
		sp, err := decodePart(r.Value)
		if err != nil {
			return fmt.Errorf("%w: %s %s[%d]: %v", errBadRecord, k.Group, k.Topic, k.Partition, err)
		}
		c.groupLocked(k.Group, true).parts[tp] = sp
		c.need[string(r.Key)] = r.Offset
	case keyUpdate:
		var sp *sharePartition
		if g := c.groups[k.Group]; g != nil {
			sp = g.parts[TP{k.Topic, k.Partition}]
		}
		if err := applyUpdate(sp, r.Value); err != nil {
			return fmt.Errorf("%w: update of %s %s[%d]: %v", errBadRecord, k.Group, k.Topic, k.Partition, err)
		}
	default:
		return fmt.Errorf("%w: type %q", errBadRecord, k.Type)
	}
	return nil
}

func decodePart(b []byte) (*sharePartition, error) {
	sp := &sharePartition{recs: map[int64]*rec{}}
	return sp, decodeRuns(sp, b, false)
}

// applyUpdate applies an update record to sp, the share-partition as the
// records before it left it. With no sp (its snapshot was pruned: the log
// start passed it because a later snapshot replaces it) there is nothing
// to update, and the later snapshot will say everything.
func applyUpdate(sp *sharePartition, b []byte) error {
	if sp == nil {
		var ps partSnap
		return json.Unmarshal(b, &ps)
	}
	return decodeRuns(sp, b, true)
}

// decodeRuns decodes a snapshot (into an empty sp) or an update (onto
// sp's state: the window moves to the record's, offsets leaving it are
// dropped, the runs' offsets take their states, stateNone ones lose their
// entry).
func decodeRuns(sp *sharePartition, b []byte, update bool) error {
	var ps partSnap
	if err := json.Unmarshal(b, &ps); err != nil {
		return err
	}
	if ps.Start < 0 || ps.End < ps.Start || ps.End-ps.Start > maxWindow {
		return fmt.Errorf("window [%d, %d) (at most %d offsets)", ps.Start, ps.End, maxWindow)
	}
	for _, r := range ps.Runs {
		if r.First < ps.Start || r.Last >= ps.End || r.Last < r.First {
			return fmt.Errorf("run [%d, %d] outside [%d, %d)", r.First, r.Last, ps.Start, ps.End)
		}
		switch r.State {
		case stateAvailable, stateAcknowledged, stateArchived:
		case stateNone:
			if !update {
				return fmt.Errorf("run [%d, %d]: state %d in a snapshot", r.First, r.Last, r.State)
			}
		default:
			return fmt.Errorf("run [%d, %d]: state %d", r.First, r.Last, r.State)
		}
	}
	for o := range sp.recs {
		if o < ps.Start || o >= ps.End {
			delete(sp.recs, o)
		}
	}
	sp.start, sp.end = ps.Start, ps.End
	for _, r := range ps.Runs {
		for o := r.First; o <= r.Last; o++ {
			if r.State == stateNone {
				delete(sp.recs, o)
			} else {
				sp.recs[o] = &rec{state: r.State, count: r.Count}
			}
		}
	}
	return nil
}
