package share

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

var tp = TP{Topic: "q", Partition: 0}

func one(string) (int32, bool) { return 1, true }

var ctx = context.Background()

// memLog is an in-memory state log for the coordinator's unit tests (the
// broker's is a partition of __share_group_state, tested over the wire):
// records are durable once a wait returned for them, and a crash keeps
// only those; Prune drops the records below an offset, as the log start
// offset advancing does.
type memLog struct {
	mu      sync.Mutex
	recs    []Record // from the log start on
	next    int64    // the offset of the next record
	durable int64    // records below it are durable
	start   int64    // the log start offset
}

func newLog() *memLog { return &memLog{} }

func (l *memLog) Append(recs []Record) (int64, func(context.Context) error, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	first := l.next
	for _, r := range recs {
		r.Offset = l.next
		l.recs = append(l.recs, r)
		l.next++
	}
	end := l.next
	return first, func(context.Context) error {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.durable = max(l.durable, end)
		return nil
	}, nil
}

func (l *memLog) Prune(offset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if offset > l.durable {
		return errors.New("memLog: prune past the durable records")
	}
	for len(l.recs) > 0 && l.recs[0].Offset < offset {
		l.recs = l.recs[1:]
	}
	l.start = max(l.start, offset)
	return nil
}

// crash returns the log as a restart after SIGKILL finds it.
func (l *memLog) crash() *memLog {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := &memLog{next: l.durable, durable: l.durable, start: l.start}
	for _, r := range l.recs {
		if r.Offset < l.durable {
			c.recs = append(c.recs, r)
		}
	}
	return c
}

// open returns a coordinator replaying log, with group "g" reading from
// the earliest offset and members a and b joined.
func open(t *testing.T, log *memLog) *Coordinator {
	t.Helper()
	return openLimits(t, log, Limits{})
}

// openLimits is open with the broker-wide limits lim.
func openLimits(t *testing.T, log *memLog, lim Limits) *Coordinator {
	t.Helper()
	c := New(log, time.Now, lim)
	if err := c.Load(log.recs); err != nil {
		t.Fatal(err)
	}
	earliest := "earliest"
	if err := c.SetConfig(ctx, "g", ConfigAutoOffsetReset, &earliest, false); err != nil {
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
func acquire(t *testing.T, c *Coordinator, member string) []Acquired {
	t.Helper()
	from, _, ok := c.ReadFrom("g", tp, 0, 10, 10)
	if !ok {
		return nil
	}
	var spans []Span
	for o := from; o < 10; o++ {
		spans = append(spans, Span{First: o, Last: o})
	}
	acq, err := c.Acquire(ctx, "g", member, tp, from, spans, 10, 100, true)
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	return acq
}

// The acquisition lock expires after share.record.lock.duration.ms of
// virtual time, not before; the records then go to another member with
// delivery count 2.
func TestLockExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := open(t, newLog())
		if got := acquire(t, c, "a"); len(got) != 1 || got[0] != (Acquired{0, 9, 1}) {
			t.Fatalf("a acquired %v, want [{0 9 1}]", got)
		}
		time.Sleep(DefaultLockDuration - time.Millisecond)
		if got := acquire(t, c, "b"); len(got) != 0 {
			t.Fatalf("b acquired %v before the lock expired", got)
		}
		time.Sleep(time.Millisecond)
		if got := acquire(t, c, "b"); len(got) != 1 || got[0] != (Acquired{0, 9, 2}) {
			t.Fatalf("b acquired %v after expiry, want [{0 9 2}]", got)
		}
		if err := c.Acknowledge(ctx, "g", "a", tp, []Ack{{0, 9, []int8{AckAccept}}}); !errors.Is(err, kerr.InvalidRecordState) {
			t.Errorf("ack by the expired holder: %v, want INVALID_RECORD_STATE", err)
		}
	})
}

