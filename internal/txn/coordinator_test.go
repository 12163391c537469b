package txn

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kawa-broker/kawa/internal/producer"
)

func TestInitProducerIDAllocatesThenBumps(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{})
	first := e.mustInit("a")
	if first != (ProducerIDEpoch{1000, 0}) {
		t.Fatalf("first init = %+v, want {1000 0}", first)
	}
	second := e.mustInit("a")
	if second != (ProducerIDEpoch{1000, 1}) {
		t.Fatalf("second init = %+v, want {1000 1}", second)
	}
	// KIP-360: the current holder keeps its producer ID and gets a bump.
	third, err := e.init("a", second)
	if err != nil || third != (ProducerIDEpoch{1000, 2}) {
		t.Fatalf("init with current = %+v, %v; want {1000 2}", third, err)
	}
	// A retry of that call (its epoch is now the last one) gets the same answer.
	if again, err := e.init("a", second); err != nil || again != third {
		t.Fatalf("retry = %+v, %v; want %+v", again, err, third)
	}
	// The holder fenced by the plain init above is fenced.
	if _, err := e.init("a", first); !errors.Is(err, kerr.ProducerFenced) {
		t.Fatalf("init with fenced epoch: %v, want PRODUCER_FENCED", err)
	}
	// BL-12: another transactional.id never fences this one.
	if other := e.mustInit("b"); other != (ProducerIDEpoch{1001, 0}) {
		t.Fatalf("other id = %+v", other)
	}
	if err := e.c.AddPartitions(context.Background(), "a", third, []TopicPartition{tp("t", 0)}); err != nil {
		t.Fatalf("a still current after b's init: %v", err)
	}
}

func TestInitProducerIDValidatesTimeout(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{MaxTimeout: time.Minute})
	for _, d := range []time.Duration{0, -time.Second, time.Minute + time.Millisecond} {
		if _, err := e.c.InitProducerID(context.Background(), "a", d, noPID); !errors.Is(err, kerr.InvalidTransactionTimeout) {
			t.Errorf("timeout %v: %v, want INVALID_TRANSACTION_TIMEOUT", d, err)
		}
	}
	if _, err := e.c.InitProducerID(context.Background(), "", time.Second, noPID); !errors.Is(err, kerr.InvalidRequest) {
		t.Errorf("empty id: %v", err)
	}
	if _, err := e.c.InitProducerID(context.Background(), "a", time.Minute, noPID); err != nil {
		t.Errorf("max timeout: %v", err)
	}
}

func TestCommitWritesMarkersAndGroupsThenCompletes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{})
	pe := e.mustInit("a")
	e.mustAdd("a", pe, tp("t", 1), tp("t", 0))
	e.mustAdd("a", pe, tp("t", 0)) // already in: answered at once
	if err := e.c.AddOffsets(context.Background(), "a", pe, "g"); err != nil {
		t.Fatal(err)
	}
	d, _ := e.c.Describe("a")
	if d.State != Ongoing || !reflect.DeepEqual(d.SortedPartitions(), []TopicPartition{tp("t", 0), tp("t", 1)}) || !reflect.DeepEqual(d.SortedGroups(), []string{"g"}) {
		t.Fatalf("ongoing: %+v", d)
	}
	if got, err := e.end("a", pe, true, false); err != nil || got != noPID {
		t.Fatalf("EndTxn = %+v, %v", got, err)
	}
	d = e.waitState("a", CompleteCommit)
	if len(d.Partitions) != 0 || len(d.Groups) != 0 || d.Epoch != 0 {
		t.Fatalf("complete: %+v", d)
	}
	want := producer.MarkerInfo{ProducerID: pe.ProducerID, Epoch: 0, Commit: true, TxnVersion: 1}
	got := e.markers.all()
	if len(got) != 2 || got[0].Info != want || got[1].Info != want {
		t.Fatalf("markers %+v, want two of %+v", got, want)
	}
	if g := e.groups.all(); !reflect.DeepEqual(g, []groupEnd{{"g", pe.ProducerID, true}}) {
		t.Fatalf("groups %+v", g)
	}
	// A retried commit is answered with success; an abort now is illegal.
	if _, err := e.end("a", pe, true, false); err != nil {
		t.Fatalf("retried commit: %v", err)
	}
	if _, err := e.end("a", pe, false, false); !errors.Is(err, kerr.InvalidTxnState) {
		t.Fatalf("abort after commit: %v", err)
	}
	// The log replays to the same state.
	n := e.reload(Config{})
	if d2, _ := n.c.Describe("a"); d2.State != CompleteCommit || d2.ProducerID != pe.ProducerID || d2.Epoch != 0 {
		t.Fatalf("after reload: %+v", d2)
	}
}

