package txn

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TV2 (EndTxn v5+, KIP-890 part 2): every EndTxn bumps the epoch and returns
// it; a retry with the old epoch is answered with the same result; the old
// epoch can no longer act.
func TestTV2BumpsEpochAtEveryEnd(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{})
	pe := e.mustInit("a")
	e.mustAdd("a", pe, tp("t", 0))
	got, err := e.end("a", pe, true, true)
	if err != nil || got != (ProducerIDEpoch{pe.ProducerID, 1}) {
		t.Fatalf("EndTxn v5 = %+v, %v; want epoch 1", got, err)
	}
	e.waitState("a", CompleteCommit)
	if m := e.markers.all(); len(m) != 1 || m[0].Info.Epoch != 1 || m[0].Info.TxnVersion != 2 || !m[0].Info.Commit {
		t.Fatalf("markers %+v, want COMMIT at the bumped epoch 1, TV2", m)
	}
	if again, err := e.end("a", pe, true, true); err != nil || again != got {
		t.Fatalf("retry = %+v, %v; want %+v", again, err, got)
	}
	if _, err := e.end("a", pe, false, true); !errors.Is(err, kerr.InvalidTxnState) {
		t.Fatalf("abort retry after commit: %v", err)
	}
	if err := e.c.AddPartitions(context.Background(), "a", pe, []TopicPartition{tp("t", 0)}); !errors.Is(err, kerr.ProducerFenced) {
		t.Fatalf("old epoch adding to the next transaction: %v", err)
	}
	// TV2 may abort with no transaction open; that bumps too.
	if got2, err := e.end("a", got, false, true); err != nil || got2.Epoch != 2 {
		t.Fatalf("empty abort = %+v, %v", got2, err)
	}
	if _, err := e.end("a", ProducerIDEpoch{pe.ProducerID, 2}, true, true); !errors.Is(err, kerr.InvalidTxnState) {
		t.Fatalf("commit with nothing open: %v", err)
	}
}

// BL-13 under TV2: at epoch 32766 the next EndTxn writes markers at 32767 and
// moves the transactional.id to a new producer ID with epoch 0; the epoch
// never wraps and later transactions work.
func TestTV2EpochExhaustionRotates(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{})
	pe := e.mustInit("a")
	if err := e.c.ForceEpoch("a", MaxEpoch-2); err != nil {
		t.Fatal(err)
	}
	pe.Epoch = MaxEpoch - 2
	for i := 0; i < 3; i++ {
		e.mustAdd("a", pe, tp("t", 0))
		next, err := e.end("a", pe, true, true)
		if err != nil {
			t.Fatalf("end %d from %+v: %v", i, pe, err)
		}
		e.waitState("a", CompleteCommit)
		switch i {
		case 0:
			if next != (ProducerIDEpoch{pe.ProducerID, MaxEpoch - 1}) {
				t.Fatalf("end 0 = %+v", next)
			}
		case 1:
			if next.ProducerID == pe.ProducerID || next.Epoch != 0 {
				t.Fatalf("end at exhausted epoch = %+v, want a new producer ID at 0", next)
			}
			if again, err := e.end("a", pe, true, true); err != nil || again != next {
				t.Fatalf("retry across rotation = %+v, %v", again, err)
			}
			if err := e.c.AddPartitions(context.Background(), "a", pe, []TopicPartition{tp("t", 0)}); !errors.Is(err, kerr.ProducerFenced) {
				t.Fatalf("old producer ID after rotation: %v", err)
			}
		case 2:
			if next != (ProducerIDEpoch{pe.ProducerID, 1}) {
				t.Fatalf("end after rotation = %+v", next)
			}
		}
		pe = next
	}
	for _, m := range e.markers.all() {
		if m.Info.Epoch < 0 {
			t.Fatalf("negative epoch marker %+v", m)
		}
	}
	if m := e.markers.all(); m[1].Info.Epoch != MaxEpoch {
		t.Fatalf("exhausting marker epoch %d, want %d", m[1].Info.Epoch, MaxEpoch)
	}
}

