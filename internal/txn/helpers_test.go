package txn

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kawa-broker/kawa/internal/kawatest/wait"
	"github.com/kawa-broker/kawa/internal/producer"
)

// memStore is a Store in memory; fail makes the next Appends fail.
type memStore struct {
	mu   sync.Mutex
	recs []Record
	fail int
}

var errInjected = errors.New("injected store failure")

func (s *memStore) Append(_ context.Context, recs []Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail > 0 {
		s.fail--
		return errInjected
	}
	s.recs = append(s.recs, recs...)
	return nil
}

func (s *memStore) records() []Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Record(nil), s.recs...)
}

func (s *memStore) failNext(n int) {
	s.mu.Lock()
	s.fail = n
	s.mu.Unlock()
}

// marker is one WriteMarker call that succeeded.
type marker struct {
	TP   TopicPartition
	Info producer.MarkerInfo
}

// memMarkers records markers; a non-nil block holds every write until closed.
type memMarkers struct {
	mu    sync.Mutex
	got   []marker
	block chan struct{}
	err   error // returned instead of writing (once)
	wrote chan struct{}
}

func newMarkers() *memMarkers { return &memMarkers{wrote: make(chan struct{}, 1000)} }

func (m *memMarkers) WriteMarker(ctx context.Context, tp TopicPartition, info producer.MarkerInfo) error {
	m.mu.Lock()
	block, err := m.block, m.err
	m.err = nil
	m.mu.Unlock()
	if err != nil {
		return err
	}
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	m.mu.Lock()
	m.got = append(m.got, marker{tp, info})
	m.mu.Unlock()
	m.wrote <- struct{}{}
	return nil
}

func (m *memMarkers) all() []marker {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]marker(nil), m.got...)
}

type groupEnd struct {
	Group  string
	PID    int64
	Commit bool
}

type memGroups struct {
	mu  sync.Mutex
	got []groupEnd
}

func (g *memGroups) CompleteTxn(_ context.Context, group string, pid int64, commit bool) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.got = append(g.got, groupEnd{group, pid, commit})
	return nil
}

func (g *memGroups) all() []groupEnd {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]groupEnd(nil), g.got...)
}

type memIDs struct {
	mu   sync.Mutex
	next int64
}

func (i *memIDs) Next() (int64, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.next++
	return i.next - 1, nil
}

// env is a coordinator over in-memory fakes.
type env struct {
	t       *testing.T
	c       *Coordinator
	store   *memStore
	markers *memMarkers
	groups  *memGroups
	ids     *memIDs
}

func newEnv(t *testing.T, cfg Config) *env {
	t.Helper()
	e := &env{t: t, store: &memStore{}, markers: newMarkers(), groups: &memGroups{}, ids: &memIDs{next: 1000}}
	e.c = New(cfg, e.store, e.markers, e.groups, e.ids)
	if err := e.c.Load(nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.c.Close)
	return e
}

// reload starts a second coordinator over the same log (a restart).
func (e *env) reload(cfg Config) *env {
	e.t.Helper()
	e.c.Close()
	n := &env{t: e.t, store: &memStore{recs: e.store.records()}, markers: newMarkers(), groups: &memGroups{}, ids: e.ids}
	n.c = New(cfg, n.store, n.markers, n.groups, n.ids)
	if err := n.c.Load(n.store.records()); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(n.c.Close)
	return n
}

var noPID = ProducerIDEpoch{ProducerID: -1, Epoch: -1}

func (e *env) init(id string, expected ProducerIDEpoch) (ProducerIDEpoch, error) {
	return e.c.InitProducerID(context.Background(), id, time.Minute, expected)
}

func (e *env) mustInit(id string) ProducerIDEpoch {
	e.t.Helper()
	pe, err := e.init(id, noPID)
	if err != nil {
		e.t.Fatalf("InitProducerID(%s): %v", id, err)
	}
	return pe
}

func (e *env) mustAdd(id string, pe ProducerIDEpoch, tps ...TopicPartition) {
	e.t.Helper()
	if err := e.c.AddPartitions(context.Background(), id, pe, tps); err != nil {
		e.t.Fatalf("AddPartitions: %v", err)
	}
}

func (e *env) end(id string, pe ProducerIDEpoch, commit, v2 bool) (ProducerIDEpoch, error) {
	return e.c.EndTxn(context.Background(), id, pe, commit, v2)
}

// waitState waits until id reaches want (completion runs in the background).
func (e *env) waitState(id string, want State) Description {
	e.t.Helper()
	var d Description
	wait.Until(e.t, 5*time.Second, fmt.Sprintf("%s to reach state %v", id, want), func() bool {
		var err error
		d, err = e.c.Describe(id)
		return err == nil && d.State == want
	})
	return d
}

func tp(topic string, p int32) TopicPartition { return TopicPartition{topic, p} }