func TestIllegalTransitions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{})
	pe := e.mustInit("a")
	cases := []struct {
		name string
		err  error
		want error
	}{
		{"commit with no transaction", e.endErr("a", pe, true), kerr.InvalidTxnState},
		{"abort with no transaction", e.endErr("a", pe, false), kerr.InvalidTxnState},
		{"unknown transactional.id", e.endErr("zz", pe, true), kerr.InvalidProducerIDMapping},
		{"wrong producer ID", e.endErr("a", ProducerIDEpoch{pe.ProducerID + 7, 0}, true), kerr.InvalidProducerIDMapping},
		{"wrong epoch", e.endErr("a", ProducerIDEpoch{pe.ProducerID, 5}, true), kerr.ProducerFenced},
		{"add with wrong epoch", e.c.AddPartitions(context.Background(), "a", ProducerIDEpoch{pe.ProducerID, 1}, []TopicPartition{tp("t", 0)}), kerr.ProducerFenced},
		{"add to unknown id", e.c.AddPartitions(context.Background(), "zz", pe, []TopicPartition{tp("t", 0)}), kerr.InvalidProducerIDMapping},
		{"empty group", e.c.AddOffsets(context.Background(), "a", pe, ""), kerr.InvalidGroupID},
	}
	for _, c := range cases {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, c.err, c.want)
		}
	}
}

func (e *env) endErr(id string, pe ProducerIDEpoch, commit bool) error {
	_, err := e.end(id, pe, commit, false)
	return err
}

func TestFenceByNewInstanceAbortsOngoing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{})
	old := e.mustInit("a")
	e.mustAdd("a", old, tp("t", 0))
	if _, err := e.init("a", noPID); !errors.Is(err, kerr.ConcurrentTransactions) {
		t.Fatalf("init while ongoing: %v, want CONCURRENT_TRANSACTIONS", err)
	}
	d := e.waitState("a", CompleteAbort)
	if d.Epoch != 1 {
		t.Fatalf("fenced epoch %d, want 1", d.Epoch)
	}
	if m := e.markers.all(); len(m) != 1 || m[0].Info.Commit || m[0].Info.Epoch != 1 {
		t.Fatalf("markers %+v, want one ABORT at epoch 1", m)
	}
	fresh := e.mustInit("a")
	if fresh != (ProducerIDEpoch{old.ProducerID, 2}) {
		t.Fatalf("new instance got %+v, want epoch 2", fresh)
	}
	if _, err := e.end("a", old, true, false); !errors.Is(err, kerr.ProducerFenced) {
		t.Fatalf("old EndTxn: %v", err)
	}
	if _, err := e.init("a", old); !errors.Is(err, kerr.ProducerFenced) {
		t.Fatalf("old re-init: %v", err)
	}
}

// BL-10: InitProducerId with the current (P, e) while T is ongoing aborts T
// first, then the holder gets a newer epoch.
func TestKIP360InitAbortsOngoingFirst(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{})
	pe := e.mustInit("a")
	e.mustAdd("a", pe, tp("t", 0), tp("t", 1))
	if _, err := e.init("a", pe); !errors.Is(err, kerr.ConcurrentTransactions) {
		t.Fatalf("init: %v", err)
	}
	got, err := e.init("a", pe) // waits for the abort to complete
	if err != nil || got != (ProducerIDEpoch{pe.ProducerID, 1}) {
		t.Fatalf("retry = %+v, %v; want epoch 1", got, err)
	}
	for _, m := range e.markers.all() {
		if m.Info.Commit || m.Info.Epoch != 1 {
			t.Fatalf("marker %+v, want ABORT at epoch 1", m)
		}
	}
	if n := len(e.markers.all()); n != 2 {
		t.Fatalf("%d markers, want 2", n)
	}
	// Committing under the old epoch is refused: T is never reported committed.
	if _, err := e.end("a", pe, true, false); !errors.Is(err, kerr.ProducerFenced) {
		t.Fatalf("commit under old epoch: %v", err)
	}
}