// BL-13 under TV1: a new instance fencing an open transaction at epoch 32766
// aborts it at 32767; its retry gets a new producer ID at epoch 0.
func TestFenceAtExhaustedEpochRotates(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{})
	old := e.mustInit("a")
	if err := e.c.ForceEpoch("a", MaxEpoch-1); err != nil {
		t.Fatal(err)
	}
	old.Epoch = MaxEpoch - 1
	e.mustAdd("a", old, tp("t", 0))
	if _, err := e.init("a", noPID); !errors.Is(err, kerr.ConcurrentTransactions) {
		t.Fatalf("init: %v", err)
	}
	fresh := e.mustInit("a")
	if fresh.ProducerID == old.ProducerID || fresh.Epoch != 0 {
		t.Fatalf("after exhaustion got %+v, want a new producer ID at 0", fresh)
	}
	if m := e.markers.all(); len(m) != 1 || m[0].Info.Epoch != MaxEpoch || m[0].Info.ProducerID != old.ProducerID {
		t.Fatalf("markers %+v, want ABORT of the old producer at 32767", m)
	}
	if _, err := e.end("a", old, true, false); !errors.Is(err, kerr.ProducerFenced) {
		t.Fatalf("old producer EndTxn: %v", err)
	}
	e.mustAdd("a", fresh, tp("t", 0))
	if _, err := e.end("a", fresh, true, false); err != nil {
		t.Fatalf("commit under the new producer ID: %v", err)
	}
	e.waitState("a", CompleteCommit)
}

// BL-13 (4), KAFKA-9666: a fencing write that fails is not counted, however
// often InitProducerId is retried.
func TestFailedFenceWriteDoesNotBumpAgain(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{})
	old := e.mustInit("a")
	e.mustAdd("a", old, tp("t", 0))
	e.store.failNext(50)
	for i := 0; i < 50; i++ {
		if _, err := e.init("a", noPID); !errors.Is(err, kerr.CoordinatorNotAvailable) {
			t.Fatalf("attempt %d: %v, want COORDINATOR_NOT_AVAILABLE", i, err)
		}
	}
	if d, _ := e.c.Describe("a"); d.Epoch != old.Epoch || d.State != Ongoing {
		t.Fatalf("after failed fences: %+v", d)
	}
	if _, err := e.init("a", noPID); !errors.Is(err, kerr.ConcurrentTransactions) {
		t.Fatalf("fence: %v", err)
	}
	if fresh := e.mustInit("a"); fresh.Epoch != old.Epoch+2 {
		t.Fatalf("epoch %d after one fence and one init, want %d", fresh.Epoch, old.Epoch+2)
	}
}

// BL-11: the coordinator aborts a transaction older than its timeout and
// bumps the epoch; the old epoch is fenced, and its holder recovers with
// InitProducerId(P, e) (KIP-588).
func TestTimeoutAbortsAndFences(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, Config{})
		pe, err := e.c.InitProducerID(context.Background(), "a", time.Second, noPID)
		if err != nil {
			t.Fatal(err)
		}
		e.mustAdd("a", pe, tp("t", 0))
		time.Sleep(999 * time.Millisecond)
		synctest.Wait()
		if d, _ := e.c.Describe("a"); d.State != Ongoing {
			t.Fatalf("before the timeout: %v", d.State)
		}
		time.Sleep(2 * time.Millisecond)
		synctest.Wait()
		d, _ := e.c.Describe("a")
		if d.State != CompleteAbort || d.Epoch != pe.Epoch+1 {
			t.Fatalf("after the timeout: %+v", d)
		}
		if m := e.markers.all(); len(m) != 1 || m[0].Info.Commit || m[0].Info.Epoch != pe.Epoch+1 {
			t.Fatalf("markers %+v", m)
		}
		if _, err := e.end("a", pe, true, false); !errors.Is(err, kerr.ProducerFenced) {
			t.Fatalf("commit after timeout: %v", err)
		}
		if _, err := e.end("a", pe, true, true); !errors.Is(err, kerr.ProducerFenced) {
			t.Fatalf("TV2 commit after timeout: %v", err)
		}
		got, err := e.c.InitProducerID(context.Background(), "a", time.Second, pe)
		if err != nil || got.ProducerID != pe.ProducerID || got.Epoch <= pe.Epoch {
			t.Fatalf("KIP-588 recovery = %+v, %v", got, err)
		}
	})
}

