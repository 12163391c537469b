package share

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
)

// Record is one record of the share-group state log (__share_group_state):
// Key names a group's configs or one of its share-partitions, Value is its
// latest state (nil: a tombstone, the state is gone). Later records win.
type Record struct {
	Key, Value []byte
}

// Store is the share-group state log the coordinator appends to. Append
// appends recs in order, after everything appended before, and returns a
// wait that blocks until they (and so everything before them) are durable.
// The coordinator appends under its lock, so the log order is the order of
// the changes, and waits after unlocking, so concurrent changes share one
// fsync.
type Store interface {
	Append(recs []Record) (wait func(context.Context) error, err error)
}

// The record kinds (the key's "type").
const (
	keyGroup     = "group"     // value: groupSnap (the group exists; its configs)
	keyPartition = "partition" // value: partSnap
)

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

func groupRecord(g *group) Record {
	return Record{Key: mustJSON(stateKey{Type: keyGroup, Group: g.id}), Value: mustJSON(groupSnap{Configs: g.configs})}
}

func groupTombstone(id string) Record {
	return Record{Key: mustJSON(stateKey{Type: keyGroup, Group: id})}
}

func partKey(id string, tp TP) []byte {
	return mustJSON(stateKey{Type: keyPartition, Group: id, Topic: tp.Topic, Partition: tp.Partition})
}

// partRecord is tp's state. A restart ends every acquisition lock as an
// expiry would, so an acquired record is written as available again, or
// archived when its delivery count reached limit.
func partRecord(id string, tp TP, sp *sharePartition, limit int) Record {
	ps := partSnap{Start: sp.start, End: sp.end}
	offs := make([]int64, 0, len(sp.recs))
	for o := range sp.recs {
		offs = append(offs, o)
	}
	sort.Slice(offs, func(i, j int) bool { return offs[i] < offs[j] })
	for _, o := range offs {
		r := sp.recs[o]
		st := r.state
		if st == stateAcquired {
			st = stateAvailable
			if int(r.count) >= limit {
				st = stateArchived
			}
		}
		if k := len(ps.Runs) - 1; k >= 0 && ps.Runs[k].Last == o-1 && ps.Runs[k].State == st && ps.Runs[k].Count == r.count {
			ps.Runs[k].Last = o
			continue
		}
		ps.Runs = append(ps.Runs, runSnap{First: o, Last: o, State: st, Count: r.count})
	}
	return Record{Key: partKey(id, tp), Value: mustJSON(ps)}
}

// appendLocked appends recs to the store; the caller waits (unlocked) with
// the returned wait before answering.
func (c *Coordinator) appendLocked(recs ...Record) (func(context.Context) error, error) {
	return c.store.Append(recs)
}

// Load replays the state log, in order, into the coordinator (at start,
// before serving). Errors: a record that does not decode (bad input is an
// error, never a panic).
func (c *Coordinator) Load(recs []Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, r := range recs {
		if err := c.loadLocked(r); err != nil {
			return fmt.Errorf("share: state record %d: %w", i, err)
		}
	}
	for _, g := range c.groups {
		for _, sp := range g.parts {
			sp.advance() // records archived by the restart (delivery limit) may end the window's head
		}
	}
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
			return nil
		}
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
			return nil
		}
		sp, err := decodePart(r.Value)
		if err != nil {
			return fmt.Errorf("%w: %s %s[%d]: %v", errBadRecord, k.Group, k.Topic, k.Partition, err)
		}
		c.groupLocked(k.Group, true).parts[tp] = sp
	default:
		return fmt.Errorf("%w: type %q", errBadRecord, k.Type)
	}
	return nil
}

func decodePart(b []byte) (*sharePartition, error) {
	var ps partSnap
	if err := json.Unmarshal(b, &ps); err != nil {
		return nil, err
	}
	if ps.Start < 0 || ps.End < ps.Start || ps.End-ps.Start > maxWindow {
		return nil, fmt.Errorf("window [%d, %d) (at most %d offsets)", ps.Start, ps.End, maxWindow)
	}
	sp := &sharePartition{start: ps.Start, end: ps.End, recs: map[int64]*rec{}}
	for _, r := range ps.Runs {
		if r.First < ps.Start || r.Last >= ps.End || r.Last < r.First {
			return nil, fmt.Errorf("run [%d, %d] outside [%d, %d)", r.First, r.Last, ps.Start, ps.End)
		}
		switch r.State {
		case stateAvailable, stateAcknowledged, stateArchived:
		default:
			return nil, fmt.Errorf("run [%d, %d]: state %d", r.First, r.Last, r.State)
		}
		for o := r.First; o <= r.Last; o++ {
			sp.recs[o] = &rec{state: r.State, count: r.Count}
		}
	}
	return sp, nil
}
