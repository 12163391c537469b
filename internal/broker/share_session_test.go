package broker_test

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/config"
	"github.com/kawa-broker/kawa/internal/kawatest"
	"github.com/kawa-broker/kawa/internal/kawatest/rawreq"
	"github.com/kawa-broker/kawa/internal/proxy"
)

// shareJoin joins member to group on topic with a ShareGroupHeartbeat and
// returns the topic's ID from the assignment.
func shareJoin(t *testing.T, k *kawatest.Broker, group, member, topic string) [16]byte {
	t.Helper()
	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.GroupID, hb.MemberID, hb.SubscribedTopicNames = group, member, []string{topic}
	r, err := hb.RequestWith(context.Background(), k.Client())
	if err != nil || r.ErrorCode != 0 || r.Assignment == nil || len(r.Assignment.TopicPartitions) != 1 {
		t.Fatalf("join: %v %+v", err, r)
	}
	return r.Assignment.TopicPartitions[0].TopicID
}

// shareFetch sends one ShareFetch of partition 0 at session epoch epoch,
// piggybacking acks (nil: none), and returns the answer.
func shareFetch(t *testing.T, k *kawatest.Broker, group, member string, id [16]byte, epoch int32, acks []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch) *kmsg.ShareFetchResponse {
	t.Helper()
	sf := kmsg.NewPtrShareFetchRequest()
	sf.GroupID, sf.MemberID, sf.ShareSessionEpoch = kmsg.StringPtr(group), kmsg.StringPtr(member), epoch
	sf.MaxWaitMillis, sf.MaxBytes, sf.MaxRecords = 0, 1<<20, 500
	sf.Topics = []kmsg.ShareFetchRequestTopic{{TopicID: id, Partitions: []kmsg.ShareFetchRequestTopicPartition{{Partition: 0, AcknowledgementBatches: acks}}}}
	r, err := sf.RequestWith(context.Background(), k.Client())
	if err != nil {
		t.Fatalf("share fetch: %v", err)
	}
	return r
}

func shareAck(t *testing.T, k *kawatest.Broker, group, member string, id [16]byte, epoch int32, first, last int64, typ int8) *kmsg.ShareAcknowledgeResponse {
	t.Helper()
	sa := kmsg.NewPtrShareAcknowledgeRequest()
	sa.GroupID, sa.MemberID, sa.ShareSessionEpoch = kmsg.StringPtr(group), kmsg.StringPtr(member), epoch
	sa.Topics = []kmsg.ShareAcknowledgeRequestTopic{{TopicID: id, Partitions: []kmsg.ShareAcknowledgeRequestTopicPartition{{
		Partition:              0,
		AcknowledgementBatches: []kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{{FirstOffset: first, LastOffset: last, AcknowledgeTypes: []int8{typ}}},
	}}}}
	r, err := sa.RequestWith(context.Background(), k.Client())
	if err != nil {
		t.Fatalf("share acknowledge: %v", err)
	}
	return r
}

func acquiredOf(r *kmsg.ShareFetchResponse) []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord {
	var out []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			out = append(out, p.AcquiredRecords...)
		}
	}
	return out
}

func wantCode(t *testing.T, what string, got int16, want *kerr.Error) {
	t.Helper()
	var w int16
	if want != nil {
		w = want.Code
	}
	if got != w {
		t.Errorf("%s: error %v, want %v", what, kerr.ErrorForCode(got), want)
	}
}

