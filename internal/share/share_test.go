package share

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kawa-broker/kawa/internal/vfs"
)

var tp = TP{Topic: "q", Partition: 0}

func one(string) (int32, bool) { return 1, true }

// open returns a coordinator on fsys with group "g" reading from the
// earliest offset and members a and b joined.
func open(t *testing.T, fsys vfs.FS) *Coordinator {
	t.Helper()
	c, err := Open(fsys, "state", time.Now)
	if err != nil {
		t.Fatal(err)
	}
	earliest := "earliest"
	if err := c.SetConfig("g", ConfigAutoOffsetReset, &earliest, false); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"a", "b"} {
		if _, err := c.Heartbeat("g", m, 0, []string{"q"}, one); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// acquire reads like ShareFetch over a log of ten one-record batches 0..9.
func acquire(c *Coordinator, member string) []Acquired {
	from, ok := c.ReadFrom("g", tp, 0, 10, 10)
	if !ok {
		return nil
	}
	var spans []Span
	for o := from; o < 10; o++ {
		spans = append(spans, Span{First: o, Last: o})
	}
	return c.Acquire("g", member, tp, from, spans, 10, 100)
}

// The acquisition lock expires after share.record.lock.duration.ms of
// virtual time, not before; the records then go to another member with
// delivery count 2.
func TestLockExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := open(t, vfs.NewMem())
		if got := acquire(c, "a"); len(got) != 1 || got[0] != (Acquired{0, 9, 1}) {
			t.Fatalf("a acquired %v, want [{0 9 1}]", got)
		}
		time.Sleep(DefaultLockDuration - time.Millisecond)
		if got := acquire(c, "b"); len(got) != 0 {
			t.Fatalf("b acquired %v before the lock expired", got)
		}
		time.Sleep(time.Millisecond)
		if got := acquire(c, "b"); len(got) != 1 || got[0] != (Acquired{0, 9, 2}) {
			t.Fatalf("b acquired %v after expiry, want [{0 9 2}]", got)
		}
		if err := c.Acknowledge("g", "a", tp, []Ack{{0, 9, []int8{AckAccept}}}); !errors.Is(err, kerr.InvalidRecordState) {
			t.Errorf("ack by the expired holder: %v, want INVALID_RECORD_STATE", err)
		}
	})
}

// Heartbeats that leave or name an unknown member of a group that does not
// exist answer as before but create no group (else made-up group IDs would
// pile up in memory and be described as existing).
func TestHeartbeatUnknownGroupCreatesNothing(t *testing.T) {
	c := open(t, vfs.NewMem())
	if a, err := c.Heartbeat("nope1", "x", -1, nil, one); err != nil || a.MemberEpoch != -1 {
		t.Errorf("leave of a group that does not exist: %+v, %v; want epoch -1, nil", a, err)
	}
	if _, err := c.Heartbeat("nope2", "x", 5, []string{"q"}, one); !errors.Is(err, kerr.UnknownMemberID) {
		t.Errorf("heartbeat to a group that does not exist: %v, want UNKNOWN_MEMBER_ID", err)
	}
	for _, id := range []string{"nope1", "nope2"} {
		if c.Has(id) {
			t.Errorf("group %s exists after a heartbeat that did not join", id)
		}
	}
	if _, err := c.Heartbeat("new", "m", 0, []string{"q"}, one); err != nil || !c.Has("new") {
		t.Errorf("join: %v, Has = %v; want nil, true", err, c.Has("new"))
	}
}

// A batch with an unknown acknowledge type is refused whole with
// INVALID_REQUEST: none of its offsets change state, and offsets outside the
// in-flight window do not hide the bad type.
func TestAcknowledgeUnknownType(t *testing.T) {
	c := open(t, vfs.NewMem())
	acquire(c, "a")
	types := make([]int8, 10)
	for i := range types {
		types[i] = AckAccept
	}
	types[5] = 99
	if err := c.Acknowledge("g", "a", tp, []Ack{{0, 9, types}}); !errors.Is(err, kerr.InvalidRequest) {
		t.Errorf("ack with type 99 at offset 5: %v, want INVALID_REQUEST", err)
	}
	// All ten are still a's: releasing them succeeds only if none was accepted.
	if err := c.Acknowledge("g", "a", tp, []Ack{{0, 9, []int8{AckRelease}}}); err != nil {
		t.Errorf("release 0..9 after the refused batch: %v, want nil", err)
	}
	for _, a := range []Ack{{-5, -1, []int8{99}}, {100, 200, []int8{-1}}} {
		if err := c.Acknowledge("g", "a", tp, []Ack{a}); !errors.Is(err, kerr.InvalidRequest) {
			t.Errorf("ack %v outside the in-flight window: %v, want INVALID_REQUEST", a, err)
		}
	}
}

// Accepted records stay accepted over a reopen; acquired ones become
// available with their delivery count kept.
func TestReopenKeepsAcks(t *testing.T) {
	fsys := vfs.NewMem()
	c := open(t, fsys)
	acquire(c, "a")
	if err := c.Acknowledge("g", "a", tp, []Ack{{0, 4, []int8{AckAccept}}}); err != nil {
		t.Fatal(err)
	}
	c2 := open(t, fsys)
	got := acquire(c2, "b")
	if len(got) != 1 || got[0] != (Acquired{5, 9, 2}) {
		t.Fatalf("after reopen acquired %v, want [{5 9 2}]", got)
	}
}

// A corrupt snapshot is an error from Open, never a panic.
func TestOpenBadSnapshot(t *testing.T) {
	for _, b := range []string{"", "{", `{"group":"g","partitions":[{"spso":5,"speo":1}]}`,
		`{"group":"g","partitions":[{"spso":0,"speo":2,"runs":[{"first":0,"last":9}]}]}`} {
		fsys := vfs.NewMem()
		if err := vfs.MkdirAllDurable(fsys, "state"); err != nil {
			t.Fatal(err)
		}
		if err := vfs.WriteFileAtomic(fsys, "state/67.json", []byte(b)); err != nil {
			t.Fatal(err)
		}
		if _, err := Open(fsys, "state", time.Now); err == nil {
			t.Errorf("Open accepted snapshot %q", b)
		}
	}
}

// An acknowledgement batch claiming offsets 0..MaxInt64 is answered at
// once (INVALID_RECORD_STATE for the never-acquired tail), not by walking
// the range; the records in flight it covers are acknowledged.
func TestAcknowledgeHugeRange(t *testing.T) {
	c := open(t, vfs.NewMem())
	acquire(c, "a")
	err := c.Acknowledge("g", "a", tp, []Ack{{0, 1<<63 - 1, []int8{AckAccept}}})
	if !errors.Is(err, kerr.InvalidRecordState) {
		t.Errorf("huge ack: %v, want INVALID_RECORD_STATE", err)
	}
	if got := acquire(c, "b"); len(got) != 0 {
		t.Errorf("after accepting 0..9, b acquired %v", got)
	}
}
