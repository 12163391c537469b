package group

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestJoinMemberIDRequiredRoundTrip(t *testing.T) {
	t.Parallel()
	c, _ := newTestCoordinator(t, testConfig())
	ctx := context.Background()
	cl := newClient(c, "g", "cli")

	first := cl.joinOnce(ctx)
	wantCode(t, "first join", first.ErrorCode, kerr.MemberIDRequired)
	if !strings.HasPrefix(first.MemberID, "cli-") || len(first.MemberID) != len("cli-")+36 {
		t.Fatalf("generated member ID %q, want cli-<uuid>", first.MemberID)
	}
	if first.Generation != -1 {
		t.Fatalf("generation %d with MEMBER_ID_REQUIRED, want -1", first.Generation)
	}

	second := cl.joinOnce(ctx)
	wantCode(t, "second join", second.ErrorCode, nil)
	if second.MemberID != first.MemberID || second.LeaderID != first.MemberID || second.Generation != 1 {
		t.Fatalf("got member %q leader %q generation %d; want %q as leader of generation 1",
			second.MemberID, second.LeaderID, second.Generation, first.MemberID)
	}
	if *second.ProtocolType != "consumer" || *second.Protocol != "range" {
		t.Fatalf("protocol %q/%q, want consumer/range", *second.ProtocolType, *second.Protocol)
	}
	if len(second.Members) != 1 || !bytes.Equal(second.Members[0].ProtocolMetadata, consumerMeta("t1")) {
		t.Fatalf("leader's members %+v, want itself with its metadata", second.Members)
	}
}

func TestJoinV3NeedsNoMemberIDRoundTrip(t *testing.T) {
	t.Parallel()
	c, _ := newTestCoordinator(t, testConfig())
	cl := newClient(c, "g", "old")
	cl.version = 3
	resp := cl.joinOnce(context.Background())
	wantCode(t, "v3 join", resp.ErrorCode, nil)
	if resp.Generation != 1 || resp.MemberID == "" {
		t.Fatalf("v3 join: generation %d member %q", resp.Generation, resp.MemberID)
	}
}

func TestJoinConcurrentMembersLeaderGetsMetadataAndSyncDistributes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig()
		cfg.InitialRebalanceDelay = 3 * time.Second
		c, _ := newTestCoordinator(t, cfg)
		ctx := context.Background()
		var cls []*client
		for i := range 5 {
			cl := newClient(c, "g", "cli")
			cl.protocols = []kmsg.JoinGroupRequestProtocol{
				{Name: "cooperative-sticky", Metadata: consumerMeta("t1", string(rune('a'+i)))},
				{Name: "range", Metadata: []byte{byte(i)}},
			}
			cls = append(cls, cl)
		}
		start := time.Now()
		joins := make([]*kmsg.JoinGroupResponse, len(cls))
		var wg sync.WaitGroup
		for i, cl := range cls {
			wg.Go(func() { joins[i] = cl.join(ctx) })
		}
		wg.Wait()
		// Members that arrive during the initial delay extend it once more (Kafka's debounce).
		if waited := time.Since(start); waited != 6*time.Second {
			t.Fatalf("join phase took %v, want twice the initial delay of 3s", waited)
		}
		leader := ""
		for i, j := range joins {
			wantCode(t, "join", j.ErrorCode, nil)
			if j.Generation != 1 || *j.Protocol != "cooperative-sticky" {
				t.Fatalf("member %d: generation %d protocol %q", i, j.Generation, *j.Protocol)
			}
			if leader == "" {
				leader = j.LeaderID
			} else if j.LeaderID != leader {
				t.Fatalf("members disagree on the leader: %q vs %q", j.LeaderID, leader)
			}
		}
		var leaderResp *kmsg.JoinGroupResponse
		for i, j := range joins {
			if j.MemberID == leader {
				leaderResp = j
			} else if len(j.Members) != 0 {
				t.Fatalf("follower %d got %d members, want none", i, len(j.Members))
			}
		}
		if len(leaderResp.Members) != 5 {
			t.Fatalf("leader got %d members, want 5", len(leaderResp.Members))
		}
		metaOf := make(map[string][]byte)
		for _, m := range leaderResp.Members {
			metaOf[m.MemberID] = m.ProtocolMetadata
		}
		for i, cl := range cls {
			if !bytes.Equal(metaOf[cl.id], cl.protocols[0].Metadata) {
				t.Fatalf("leader sees member %d (%q) with metadata %x, want its cooperative-sticky metadata", i, cl.id, metaOf[cl.id])
			}
		}

		// Followers sync first and park until the leader's assignment arrives.
		assign := assignEach(leaderResp)
		syncs := make([]*kmsg.SyncGroupResponse, len(cls))
		for i, cl := range cls {
			if cl.id != leader {
				wg.Go(func() { syncs[i] = cl.sync(ctx, nil) })
			}
		}
		synctest.Wait()
		for i, s := range syncs {
			if s != nil {
				t.Fatalf("follower %d's SyncGroup returned before the leader's", i)
			}
		}
		for i, cl := range cls {
			if cl.id == leader {
				syncs[i] = cl.sync(ctx, assign)
			}
		}
		wg.Wait()
		for i, s := range syncs {
			wantCode(t, "sync", s.ErrorCode, nil)
			if string(s.MemberAssignment) != "assigned:"+cls[i].id || *s.Protocol != "cooperative-sticky" {
				t.Fatalf("member %d got assignment %q protocol %q", i, s.MemberAssignment, *s.Protocol)
			}
		}
		d := describe(c, 5, "g")
		if d.State != "Stable" || d.Protocol != "cooperative-sticky" || len(d.Members) != 5 {
			t.Fatalf("described %s/%s with %d members", d.State, d.Protocol, len(d.Members))
		}
		if d.Members[0].ClientID != "cli" || d.Members[0].ClientHost != "127.0.0.1" {
			t.Fatalf("client %q host %q", d.Members[0].ClientID, d.Members[0].ClientHost)
		}
	})
}

