package fetchsession

import (
	"errors"
	"math"
	"testing"
	"time"
)

func wants(topic string, parts ...int32) []Want {
	var out []Want
	for _, p := range parts {
		out = append(out, Want{Key: Key{topic, p}, FetchOffset: int64(p) * 10, MaxBytes: 1 << 20})
	}
	return out
}

// TestEpochs: a full fetch creates a session expecting epoch 1; each incremental fetch must carry the next
// epoch; a wrong epoch or an unknown ID is refused without changing the session; FinalEpoch closes it.
func TestEpochs(t *testing.T) {
	c := New(10, 0)
	now := time.Unix(1000, 0)
	s := c.Full(0, InitialEpoch, wants("t", 0, 1), now)
	if s == nil || s.ID() <= 0 || c.Len() != 1 {
		t.Fatalf("Full = %v, %d sessions", s, c.Len())
	}
	if _, _, err := c.Incremental(s.ID(), 2, nil, nil, now); !errors.Is(err, ErrInvalidEpoch) {
		t.Fatalf("epoch 2 first: %v, want ErrInvalidEpoch", err)
	}
	if _, _, err := c.Incremental(s.ID()+1, 1, nil, nil, now); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown ID: %v, want ErrNotFound", err)
	}
	for e := int32(1); e <= 3; e++ {
		if _, got, err := c.Incremental(s.ID(), e, nil, nil, now); err != nil || len(got) != 2 {
			t.Fatalf("epoch %d: %v, %d partitions", e, err, len(got))
		}
	}
	if _, _, err := c.Incremental(s.ID(), 3, nil, nil, now); !errors.Is(err, ErrInvalidEpoch) {
		t.Fatalf("a replayed epoch: %v, want ErrInvalidEpoch", err)
	}
	if nextEpoch(math.MaxInt32) != 1 {
		t.Fatal("epochs do not wrap to 1")
	}
	if c.Full(s.ID(), FinalEpoch, wants("t", 0), now) != nil || c.Len() != 0 {
		t.Fatalf("FinalEpoch left %d sessions", c.Len())
	}
	if _, _, err := c.Incremental(s.ID(), 4, nil, nil, now); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after FinalEpoch: %v, want ErrNotFound", err)
	}
}

// TestIncrementalUpdatesAndResponds: an incremental fetch adds and updates the partitions it names and
// removes forgotten ones; Respond keeps a partition only when it has records, an error or a changed
// watermark, and moves partitions that returned records to the end of the order.
func TestIncrementalUpdatesAndResponds(t *testing.T) {
	c := New(10, 0)
	now := time.Unix(1000, 0)
	s := c.Full(0, InitialEpoch, wants("t", 0, 1, 2), now)
	res := func(p int32, records bool, hw int64) Result {
		return Result{Key: Key{"t", p}, HasRecords: records, HighWatermark: hw, LastStable: hw, Start: 0}
	}
	if got := c.Respond(s, true, []Result{res(0, false, 5), res(1, false, 5), res(2, false, 5)}); got[0] != true || got[1] != true || got[2] != true {
		t.Fatalf("full response includes %v, want all", got)
	}
	upd := []Want{{Key: Key{"t", 1}, FetchOffset: 77, MaxBytes: 5}, {Key: Key{"u", 0}, FetchOffset: 1}}
	_, got, err := c.Incremental(s.ID(), 1, upd, []Key{{"t", 2}}, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].Key != (Key{"t", 0}) || got[1] != upd[0] || got[2] != upd[1] {
		t.Fatalf("session partitions %+v", got)
	}
	inc := c.Respond(s, false, []Result{res(0, false, 5), res(1, true, 9), {Key: Key{"u", 0}, ErrorCode: 3, HighWatermark: -1, LastStable: -1, Start: -1}})
	if inc[0] || !inc[1] || !inc[2] {
		t.Fatalf("incremental response includes %v, want [false true true]", inc)
	}
	if c.Respond(s, false, []Result{res(0, false, 6)})[0] != true {
		t.Fatal("a new high watermark without records is not reported")
	}
	_, got, _ = c.Incremental(s.ID(), 2, nil, nil, now)
	if got[len(got)-1].Key != (Key{"t", 1}) {
		t.Fatalf("order %+v: the partition that returned records is not last", got)
	}
}

// TestEviction: a full cache makes room by evicting the least recently used stale session, else the smallest
// session when the new one is larger; otherwise the new fetch gets no session.
func TestEviction(t *testing.T) {
	c := New(2, time.Minute)
	t0 := time.Unix(1000, 0)
	a := c.Full(0, InitialEpoch, wants("a", 0, 1, 2), t0)
	b := c.Full(0, InitialEpoch, wants("b", 0), t0.Add(time.Second))
	if got := c.Full(0, InitialEpoch, wants("c", 0), t0.Add(2*time.Second)); got != nil {
		t.Fatal("a session of 1 partition evicted one of equal size with none stale")
	}
	if got := c.Full(0, InitialEpoch, wants("c", 0, 1), t0.Add(3*time.Second)); got == nil {
		t.Fatal("a session of 2 partitions did not evict the 1-partition one")
	}
	if _, _, err := c.Incremental(b.ID(), 1, nil, nil, t0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the evicted session: %v, want ErrNotFound", err)
	}
	if got := c.Full(0, InitialEpoch, wants("d", 0), t0.Add(2*time.Minute)); got == nil {
		t.Fatal("no stale session evicted for a new one")
	}
	if _, _, err := c.Incremental(a.ID(), 1, nil, nil, t0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the stale LRU session: %v, want ErrNotFound", err)
	}
	if c.Evictions() != 2 || c.Len() != 2 {
		t.Fatalf("%d evictions, %d sessions; want 2 and 2", c.Evictions(), c.Len())
	}
	if New(0, 0).Full(0, InitialEpoch, wants("a", 0), t0) != nil {
		t.Fatal("a cache of 0 slots created a session")
	}
}