// Heartbeats that leave or name an unknown member of a group that does not
// exist answer GROUP_ID_NOT_FOUND (Kafka's shareGroup lookup) and create no group (else made-up group IDs would
// pile up in memory and be described as existing).
func TestHeartbeatUnknownGroupCreatesNothing(t *testing.T) {
	c := open(t, newLog())
	if _, err := c.Heartbeat("nope1", "x", -1, nil, one); !errors.Is(err, kerr.GroupIDNotFound) {
		t.Errorf("leave of a group that does not exist: %v, want GROUP_ID_NOT_FOUND", err)
	}
	if _, err := c.Heartbeat("nope2", "x", 5, []string{"q"}, one); !errors.Is(err, kerr.GroupIDNotFound) {
		t.Errorf("heartbeat to a group that does not exist: %v, want GROUP_ID_NOT_FOUND", err)
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
	c := open(t, newLog())
	acquire(t, c, "a")
	types := make([]int8, 10)
	for i := range types {
		types[i] = AckAccept
	}
	types[5] = 99
	if err := c.Acknowledge(ctx, "g", "a", tp, []Ack{{0, 9, types}}); !errors.Is(err, kerr.InvalidRequest) {
		t.Errorf("ack with type 99 at offset 5: %v, want INVALID_REQUEST", err)
	}
	// All ten are still a's: releasing them succeeds only if none was accepted.
	if err := c.Acknowledge(ctx, "g", "a", tp, []Ack{{0, 9, []int8{AckRelease}}}); err != nil {
		t.Errorf("release 0..9 after the refused batch: %v, want nil", err)
	}
	for _, a := range []Ack{{-5, -1, []int8{99}}, {100, 200, []int8{-1}}} {
		if err := c.Acknowledge(ctx, "g", "a", tp, []Ack{a}); !errors.Is(err, kerr.InvalidRequest) {
			t.Errorf("ack %v outside the in-flight window: %v, want INVALID_REQUEST", a, err)
		}
	}
}

// Accepted records stay accepted over a reopen; acquired ones become
// available with their delivery count kept.
func TestReopenKeepsAcks(t *testing.T) {
	log := newLog()
	c := open(t, log)
	acquire(t, c, "a")
	if err := c.Acknowledge(ctx, "g", "a", tp, []Ack{{0, 4, []int8{AckAccept}}}); err != nil {
		t.Fatal(err)
	}
	c2 := open(t, log.crash())
	got := acquire(t, c2, "b")
	if len(got) != 1 || got[0] != (Acquired{5, 9, 2}) {
		t.Fatalf("after reopen acquired %v, want [{5 9 2}]", got)
	}
}

// A corrupt state record is an error from Load, never a panic (nor a
// window so large that replaying it exhausts memory).
func TestLoadBadRecords(t *testing.T) {
	part := `{"type":"partition","group":"g","topic":"q"}`
	for _, r := range []Record{
		{Key: []byte(""), Value: []byte("{}")},
		{Key: []byte(`{"type":"nope","group":"g"}`), Value: []byte("{}")},
		{Key: []byte(`{"type":"group","group":"g"}`), Value: []byte("{")},
		{Key: []byte(part), Value: []byte(`{"spso":5,"speo":1}`)},
		{Key: []byte(part), Value: []byte(`{"spso":-1,"speo":1}`)},
		{Key: []byte(part), Value: []byte(`{"spso":0,"speo":2,"runs":[{"first":0,"last":9}]}`)},
		{Key: []byte(part), Value: []byte(`{"spso":0,"speo":9000000000000000000,"runs":[{"first":0,"last":8999999999999999999}]}`)},
		{Key: []byte(part), Value: []byte(`{"spso":0,"speo":2,"runs":[{"first":0,"last":1,"state":1}]}`)},
	} {
		if err := New(newLog(), time.Now, Limits{}).Load([]Record{r}); err == nil {
			t.Errorf("Load accepted %s = %s", r.Key, r.Value)
		}
	}
}

// Load replays the log in order: later records win, tombstones delete, and
// a deleted group comes back only with new records.
func TestLoadReplay(t *testing.T) {
	log := newLog()
	c := open(t, log)
	acquire(t, c, "a")
	if err := c.Acknowledge(ctx, "g", "a", tp, []Ack{{0, 9, []int8{AckAccept}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Heartbeat("g", "a", -1, nil, one); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Heartbeat("g", "b", -1, nil, one); err != nil {
		t.Fatal(err)
	}
	c2 := New(log, time.Now, Limits{})
	if err := c2.Load(log.crash().recs); err != nil {
		t.Fatal(err)
	}
	if offs, _ := c2.StartOffsets("g"); offs[tp] != 10 {
		t.Errorf("SPSO after replay %d, want 10", offs[tp])
	}
	if got := c2.Configs("g")[ConfigAutoOffsetReset]; got != "earliest" {
		t.Errorf("share.auto.offset.reset after replay %q, want earliest", got)
	}
	if err := c2.Delete(ctx, "g"); err != nil {
		t.Fatal(err)
	}
	c3 := New(log, time.Now, Limits{})
	if err := c3.Load(log.crash().recs); err != nil {
		t.Fatal(err)
	}
	if c3.Has("g") {
		t.Error("group g exists after its deletion was replayed")
	}
}

// An acknowledgement batch claiming offsets 0..MaxInt64 is answered at
// once (INVALID_RECORD_STATE for the never-acquired tail), not by walking
// the range; the records in flight it covers are acknowledged.
func TestAcknowledgeHugeRange(t *testing.T) {
	c := open(t, newLog())
	acquire(t, c, "a")
	err := c.Acknowledge(ctx, "g", "a", tp, []Ack{{0, 1<<63 - 1, []int8{AckAccept}}})
	if !errors.Is(err, kerr.InvalidRecordState) {
		t.Errorf("huge ack: %v, want INVALID_RECORD_STATE", err)
	}
	if got := acquire(t, c, "b"); len(got) != 0 {
		t.Errorf("after accepting 0..9, b acquired %v", got)
	}
}

// ShareGroupHeartbeat is validated as Kafka's GroupMetadataManager does:
// since KIP-1082 the client generates the member ID, so an empty or blank
// one is INVALID_REQUEST (the coordinator used to make one up); so are an
// epoch below -1 and a join with an empty subscription. A leave of a member
// the group does not hold is UNKNOWN_MEMBER_ID (it used to answer 0).
func TestHeartbeatValidation(t *testing.T) {
	c := open(t, newLog())
	for _, tc := range []struct {
		group, member string
		epoch         int32
		topics        []string
	}{
		{"g", "", 0, []string{"q"}},
		{"g", "  ", 0, []string{"q"}},
		{"g", "", -1, nil},
		{" ", "m", 0, []string{"q"}},
		{"g", "a", -2, nil},
		{"g", "c", 0, []string{}},
		{"g", "c", 0, nil},
	} {
		if a, err := c.Heartbeat(tc.group, tc.member, tc.epoch, tc.topics, one); !errors.Is(err, kerr.InvalidRequest) {
			t.Errorf("Heartbeat(%q, %q, %d, %v) = %+v, %v; want INVALID_REQUEST", tc.group, tc.member, tc.epoch, tc.topics, a, err)
		}
	}
	if _, err := c.Heartbeat("g", "stranger", -1, nil, one); !errors.Is(err, kerr.UnknownMemberID) {
		t.Errorf("leave of an unknown member: %v, want UNKNOWN_MEMBER_ID", err)
	}
	if a, err := c.Heartbeat("g", "a", -1, nil, one); err != nil || a.MemberEpoch != -1 || a.MemberID != "a" {
		t.Errorf("leave of member a: %+v, %v; want a at epoch -1", a, err)
	}
	if _, err := c.Heartbeat("g", "a", -1, nil, one); !errors.Is(err, kerr.UnknownMemberID) {
		t.Errorf("second leave of member a: %v, want UNKNOWN_MEMBER_ID", err)
	}
	info, _ := c.Describe("g", one)
	if len(info.Members) != 1 || info.Members[0].ID != "b" {
		t.Errorf("members after the refused heartbeats: %+v, want only b", info.Members)
	}
}

// Acknowledging offsets below the share-partition start offset (already
// acknowledged) is INVALID_RECORD_STATE, as Kafka answers for offsets it
// holds no in-flight batch for (it used to answer 0); a GAP there is no
// claim on a record and passes.
func TestAcknowledgeBelowStart(t *testing.T) {
	c := open(t, newLog())
	acquire(t, c, "a")
	if err := c.Acknowledge(ctx, "g", "a", tp, []Ack{{0, 4, []int8{AckAccept}}}); err != nil {
		t.Fatal(err)
	}
	for _, typ := range []int8{AckAccept, AckRelease, AckReject, AckRenew} {
		if err := c.Acknowledge(ctx, "g", "a", tp, []Ack{{0, 4, []int8{typ}}}); !errors.Is(err, kerr.InvalidRecordState) {
			t.Errorf("type %d on 0..4 below the SPSO: %v, want INVALID_RECORD_STATE", typ, err)
		}
	}
	// Per-offset types: only the part below the SPSO is looked at there.
	if err := c.Acknowledge(ctx, "g", "a", tp, []Ack{{3, 5, []int8{AckGap, AckAccept, AckAccept}}}); !errors.Is(err, kerr.InvalidRecordState) {
		t.Errorf("ACCEPT of 4 (below the SPSO) and 5: %v, want INVALID_RECORD_STATE", err)
	}
	if err := c.Acknowledge(ctx, "g", "a", tp, []Ack{{0, 3, []int8{AckGap}}, {6, 6, []int8{AckAccept}}}); err != nil {
		t.Errorf("GAP below the SPSO and ACCEPT of 6: %v, want nil", err)
	}
	// 5 was accepted by the refused batch above (its own offset was fine),
	// 6 just now; 7..9 are still a's.
	if err := c.Acknowledge(ctx, "g", "a", tp, []Ack{{7, 9, []int8{AckAccept}}}); err != nil {
		t.Errorf("ACCEPT of 7..9: %v", err)
	}
	if got := acquire(t, c, "b"); len(got) != 0 {
		t.Errorf("b acquired %v after everything was accepted", got)
	}
}

// Share-session epochs follow Kafka's SharePartitionManager: 0 opens (1 is
// next), each ShareFetch or ShareAcknowledge moves the epoch on, a stale or
// future epoch is INVALID_SHARE_SESSION_EPOCH and changes nothing, a
// non-zero epoch without a session is SHARE_SESSION_NOT_FOUND, a
// ShareAcknowledge cannot open one, and -1 closes the session releasing
// the member's records.
func TestSessionEpochs(t *testing.T) {
	c := open(t, newLog())
	if _, err := c.FetchSession("g", "a", 1, []TP{tp}, nil, false, nil); !errors.Is(err, kerr.ShareSessionNotFound) {
		t.Errorf("fetch at epoch 1 with no session: %v, want SHARE_SESSION_NOT_FOUND", err)
	}
	if err := c.AckSession("g", "a", 3); !errors.Is(err, kerr.ShareSessionNotFound) {
		t.Errorf("ack at epoch 3 with no session: %v, want SHARE_SESSION_NOT_FOUND", err)
	}
	if _, err := c.FetchSession("g", "a", SessionClose, nil, nil, false, nil); !errors.Is(err, kerr.ShareSessionNotFound) {
		t.Errorf("close with no session: %v, want SHARE_SESSION_NOT_FOUND", err)
	}
	if _, err := c.FetchSession("g", "a", SessionOpen, []TP{tp}, nil, true, nil); !errors.Is(err, kerr.InvalidRequest) {
		t.Errorf("opening fetch with acknowledgements: %v, want INVALID_REQUEST", err)
	}
	if _, err := c.FetchSession("g", "nobody", SessionOpen, []TP{tp}, nil, false, nil); !errors.Is(err, kerr.UnknownMemberID) {
		t.Errorf("fetch of a non-member: %v, want UNKNOWN_MEMBER_ID", err)
	}
	if got, err := c.FetchSession("g", "a", SessionOpen, []TP{tp}, nil, false, nil); err != nil || len(got) != 1 || got[0] != tp {
		t.Fatalf("open: %v, %v; want [%v]", got, err, tp)
	}
	if err := c.AckSession("g", "a", SessionOpen); !errors.Is(err, kerr.InvalidShareSessionEpoch) {
		t.Errorf("ack at epoch 0: %v, want INVALID_SHARE_SESSION_EPOCH", err)
	}
	if _, err := c.FetchSession("g", "a", 2, nil, nil, false, nil); !errors.Is(err, kerr.InvalidShareSessionEpoch) {
		t.Errorf("fetch at 2 when the session is at 1: %v, want INVALID_SHARE_SESSION_EPOCH", err)
	}
	tp1 := TP{"q", 1}
	if got, err := c.FetchSession("g", "a", 1, []TP{tp1}, nil, true, nil); err != nil || len(got) != 2 {
		t.Fatalf("fetch at 1 adding %v: %v, %v; want both partitions", tp1, got, err)
	}
	if err := c.AckSession("g", "a", 1); !errors.Is(err, kerr.InvalidShareSessionEpoch) {
		t.Errorf("replayed ack at 1: %v, want INVALID_SHARE_SESSION_EPOCH", err)
	}
	if err := c.AckSession("g", "a", 2); err != nil {
		t.Errorf("ack at 2: %v", err)
	}
	if got, err := c.FetchSession("g", "a", 3, nil, []TP{tp}, false, nil); err != nil || len(got) != 1 || got[0] != tp1 {
		t.Errorf("fetch at 3 forgetting %v: %v, %v; want [%v]", tp, got, err, tp1)
	}
	if nextSessionEpoch(1<<31-1) != 1 {
		t.Errorf("the epoch after MaxInt32 is %d, want 1", nextSessionEpoch(1<<31-1))
	}
	held := acquire(t, c, "a")
	if err := c.AckSession("g", "a", SessionClose); err != nil {
		t.Fatalf("ack at -1: %v", err)
	}
	if err := c.CloseSession(ctx, "g", "a"); err != nil {
		t.Fatal(err)
	}
	if got := acquire(t, c, "b"); len(held) != 1 || len(got) != 1 || got[0] != (Acquired{0, 9, 2}) {
		t.Errorf("a held %v before closing; b then acquired %v, want [{0 9 2}]", held, got)
	}
	if _, err := c.FetchSession("g", "a", 4, nil, nil, false, nil); !errors.Is(err, kerr.ShareSessionNotFound) {
		t.Errorf("fetch after the close: %v, want SHARE_SESSION_NOT_FOUND", err)
	}
}

// A delivery counts as soon as it is acquired, over restarts: with
// share.delivery.count.limit=2, a record acquired twice with a restart
// after each acquisition (no acknowledgement ever written) is archived and
// never delivered a third time.
func TestDeliveryLimitOverRestarts(t *testing.T) {
	log := newLog()
	c := open(t, log)
	two := "2"
	if err := c.SetConfig(ctx, "g", ConfigDeliveryLimit, &two, false); err != nil {
		t.Fatal(err)
	}
	for i, want := range []int16{1, 2} {
		got := acquire(t, c, "a")
		if len(got) != 1 || got[0] != (Acquired{0, 9, want}) {
			t.Fatalf("acquisition %d: %v, want [{0 9 %d}]", i+1, got, want)
		}
		log = log.crash() // only what was durable survives
		c = open(t, log)
	}
	if got := acquire(t, c, "a"); len(got) != 0 {
		t.Errorf("third acquisition after two deliveries at limit 2: %v, want none", got)
	}
	if offs, _ := c.StartOffsets("g"); offs[tp] != 10 {
		t.Errorf("SPSO %d, want 10 (all ten archived)", offs[tp])
	}
}

// Lag (KIP-1226) counts the records from the SPSO to the log end that are
// not acknowledged or archived: in flight and available ones, and those
// not fetched yet; gaps count as nothing.
func TestLag(t *testing.T) {
	c := open(t, newLog())
	if _, ok := c.Lag("g", tp, 10); ok {
		t.Error("lag of a partition never fetched: ok, want not initialised")
	}
	acquire(t, c, "a") // 0..9 acquired
	if err := c.Acknowledge(ctx, "g", "a", tp, []Ack{{0, 1, []int8{AckAccept}}, {4, 5, []int8{AckReject}}, {6, 6, []int8{AckRelease}}}); err != nil {
		t.Fatal(err)
	}
	// SPSO 2; 4 and 5 archived; 2, 3, 6..9 left, and 10..14 not fetched.
	if lag, ok := c.Lag("g", tp, 15); !ok || lag != 11 {
		t.Errorf("lag against end 15: %d, %v; want 11", lag, ok)
	}
	if lag, _ := c.Lag("g", tp, 10); lag != 6 {
		t.Errorf("lag against end 10: %d, want 6", lag)
	}
}

// KIP-1206: in batch_optimized mode max_records is a soft limit (the
// stored batch reaching it is acquired to its end, as Kafka's
// SharePartition does), in record_limit mode a hard one. The log holds
// batches [0,3], [4,7] and [8,9].
func TestAcquireWholeBatches(t *testing.T) {
	batches := []Span{{First: 0, Last: 3}, {First: 4, Last: 7}, {First: 8, Last: 9}}
	acquireMax := func(c *Coordinator, member string, max int, whole bool) []Acquired {
		t.Helper()
		from, _, ok := c.ReadFrom("g", tp, 0, 10, 10)
		if !ok {
			return nil
		}
		var spans []Span
		for _, s := range batches {
			if s.Last >= from {
				spans = append(spans, s)
			}
		}
		acq, err := c.Acquire(ctx, "g", member, tp, from, spans, 10, max, whole)
		if err != nil {
			t.Fatalf("Acquire: %v", err)
		}
		return acq
	}
	c := open(t, newLog())
	if got := acquireMax(c, "a", 2, false); len(got) != 1 || got[0] != (Acquired{0, 1, 1}) {
		t.Fatalf("record_limit, max 2: a acquired %v, want [{0 1 1}]", got)
	}
	// The rest of the first batch, then the second: max 5 is reached at
	// offset 6, so the second is acquired to its end and the third not.
	if got := acquireMax(c, "b", 5, true); len(got) != 1 || got[0] != (Acquired{2, 7, 1}) {
		t.Fatalf("batch_optimized, max 5: b acquired %v, want [{2 7 1}]", got)
	}
	if got := acquireMax(c, "a", 1, false); len(got) != 1 || got[0] != (Acquired{8, 8, 1}) {
		t.Fatalf("record_limit, max 1: a acquired %v, want [{8 8 1}]", got)
	}

	c = open(t, newLog())
	if got := acquireMax(c, "a", 1, true); len(got) != 1 || got[0] != (Acquired{0, 3, 1}) {
		t.Fatalf("batch_optimized, max 1: a acquired %v, want [{0 3 1}]", got)
	}
}

// group.share.partition.max.record.locks bounds the in-flight window
// [SPSO, SPEO): with 4, a fetch of up to 100 records in batch_optimized
// mode locks 0..3 and nothing more is acquired until the SPSO moves; a
// released record in the window may be acquired again; and a limit lowered
// below a window loaded from the log still caps the acquired records.
func TestMaxRecordLocks(t *testing.T) {
	log := newLog()
	c := openLimits(t, log, Limits{MaxRecordLocks: 4})
	held := func(c *Coordinator) int {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.groups["g"].parts[tp].acquired()
	}
	step := func(c *Coordinator, member string, want []Acquired, locks int) {
		t.Helper()
		got := acquire(t, c, member)
		if !slices.Equal(got, want) {
			t.Fatalf("%s acquired %v, want %v", member, got, want)
		}
		if h := held(c); h != locks {
			t.Fatalf("%d records acquired after %s's fetch, want %d", h, member, locks)
		}
	}
	step(c, "a", []Acquired{{0, 3, 1}}, 4)
	step(c, "b", nil, 4)
	if err := c.Acknowledge(ctx, "g", "a", tp, []Ack{{0, 1, []int8{AckAccept}}}); err != nil {
		t.Fatal(err)
	}
	step(c, "b", []Acquired{{4, 5, 1}}, 4)
	if err := c.Acknowledge(ctx, "g", "a", tp, []Ack{{2, 2, []int8{AckRelease}}}); err != nil {
		t.Fatal(err)
	}
	step(c, "b", []Acquired{{2, 2, 2}}, 4)
	step(c, "a", nil, 4)

	// Reloaded with a limit of 2: the window [2, 6) is wider, every lock
	// ended with the restart, and at most 2 are acquired again.
	c2 := openLimits(t, log.crash(), Limits{MaxRecordLocks: 2})
	step(c2, "a", []Acquired{{2, 2, 3}, {3, 3, 2}}, 2)
	step(c2, "a", nil, 2)
}

// spState is a share-partition's state as the log would restore it.
func spState(t *testing.T, c *Coordinator, tp TP) (int64, int64, map[int64]saved) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	sp := c.groups["g"].parts[tp]
	if sp == nil {
		t.Fatalf("no share-partition %v", tp)
	}
	return sp.start, sp.end, sp.persisted(c.groups["g"].limit())
}

// The state log is snapshots and updates (Kafka's ShareSnapshot and
// ShareUpdate records) and is pruned: after 3 updates a share-partition
// is snapshotted again, a prune round (every virtual second, ten rounds
// here) advances the
// log start past everything a newer durable snapshot replaces (a cold
// share-partition and the group's configs, untouched since the start, get
// rewritten so they do not pin it), so over 300 rounds of acquisitions
// and accept/release/reject acknowledgements the log holds a few dozen
// records, not thousands; and a replay from the log start restores
// exactly the same state (SPSO, SPEO, every offset's state and delivery
// count), after every round.
func TestStateLogSnapshotsAndPrunes(t *testing.T) {
	log := newLog()
	lim := Limits{SnapshotUpdateRecords: 3, PruneInterval: time.Second}
	clock := time.Unix(1e9, 0)
	now := func() time.Time { return clock }
	c := openLimits(t, log, lim)
	c.now, c.nextPrune = now, clock // onto the virtual clock
	cold := TP{Topic: "q", Partition: 1}
	const n = 5000
	fetch := func(tp TP, max int) []Acquired {
		t.Helper()
		from, _, ok := c.ReadFrom("g", tp, 0, n, n)
		if !ok {
			return nil
		}
		spans := []Span{{First: from, Last: min(from+int64(max), n) - 1}}
		acq, err := c.Acquire(ctx, "g", "a", tp, from, spans, n, max, false)
		if err != nil {
			t.Fatal(err)
		}
		return acq
	}
	fetch(cold, 2)
	if err := c.Acknowledge(ctx, "g", "a", cold, []Ack{{1, 1, []int8{AckAccept}}, {0, 0, []int8{AckRelease}}}); err != nil {
		t.Fatal(err)
	}
	maxLen := 0
	for round := 0; round < 300; round++ {
		clock = clock.Add(100 * time.Millisecond)
		for _, q := range fetch(tp, 7) {
			types := make([]int8, q.Last-q.First+1)
			for i := range types {
				// Mostly accepted; some released (redelivered, then
				// archived at the limit) and some rejected.
				types[i] = []int8{AckAccept, AckAccept, AckRelease, AckAccept, AckReject}[(int(q.First)+i+round)%5]
			}
			if err := c.Acknowledge(ctx, "g", "a", tp, []Ack{{q.First, q.Last, types}}); err != nil {
				t.Fatalf("round %d: ack %v: %v", round, q, err)
			}
		}
		maxLen = max(maxLen, len(log.recs))
		if round%10 != 9 {
			continue
		}
		c2 := New(log, now, lim)
		if err := c2.Load(log.crash().recs); err != nil {
			t.Fatalf("round %d: replay: %v", round, err)
		}
		for _, x := range []TP{tp, cold} {
			s1, e1, m1 := spState(t, c, x)
			s2, e2, m2 := spState(t, c2, x)
			if s1 != s2 || e1 != e2 || !maps.Equal(m1, m2) {
				t.Fatalf("round %d: %v replayed as [%d, %d) %v, want [%d, %d) %v", round, x, s2, e2, m2, s1, e1, m1)
			}
		}
		if got := c2.Configs("g")[ConfigAutoOffsetReset]; got != "earliest" {
			t.Fatalf("round %d: share.auto.offset.reset replayed as %q", round, got)
		}
	}
	start, _, _ := spState(t, c, tp)
	if start < 1000 {
		t.Fatalf("SPSO %d after 300 rounds, want the rounds to have moved it past 1000", start)
	}
	if maxLen > 40 || log.start < log.next-40 {
		t.Errorf("state log held up to %d records, log start %d of %d; want a few dozen at most", maxLen, log.start, log.next)
	}
	updates := 0
	for _, r := range log.recs {
		if strings.Contains(string(r.Key), `"type":"update"`) {
			updates++
		}
	}
	if updates == 0 {
		t.Errorf("no update record among the %d held: every change was a snapshot", len(log.recs))
	}
	t.Logf("%d records appended, log start %d, at most %d held (%d updates now)", log.next, log.start, maxLen, updates)
}

// A share session belongs to the connection that opened it (Kafka 4.1's
// ShareSessionCache): a request from another connection continues it at
// its next epoch; when the opening connection closes, the session ends
// and the member's acquired records are available at once (delivery count
// kept, no lock expiry waited for); group.share.max.share.sessions refuses
// a session beyond it with SHARE_SESSION_LIMIT_REACHED, and a session that
// ended (connection closed, member left) frees its slot.
func TestSessionOwnedByConnection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := openLimits(t, newLog(), Limits{MaxShareSessions: 1})
		conn1 := make(chan struct{})
		if _, err := c.FetchSession("g", "a", SessionOpen, []TP{tp}, nil, false, conn1); err != nil {
			t.Fatal(err)
		}
		if got := acquire(t, c, "a"); !slices.Equal(got, []Acquired{{0, 9, 1}}) {
			t.Fatalf("a acquired %v, want [{0 9 1}]", got)
		}
		if _, err := c.FetchSession("g", "b", SessionOpen, []TP{tp}, nil, false, nil); !errors.Is(err, kerr.ShareSessionLimitReached) {
			t.Fatalf("b's session beyond the limit: %v, want SHARE_SESSION_LIMIT_REACHED", err)
		}
		conn2 := make(chan struct{})
		if _, err := c.FetchSession("g", "a", 1, nil, nil, false, conn2); err != nil {
			t.Fatalf("a's next epoch from a second connection: %v", err)
		}
		close(conn2) // not the opening connection: the session stays
		synctest.Wait()
		if _, err := c.FetchSession("g", "a", 2, nil, nil, false, nil); err != nil {
			t.Fatalf("a's epoch 2 after the second connection closed: %v", err)
		}
		close(conn1)
		synctest.Wait()
		if _, err := c.FetchSession("g", "a", 3, nil, nil, false, nil); !errors.Is(err, kerr.ShareSessionNotFound) {
			t.Fatalf("a's epoch 3 after its opening connection closed: %v, want SHARE_SESSION_NOT_FOUND", err)
		}
		if got := acquire(t, c, "b"); !slices.Equal(got, []Acquired{{0, 9, 2}}) {
			t.Fatalf("b acquired %v right after a's connection closed, want [{0 9 2}]", got)
		}
		if _, err := c.FetchSession("g", "b", SessionOpen, []TP{tp}, nil, false, nil); err != nil {
			t.Fatalf("b's session after a's ended: %v", err)
		}
		if _, err := c.Heartbeat("g", "b", -1, nil, one); err != nil {
			t.Fatal(err)
		}
		if _, err := c.FetchSession("g", "a", SessionOpen, []TP{tp}, nil, false, nil); err != nil {
			t.Fatalf("a's new session after b left: %v", err)
		}
	})
}