// Share-session epochs over the wire (KIP-932, Kafka's
// SharePartitionManager): the session opens at 0 and expects 1, 2, ...
// across ShareFetch and ShareAcknowledge; a replayed epoch is
// INVALID_SHARE_SESSION_EPOCH and its acknowledgements are not applied;
// epoch 0 with acknowledgements is INVALID_REQUEST; without a session a
// non-zero epoch is SHARE_SESSION_NOT_FOUND; -1 closes the session and
// releases the member's records. They used to be accepted at any epoch.
func TestShareSessionEpochsOnTheWire(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	shareSetup(t, k, "q", "g", 10)
	id := shareJoin(t, k, "g", "member-a", "q")
	accept := []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{{FirstOffset: 0, LastOffset: 4, AcknowledgeTypes: []int8{1}}}

	wantCode(t, "fetch at epoch 1 before any session", shareFetch(t, k, "g", "member-a", id, 1, nil).ErrorCode, kerr.ShareSessionNotFound)
	wantCode(t, "ack at epoch 1 before any session", shareAck(t, k, "g", "member-a", id, 1, 0, 0, 1).ErrorCode, kerr.ShareSessionNotFound)
	wantCode(t, "opening fetch with acks", shareFetch(t, k, "g", "member-a", id, 0, accept).ErrorCode, kerr.InvalidRequest)

	r := shareFetch(t, k, "g", "member-a", id, 0, nil)
	wantCode(t, "opening fetch", r.ErrorCode, nil)
	if acq := acquiredOf(r); len(acq) != 1 || acq[0].FirstOffset != 0 || acq[0].LastOffset != 9 {
		t.Fatalf("opening fetch acquired %+v, want 0..9", acq)
	}
	wantCode(t, "ack at epoch 0", shareAck(t, k, "g", "member-a", id, 0, 0, 4, 1).ErrorCode, kerr.InvalidShareSessionEpoch)
	wantCode(t, "fetch at epoch 2 (session at 1)", shareFetch(t, k, "g", "member-a", id, 2, accept).ErrorCode, kerr.InvalidShareSessionEpoch)

	// Epoch 1 accepts 0..4; the refused epoch-2 fetch above must not have.
	r = shareFetch(t, k, "g", "member-a", id, 1, accept)
	wantCode(t, "fetch at epoch 1", r.ErrorCode, nil)
	if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		t.Fatalf("fetch at epoch 1 answered %+v, want partition 0", r.Topics)
	}
	wantCode(t, "acks of the fetch at epoch 1", r.Topics[0].Partitions[0].AcknowledgeErrorCode, nil)
	wantCode(t, "replayed ack at epoch 1", shareAck(t, k, "g", "member-a", id, 1, 5, 5, 1).ErrorCode, kerr.InvalidShareSessionEpoch)
	a := shareAck(t, k, "g", "member-a", id, 2, 5, 6, 1)
	wantCode(t, "ack at epoch 2", a.ErrorCode, nil)
	if len(a.Topics) != 1 || len(a.Topics[0].Partitions) != 1 {
		t.Fatalf("ack at epoch 2 answered %+v", a.Topics)
	}
	wantCode(t, "ack of 5..6 at epoch 2", a.Topics[0].Partitions[0].ErrorCode, nil)
	// 0..4 are now below the share-partition start offset.
	a = shareAck(t, k, "g", "member-a", id, 3, 0, 4, 1)
	wantCode(t, "ack at epoch 3", a.ErrorCode, nil)
	wantCode(t, "second ACCEPT of 0..4 (below the SPSO)", a.Topics[0].Partitions[0].ErrorCode, kerr.InvalidRecordState)

	// Closing releases 7..9 at once: member b gets them with count 2.
	wantCode(t, "close", shareAck(t, k, "g", "member-a", id, -1, 7, 7, 2).ErrorCode, nil)
	wantCode(t, "fetch at epoch 4 after the close", shareFetch(t, k, "g", "member-a", id, 4, nil).ErrorCode, kerr.ShareSessionNotFound)
	shareJoin(t, k, "g", "member-b", "q")
	r = shareFetch(t, k, "g", "member-b", id, 0, nil)
	if acq := acquiredOf(r); len(acq) != 1 || acq[0].FirstOffset != 7 || acq[0].LastOffset != 9 || acq[0].DeliveryCount != 2 {
		t.Errorf("b acquired %+v after a's close, want 7..9 with delivery count 2", acq)
	}
}