func TestJoinBadInput(t *testing.T) {
	t.Parallel()
	c, _ := newTestCoordinator(t, testConfig())
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		edit func(*kmsg.JoinGroupRequest)
		want *kerr.Error
	}{
		{"empty protocols", func(r *kmsg.JoinGroupRequest) { r.Protocols = nil }, kerr.InconsistentGroupProtocol},
		{"empty protocol type", func(r *kmsg.JoinGroupRequest) { r.ProtocolType = "" }, kerr.InconsistentGroupProtocol},
		{"empty group", func(r *kmsg.JoinGroupRequest) { r.Group = "" }, kerr.InvalidGroupID},
		{"session too short", func(r *kmsg.JoinGroupRequest) { r.SessionTimeoutMillis = 0 }, kerr.InvalidSessionTimeout},
		{"session too long", func(r *kmsg.JoinGroupRequest) { r.SessionTimeoutMillis = 2 * 3600 * 1000 }, kerr.InvalidSessionTimeout},
		{"unknown member of unknown group", func(r *kmsg.JoinGroupRequest) { r.MemberID = "ghost" }, kerr.UnknownMemberID},
	} {
		r := newClient(c, "bad", "cli").joinRequest()
		tc.edit(r)
		resp := c.JoinGroup(ctx, Client{}, r)
		wantCode(t, tc.name, resp.ErrorCode, tc.want)
		if resp.Generation != -1 || resp.Protocol != nil || resp.ProtocolType != nil {
			t.Fatalf("%s: generation %d protocol %v/%v on error", tc.name, resp.Generation, resp.Protocol, resp.ProtocolType)
		}
	}
	if gs := listGroups(c); len(gs) != 0 {
		t.Fatalf("failed joins left groups behind: %v", gs)
	}
}

func TestJoinIncompatibleProtocols(t *testing.T) {
	t.Parallel()
	c, _ := newTestCoordinator(t, testConfig())
	ctx := context.Background()
	a := newClient(c, "g", "a")
	wantCode(t, "a joins", a.join(ctx).ErrorCode, nil)

	b := newClient(c, "g", "b")
	b.protocols = []kmsg.JoinGroupRequestProtocol{{Name: "roundrobin"}}
	wantCode(t, "disjoint protocols", b.join(ctx).ErrorCode, kerr.InconsistentGroupProtocol)

	r := newClient(c, "g", "c").joinRequest()
	r.ProtocolType = "connect"
	wantCode(t, "other protocol type", c.JoinGroup(ctx, Client{}, r).ErrorCode, kerr.InconsistentGroupProtocol)
}

func TestSelectProtocolVotes(t *testing.T) {
	t.Parallel()
	g := newGroup("g", time.Time{})
	for i, prefs := range [][]string{
		{"range", "roundrobin", "sticky"},
		{"sticky", "roundrobin"},
		{"sticky", "range", "roundrobin"},
		{"sticky", "roundrobin", "range"},
	} {
		m := &member{id: string(rune('a' + i))}
		for _, p := range prefs {
			m.protocols = append(m.protocols, kmsg.JoinGroupRequestProtocol{Name: p})
		}
		g.add(m)
	}
	// range is not supported by the second member; of the rest, sticky has three votes.
	if got := g.selectProtocol(); got != "sticky" {
		t.Fatalf("selected %q, want sticky", got)
	}
}
