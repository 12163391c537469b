package txn

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestListFilters(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{})
	a := e.mustInit("app-a")
	e.mustAdd("app-a", a, tp("t", 0))
	e.mustInit("app-b")
	e.mustInit("other")
	ids := func(f Filter) []string {
		ds, err := e.c.List(f)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, d := range ds {
			out = append(out, d.TransactionalID)
		}
		return out
	}
	for _, c := range []struct {
		f    Filter
		want []string
	}{
		{Filter{}, []string{"app-a", "app-b", "other"}},
		{Filter{States: []State{Ongoing}}, []string{"app-a"}},
		{Filter{States: []State{Empty}}, []string{"app-b", "other"}},
		{Filter{ProducerIDs: []int64{a.ProducerID}}, []string{"app-a"}},
		{Filter{Pattern: "^app-"}, []string{"app-a", "app-b"}},
		{Filter{MinDuration: time.Hour}, nil},
	} {
		if got := ids(c.f); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%+v: %v, want %v", c.f, got, c.want)
		}
	}
	if _, err := e.c.List(Filter{Pattern: "("}); !errors.Is(err, kerr.InvalidRegularExpression) {
		t.Errorf("bad pattern: %v", err)
	}
	d, err := e.c.Describe("app-a")
	if err != nil || d.State != Ongoing || d.ProducerID != a.ProducerID || d.TimeoutMs != 60000 || d.StartMs <= 0 {
		t.Errorf("describe: %+v %v", d, err)
	}
	if _, err := e.c.Describe("nope"); !errors.Is(err, kerr.TransactionalIDNotFound) {
		t.Errorf("describe unknown: %v", err)
	}
}

func TestStateNames(t *testing.T) {
	t.Parallel()
	for s := Empty; s <= PrepareEpochFence; s++ {
		if got, ok := ParseState(s.String()); !ok || got != s {
			t.Errorf("ParseState(%q) = %v, %v", s.String(), got, ok)
		}
	}
	if _, ok := ParseState("Bogus"); ok {
		t.Error("ParseState accepted Bogus")
	}
}

func TestRecordRoundTripAndCorruption(t *testing.T) {
	t.Parallel()
	m := Metadata{
		ProducerID: 7, PrevProducerID: 3, NextProducerID: -1, Epoch: 32767, LastEpoch: 32766,
		TimeoutMs: 900000, State: PrepareAbort, TxnVersion: 2, Fenced: true, StartMs: 123, UpdateMs: 456,
	}.clone()
	m.Partitions[tp("t", 2)] = struct{}{}
	m.Partitions[tp("a", 0)] = struct{}{}
	m.Groups["g"] = struct{}{}
	got, err := decodeValue(encodeValue(m))
	if err != nil || !reflect.DeepEqual(got, m) {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	id, err := decodeKey(encodeKey("tx"))
	if err != nil || id != "tx" {
		t.Fatalf("key: %q %v", id, err)
	}
	v := encodeValue(m)
	for _, bad := range [][]byte{v[:len(v)-1], append(append([]byte{}, v...), 0), {0, 9}, nil} {
		if _, err := decodeValue(bad); !errors.Is(err, errCorrupt) {
			t.Errorf("decode %x: %v, want errCorrupt", bad, err)
		}
	}
	e := newEnv(t, Config{})
	if err := e.c.Load([]Record{{Key: encodeKey("x"), Value: v[:5]}}); err == nil {
		t.Error("Load accepted a corrupt record")
	}
}