// ShareGroupHeartbeat v1 refuses an empty member ID (KIP-1082: the client
// generates it; the broker used to make one up) and answers a leave of an
// unknown member UNKNOWN_MEMBER_ID (it used to answer 0) and of an unknown
// group GROUP_ID_NOT_FOUND, as Kafka does.
func TestShareGroupHeartbeatMemberIDs(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	k.CreateTopic("q", 1, nil)
	hb := func(group, member string, epoch int32, topics []string) *kmsg.ShareGroupHeartbeatResponse {
		req := kmsg.NewPtrShareGroupHeartbeatRequest()
		req.GroupID, req.MemberID, req.MemberEpoch, req.SubscribedTopicNames = group, member, epoch, topics
		r, err := req.RequestWith(context.Background(), k.Client())
		if err != nil {
			t.Fatalf("heartbeat: %v", err)
		}
		return r
	}
	if r := hb("g", "", 0, []string{"q"}); r.ErrorCode != kerr.InvalidRequest.Code || r.MemberID != nil && *r.MemberID != "" {
		t.Errorf("join with an empty member ID: %v member %v, want INVALID_REQUEST and no member", kerr.ErrorForCode(r.ErrorCode), r.MemberID)
	}
	wantCode(t, "join with a blank member ID", hb("g", "   ", 0, []string{"q"}).ErrorCode, kerr.InvalidRequest)
	wantCode(t, "join with an empty subscription", hb("g", "m1", 0, []string{}).ErrorCode, kerr.InvalidRequest)
	wantCode(t, "member epoch -2", hb("g", "m1", -2, nil).ErrorCode, kerr.InvalidRequest)
	wantCode(t, "leave of a group that does not exist", hb("g", "m1", -1, nil).ErrorCode, kerr.GroupIDNotFound)
	r := hb("g", "m1", 0, []string{"q"})
	if r.ErrorCode != 0 || r.MemberID == nil || *r.MemberID != "m1" || r.MemberEpoch < 1 {
		t.Fatalf("join of m1: %v member %v epoch %d", kerr.ErrorForCode(r.ErrorCode), r.MemberID, r.MemberEpoch)
	}
	wantCode(t, "leave of an unknown member", hb("g", "m2", -1, nil).ErrorCode, kerr.UnknownMemberID)
	wantCode(t, "heartbeat of an unknown member", hb("g", "m2", 1, nil).ErrorCode, kerr.UnknownMemberID)
	if r := hb("g", "m1", -1, nil); r.ErrorCode != 0 || r.MemberEpoch != -1 {
		t.Errorf("leave of m1: %v epoch %d, want 0 and -1", kerr.ErrorForCode(r.ErrorCode), r.MemberEpoch)
	}
	wantCode(t, "second leave of m1", hb("g", "m1", -1, nil).ErrorCode, kerr.UnknownMemberID)
}

// KIP-1206 acquire modes over the wire, on a log of one stored batch of
// 100 records: batch_optimized (0, the default and v1's behaviour)
// acquires the batch reaching max_records to its end, as Kafka does, so
// the batch goes out once and not once per max_records; record_limit (1)
// acquires exactly max_records.
func TestShareFetchAcquireModes(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	k.CreateTopic("q", 1, nil)
	p := k.Client(kgo.DefaultProduceTopic("q"), kgo.ManualFlushing())
	for i := range 100 {
		p.Produce(context.Background(), kgo.StringRecord(strconv.Itoa(i)), nil)
	}
	if err := p.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		mode int8
		want kmsg.ShareFetchResponseTopicPartitionAcquiredRecord
	}{
		{0, kmsg.ShareFetchResponseTopicPartitionAcquiredRecord{FirstOffset: 0, LastOffset: 99, DeliveryCount: 1}},
		{1, kmsg.ShareFetchResponseTopicPartitionAcquiredRecord{FirstOffset: 0, LastOffset: 2, DeliveryCount: 1}},
	} {
		group := "g" + strconv.Itoa(int(c.mode))
		setShareConfigs(t, k, group, "share.auto.offset.reset", "earliest")
		id := shareJoin(t, k, group, "member-0000000000000", "q")
		sf := kmsg.NewPtrShareFetchRequest()
		sf.GroupID, sf.MemberID = kmsg.StringPtr(group), kmsg.StringPtr("member-0000000000000")
		sf.MaxWaitMillis, sf.MaxBytes, sf.MaxRecords, sf.BatchSize, sf.ShareAcquireMode = 0, 1<<20, 3, 3, c.mode
		sf.Topics = []kmsg.ShareFetchRequestTopic{{TopicID: id, Partitions: []kmsg.ShareFetchRequestTopicPartition{{Partition: 0}}}}
		r, err := sf.RequestWith(context.Background(), k.Client())
		if err != nil || r.ErrorCode != 0 {
			t.Fatalf("mode %d: share fetch: %v %v", c.mode, err, kerr.ErrorForCode(r.ErrorCode))
		}
		if got := acquiredOf(r); len(got) != 1 || got[0].FirstOffset != c.want.FirstOffset || got[0].LastOffset != c.want.LastOffset || got[0].DeliveryCount != c.want.DeliveryCount {
			t.Errorf("mode %d, max_records 3: acquired %+v, want [%d, %d] delivery count 1", c.mode, got, c.want.FirstOffset, c.want.LastOffset)
		}
	}
}

// shareMembersAB starts a broker with opt, a topic q of n records, and
// members a and b of share group g; it returns q's topic ID.
func shareMembersAB(t *testing.T, n int, opt kawatest.Option) (*kawatest.Broker, [16]byte) {
	t.Helper()
	k := kawatest.NewBroker(t, opt)
	shareSetup(t, k, "q", "g", n)
	id := shareJoin(t, k, "g", "a", "q")
	shareJoin(t, k, "g", "b", "q")
	return k, id
}