func TestExpireIDs(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, Config{IDExpiration: time.Hour, ExpirationCheck: time.Minute})
		e.mustInit("idle")
		pe := e.mustInit("open")
		e.mustAdd("open", pe, tp("t", 0))
		time.Sleep(time.Hour + 2*time.Minute)
		synctest.Wait()
		if _, err := e.c.Describe("idle"); !errors.Is(err, kerr.TransactionalIDNotFound) {
			t.Fatalf("idle id: %v, want expired", err)
		}
		// An Ongoing transaction is timed out (aborted) first, never expired open.
		if d, err := e.c.Describe("open"); err != nil && !errors.Is(err, kerr.TransactionalIDNotFound) || err == nil && d.State == Ongoing {
			t.Fatalf("open id: %+v %v", d, err)
		}
		n := e.reload(Config{})
		if _, err := n.c.Describe("idle"); !errors.Is(err, kerr.TransactionalIDNotFound) {
			t.Fatalf("idle id after reload: %v", err)
		}
	})
}

// The delivery-SDK report: a transaction the coordinator aborted on its
// timeout whose markers are still being written (PrepareAbort). Kafka checks
// the producer epoch before the transaction's state, so the old epoch's
// EndTxn (abort or commit, TV1 or TV2) and AddPartitions are PRODUCER_FENCED
// at once, not CONCURRENT_TRANSACTIONS until the markers are written (which
// a client retries until its own deadline).
func TestFencedEpochAnsweredDuringTimeoutAbort(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, Config{})
		block := make(chan struct{})
		e.markers.mu.Lock()
		e.markers.block = block
		e.markers.mu.Unlock()
		pe, err := e.c.InitProducerID(context.Background(), "a", time.Second, noPID)
		if err != nil {
			t.Fatal(err)
		}
		e.mustAdd("a", pe, tp("t", 0))
		time.Sleep(time.Second + time.Millisecond)
		synctest.Wait()
		if d, _ := e.c.Describe("a"); d.State != PrepareAbort || d.Epoch != pe.Epoch+1 {
			t.Fatalf("after the timeout with markers held: %+v", d)
		}
		for _, v2 := range []bool{false, true} {
			for _, commit := range []bool{false, true} {
				start := time.Now()
				if _, err := e.end("a", pe, commit, v2); !errors.Is(err, kerr.ProducerFenced) {
					t.Errorf("EndTxn(commit=%v, v2=%v) from the fenced epoch during the abort: %v, want PRODUCER_FENCED", commit, v2, err)
				}
				if d := time.Since(start); d != 0 {
					t.Errorf("EndTxn(commit=%v, v2=%v) waited %v", commit, v2, d)
				}
			}
		}
		if err := e.c.AddPartitions(context.Background(), "a", pe, []TopicPartition{tp("t", 1)}); !errors.Is(err, kerr.ProducerFenced) {
			t.Errorf("AddPartitions from the fenced epoch during the abort: %v, want PRODUCER_FENCED", err)
		}
		// Recovery (KIP-588) still waits for the abort to finish.
		if _, err := e.c.InitProducerID(context.Background(), "a", time.Second, pe); !errors.Is(err, kerr.ConcurrentTransactions) {
			t.Errorf("InitProducerId(P, e) during the abort: %v, want CONCURRENT_TRANSACTIONS", err)
		}
		close(block)
		synctest.Wait()
		if d, _ := e.c.Describe("a"); d.State != CompleteAbort {
			t.Fatalf("after the markers: %v", d.State)
		}
		got, err := e.c.InitProducerID(context.Background(), "a", time.Second, pe)
		if err != nil || got.ProducerID != pe.ProducerID || got.Epoch <= pe.Epoch {
			t.Fatalf("KIP-588 recovery = %+v, %v", got, err)
		}
	})
}