func TestPinHoldsMarkersUntilReleased(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{})
	pe := e.mustInit("a")
	e.mustAdd("a", pe, tp("t", 0))
	if _, err := e.c.Pin("a", pe, tp("t", 1)); !errors.Is(err, kerr.TransactionAbortable) {
		t.Fatalf("pin of a partition not added: %v", err)
	}
	if _, err := e.c.Pin("a", ProducerIDEpoch{pe.ProducerID, 3}, tp("t", 0)); !errors.Is(err, kerr.ProducerFenced) {
		t.Fatalf("pin with wrong epoch: %v", err)
	}
	release, err := e.c.Pin("a", pe, tp("t", 0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.end("a", pe, false, false); err != nil {
		t.Fatal(err)
	}
	select {
	case <-e.markers.wrote:
		t.Fatal("marker written while a verified append was in flight")
	case <-time.After(50 * time.Millisecond):
	}
	if _, err := e.c.Pin("a", pe, tp("t", 0)); !errors.Is(err, kerr.ConcurrentTransactions) {
		t.Fatalf("pin while ending: %v", err)
	}
	release()
	release() // idempotent
	e.waitState("a", CompleteAbort)
	if _, err := e.c.Pin("a", pe, tp("t", 0)); !errors.Is(err, kerr.TransactionAbortable) {
		t.Fatalf("pin after abort: %v", err)
	}
	res, err := e.c.Verify("a", pe, []TopicPartition{tp("t", 0)})
	if err != nil || !errors.Is(res[tp("t", 0)], kerr.TransactionAbortable) {
		t.Fatalf("verify after abort: %v %v", res, err)
	}
}

// A decision once recorded is completed after a restart (the crash case).
func TestLoadCompletesPreparedTransactions(t *testing.T) {
	t.Parallel()
	stall := make(chan struct{})
	e := newEnv(t, Config{StallMarkers: stall})
	pe := e.mustInit("a")
	e.mustAdd("a", pe, tp("t", 0), tp("u", 3))
	if _, err := e.end("a", pe, true, false); err != nil {
		t.Fatal(err)
	}
	if d, _ := e.c.Describe("a"); d.State != PrepareCommit {
		t.Fatalf("state %v, want PrepareCommit (markers stalled)", d.State)
	}
	n := e.reload(Config{})
	n.waitState("a", CompleteCommit)
	if m := n.markers.all(); len(m) != 2 || !m[0].Info.Commit || !m[1].Info.Commit {
		t.Fatalf("markers after reload: %+v", m)
	}
	if len(e.markers.all()) != 0 {
		t.Fatal("stalled coordinator wrote markers")
	}
}

func TestMarkerErrorsRetriedOrSkipped(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{})
	pe := e.mustInit("a")
	e.mustAdd("a", pe, tp("t", 0))
	e.markers.mu.Lock()
	e.markers.err = kerr.KafkaStorageError
	e.markers.mu.Unlock()
	if _, err := e.end("a", pe, true, false); err != nil {
		t.Fatal(err)
	}
	e.waitState("a", CompleteCommit)
	if m := e.markers.all(); len(m) != 1 {
		t.Fatalf("markers %+v: a storage error must be retried", m)
	}
	pe = e.mustInit("a")
	e.mustAdd("a", pe, tp("gone", 0))
	e.markers.mu.Lock()
	e.markers.err = kerr.UnknownTopicOrPartition
	e.markers.mu.Unlock()
	if _, err := e.end("a", pe, false, false); err != nil {
		t.Fatal(err)
	}
	e.waitState("a", CompleteAbort)
	if m := e.markers.all(); len(m) != 1 {
		t.Fatalf("markers %+v: a deleted partition is skipped", m)
	}
}