// group.share.partition.max.record.locks over the wire: with 10, a
// ShareFetch asking for 500 records of a 100-record stored batch acquires
// 0..9 only (batch_optimized does not take the batch past the window), a
// second member gets nothing while the window is full, and a's next fetch,
// accepting 0..9, acquires 10..19.
func TestShareMaxRecordLocks(t *testing.T) {
	t.Parallel()
	k, id := shareMembersAB(t, 100, func(c *config.Broker) { c.ShareMaxRecordLocks = 10 })
	if acq := acquiredOf(shareFetch(t, k, "g", "a", id, 0, nil)); len(acq) != 1 || acq[0].FirstOffset != 0 || acq[0].LastOffset != 9 {
		t.Fatalf("a acquired %+v, want 0..9", acq)
	}
	if acq := acquiredOf(shareFetch(t, k, "g", "b", id, 0, nil)); len(acq) != 0 {
		t.Fatalf("b acquired %+v with the window full, want nothing", acq)
	}
	accept := []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{{FirstOffset: 0, LastOffset: 9, AcknowledgeTypes: []int8{1}}}
	if acq := acquiredOf(shareFetch(t, k, "g", "a", id, 1, accept)); len(acq) != 1 || acq[0].FirstOffset != 10 || acq[0].LastOffset != 19 {
		t.Fatalf("a acquired %+v after accepting 0..9, want 10..19 (its own fetch runs after its acks)", acq)
	}
	if acq := acquiredOf(shareFetch(t, k, "g", "b", id, 1, nil)); len(acq) != 0 {
		t.Fatalf("b acquired %+v with the window full again, want nothing", acq)
	}
}

// shareFetchOn sends one ShareFetch v1 of partition 0 on conn (raw
// frames, so the test chooses the TCP connection), waiting up to maxWait.
func shareFetchOn(t *testing.T, conn net.Conn, corr int32, group, member string, id [16]byte, epoch int32, maxWait time.Duration, acks []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch) *kmsg.ShareFetchResponse {
	t.Helper()
	sf := kmsg.NewPtrShareFetchRequest()
	sf.Version = 1
	sf.GroupID, sf.MemberID, sf.ShareSessionEpoch = kmsg.StringPtr(group), kmsg.StringPtr(member), epoch
	sf.MaxWaitMillis, sf.MaxBytes, sf.MaxRecords = int32(maxWait.Milliseconds()), 1<<20, 500
	sf.Topics = []kmsg.ShareFetchRequestTopic{{TopicID: id, Partitions: []kmsg.ShareFetchRequestTopicPartition{{Partition: 0, AcknowledgementBatches: acks}}}}
	if _, err := conn.Write(rawreq.Frame(sf, corr, nil)); err != nil {
		t.Fatal(err)
	}
	resp := sf.ResponseKind().(*kmsg.ShareFetchResponse)
	if err := rawreq.ReadResponse(conn, corr, resp); err != nil {
		t.Fatal(err)
	}
	return resp
}

