package broker_test

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/kawatest"
	"github.com/kawa-broker/kawa/internal/kawatest/rawreq"
)

const (
	stormConns     = 1000
	stormPerConn   = 20
	stormClientID  = "storm"
	stormReadLimit = 30 * time.Second // a bound for a hung broker, not a speed limit: 1,000 connections on 2 loaded cores
)

// heartbeatFrame is a size-prefixed Heartbeat v4 request (flexible: request
// header v2 with an empty tag section).
func heartbeatFrame(corr int32, group, member string, generation int32) []byte {
	req := kmsg.NewPtrHeartbeatRequest()
	req.Version = 4
	req.Group, req.MemberID, req.Generation = group, member, generation
	id := stormClientID
	return rawreq.Frame(req, corr, &id)
}

// readHeartbeat reads one Heartbeat v4 response and returns its error code.
func readHeartbeat(c net.Conn, corr int32) (int16, error) {
	_ = c.SetReadDeadline(time.Now().Add(stormReadLimit))
	resp := kmsg.NewPtrHeartbeatResponse()
	resp.Version = 4
	if err := rawreq.ReadResponse(c, corr, resp); err != nil {
		return 0, err
	}
	return resp.ErrorCode, nil
}

// stormKind is what one storm connection sends, and the answer it expects.
type stormKind struct {
	name       string
	group      func(j rawMember) string
	member     func(j rawMember) string
	generation func(j rawMember) int32
	want       int16
}

var stormKinds = []stormKind{
	{"valid", func(j rawMember) string { return j.group }, func(j rawMember) string { return j.member }, func(j rawMember) int32 { return j.generation }, 0},
	{"unknown member", func(j rawMember) string { return j.group }, func(rawMember) string { return "ghost" }, func(j rawMember) int32 { return j.generation }, kerr.UnknownMemberID.Code},
	{"stale generation", func(j rawMember) string { return j.group }, func(j rawMember) string { return j.member }, func(j rawMember) int32 { return j.generation - 1 }, kerr.IllegalGeneration.Code},
	{"unknown group", func(rawMember) string { return "nobody" }, func(rawMember) string { return "ghost" }, func(rawMember) int32 { return 1 }, kerr.UnknownMemberID.Code},
}

// TestGroupHeartbeatStorm (issue 4 acceptance): 1,000 connections send
// 20,000 heartbeats (valid, unknown member, stale generation, unknown
// group) while an ordinary client commits and fetches offsets. Every
// heartbeat gets its exact code, the commit and fetch complete during the
// storm, and the real member is still Stable afterwards.
func TestGroupHeartbeatStorm(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	k.CreateTopic("t", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conns := make([]net.Conn, stormConns)
	for i := range conns {
		c, err := net.Dial("tcp", k.Addr)
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		conns[i] = c
		t.Cleanup(func() { c.Close() })
	}
	// Joined after the dials (which can take seconds on a loaded machine):
	// the member's session (groupSession) is kept alive only by the storm's
	// valid heartbeats, which must start before it runs out.
	j := joinAlone(t, ctx, k.Client(), "g")
	var finished atomic.Int64
	got := make([]map[int16]int, len(stormKinds))
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, c := range conns {
		kind := i % len(stormKinds)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer finished.Add(1)
			<-start
			codes := stormConn(c, j, stormKinds[kind])
			mu.Lock()
			if got[kind] == nil {
				got[kind] = map[int16]int{}
			}
			for code, n := range codes {
				got[kind][code] += n
			}
			mu.Unlock()
		}()
	}
	close(start)
	before := finished.Load()
	probeTook := probeCommitFetch(t, ctx, k.Admin())
	during := finished.Load() < stormConns
	wg.Wait()

	if !during {
		t.Errorf("the storm (%d connections) ended before the commit/fetch probe finished; it proves nothing", stormConns)
	}
	for i, kd := range stormKinds {
		want := map[int16]int{kd.want: stormConns / len(stormKinds) * stormPerConn}
		if len(got[i]) != 1 || got[i][kd.want] != want[kd.want] {
			t.Errorf("%s heartbeats: codes %v, want %v", kd.name, got[i], want)
		}
	}
	if g := describeGroup(t, k.Admin(), "g"); g.State != "Stable" || len(g.Members) != 1 || g.Members[0].MemberID != j.member {
		t.Errorf("after the storm: state %q, %d members; want Stable with %s", g.State, len(g.Members), j.member)
	}
	t.Logf("commit+fetch during the storm took %v (%d connections done before it started)", probeTook, before)
}

// stormConn sends stormPerConn heartbeats of one kind, one at a time, and
// counts the codes; a transport error counts as code -1.
func stormConn(c net.Conn, j rawMember, kd stormKind) map[int16]int {
	codes := map[int16]int{}
	for n := int32(1); n <= stormPerConn; n++ {
		if _, err := c.Write(heartbeatFrame(n, kd.group(j), kd.member(j), kd.generation(j))); err != nil {
			codes[-1]++
			continue
		}
		code, err := readHeartbeat(c, n)
		if err != nil {
			code = -1
		}
		codes[code]++
	}
	return codes
}

// probeCommitFetch commits an offset for a fresh group and reads it back,
// returning how long both took.
func probeCommitFetch(t *testing.T, ctx context.Context, adm *kadm.Client) time.Duration {
	t.Helper()
	began := time.Now()
	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: "t", Partition: 0, At: 42, LeaderEpoch: -1})
	if err := adm.CommitAllOffsets(ctx, "probe", os); err != nil {
		t.Fatalf("commit during the storm: %v", err)
	}
	fetched, err := adm.FetchOffsets(ctx, "probe")
	if err == nil {
		err = fetched.Error()
	}
	if err != nil {
		t.Fatalf("fetch during the storm: %v", err)
	}
	if o, ok := fetched.Lookup("t", 0); !ok || o.At != 42 {
		t.Fatalf("fetched %+v during the storm, want 42", o)
	}
	return time.Since(began)
}