// A share session is keyed by group and member and owned by the TCP
// connection that opened it (Kafka 4.1's ShareSessionCache): the member's
// ShareFetch on a second connection continues it at the next epoch (its
// acknowledgements apply); when the opening connection closes, the session
// ends and the member's acquired records go to another member at once
// with delivery count 2 (the lock has 30 s to run), after which the old
// epoch is SHARE_SESSION_NOT_FOUND and epoch 0 opens a new session. Before,
// a dropped connection left its records locked until the lock expired.
func TestShareSessionAcrossConnections(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	shareSetup(t, k, "q", "g", 10)
	id := shareJoin(t, k, "g", "a", "q")
	shareJoin(t, k, "g", "b", "q")
	dial := func() net.Conn {
		c, err := net.Dial("tcp", k.Addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	c1, c2 := dial(), dial()
	r := shareFetchOn(t, c1, 1, "g", "a", id, 0, 0, nil)
	if acq := acquiredOf(r); len(acq) != 1 || acq[0].FirstOffset != 0 || acq[0].LastOffset != 9 {
		t.Fatalf("a acquired %+v on its first connection, want 0..9", acq)
	}
	accept := []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{{FirstOffset: 0, LastOffset: 4, AcknowledgeTypes: []int8{1}}}
	r = shareFetchOn(t, c2, 1, "g", "a", id, 1, 0, accept)
	wantCode(t, "epoch 1 on the second connection", r.ErrorCode, nil)
	if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		t.Fatalf("epoch 1 on the second connection answered %+v", r.Topics)
	}
	wantCode(t, "accept of 0..4 on the second connection", r.Topics[0].Partitions[0].AcknowledgeErrorCode, nil)

	// b long-polls; closing a's first connection must release 5..9 to it.
	done := make(chan []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord, 1)
	go func() {
		sf := kmsg.NewPtrShareFetchRequest()
		sf.GroupID, sf.MemberID = kmsg.StringPtr("g"), kmsg.StringPtr("b")
		sf.MaxWaitMillis, sf.MaxBytes, sf.MaxRecords = 20000, 1<<20, 500
		sf.Topics = []kmsg.ShareFetchRequestTopic{{TopicID: id, Partitions: []kmsg.ShareFetchRequestTopicPartition{{Partition: 0}}}}
		resp, err := sf.RequestWith(context.Background(), k.Client())
		if err != nil {
			t.Error(err)
			done <- nil
			return
		}
		done <- acquiredOf(resp)
	}()
	c1.Close()
	if acq := <-done; len(acq) != 1 || acq[0].FirstOffset != 5 || acq[0].LastOffset != 9 || acq[0].DeliveryCount != 2 {
		t.Fatalf("b acquired %+v after a's opening connection closed, want 5..9 with delivery count 2", acq)
	}
	wantCode(t, "epoch 2 after the opening connection closed", shareFetchOn(t, c2, 2, "g", "a", id, 2, 0, nil).ErrorCode, kerr.ShareSessionNotFound)
	wantCode(t, "epoch 0 on the second connection", shareFetchOn(t, c2, 3, "g", "a", id, 0, 0, nil).ErrorCode, nil)
}

// group.share.max.share.sessions: with 1, a second member's opening
// ShareFetch is SHARE_SESSION_LIMIT_REACHED (Kafka refuses, it does not
// evict), the first member may replace its own session, and once it closes
// its session (epoch -1) the second gets one.
func TestShareSessionLimit(t *testing.T) {
	t.Parallel()
	k, id := shareMembersAB(t, 10, func(c *config.Broker) { c.ShareMaxSessions = 1 })
	wantCode(t, "a opens", shareFetch(t, k, "g", "a", id, 0, nil).ErrorCode, nil)
	wantCode(t, "b opens beyond the limit", shareFetch(t, k, "g", "b", id, 0, nil).ErrorCode, kerr.ShareSessionLimitReached)
	wantCode(t, "a opens again (replaces its own)", shareFetch(t, k, "g", "a", id, 0, nil).ErrorCode, nil)
	wantCode(t, "a closes", shareFetch(t, k, "g", "a", id, -1, nil).ErrorCode, nil)
	r := shareFetch(t, k, "g", "b", id, 0, nil)
	wantCode(t, "b opens after a closed", r.ErrorCode, nil)
	if acq := acquiredOf(r); len(acq) != 1 || acq[0].FirstOffset != 0 || acq[0].LastOffset != 9 {
		t.Errorf("b acquired %+v, want 0..9 (a's close released them)", acq)
	}
}

// franz-go through internal/proxy: a share consumer holding records (not
// yet acknowledged) has every connection cut; it reconnects, opens a new
// share session, and gets the records it held again with delivery count 2
// long before their 60 s acquisition lock would have let them go, then
// consumes the rest.
func TestShareConsumerReconnectsThroughProxy(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	shareSetup(t, k, "q", "g", 200, "share.record.lock.duration.ms", "60000")
	px, err := proxy.New(k.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { px.Close() })
	c, err := kgo.NewClient(kgo.SeedBrokers(px.Addr()), kgo.ConsumeTopics("q"), kgo.ShareGroup("g"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	held := map[int64]bool{}
	for len(held) == 0 && ctx.Err() == nil {
		c.PollFetches(ctx).EachRecord(func(r *kgo.Record) { held[r.Offset] = true })
	}
	px.CutAll()
	accepted, redelivered := map[int64]bool{}, 0
	for len(accepted) < 200 && ctx.Err() == nil {
		c.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			if held[r.Offset] && r.DeliveryCount() >= 2 {
				redelivered++
			}
			r.Ack(kgo.AckAccept)
			accepted[r.Offset] = true
		})
	}
	if len(accepted) < 200 || redelivered < len(held) {
		t.Fatalf("after the cut: %d of 200 records, %d of the %d held redelivered, in 20 s (the lock is 60 s)", len(accepted), redelivered, len(held))
	}
	t.Logf("%d records held at the cut, all redelivered with delivery count 2", len(held))
}
