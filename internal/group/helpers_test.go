package group

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// memStore is an in-memory Store. fail makes Append return an error; gate, when set, holds every
// Append until it is closed.
type memStore struct {
	mu      sync.Mutex
	recs    []Record
	fail    error
	gate    chan struct{}
	appends int
}

func (s *memStore) Append(ctx context.Context, recs []Record) error {
	s.mu.Lock()
	gate := s.gate
	s.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	s.appends++
	for _, r := range recs {
		s.recs = append(s.recs, Record{Key: append([]byte(nil), r.Key...), Value: append([]byte(nil), r.Value...)})
		if r.Value == nil {
			s.recs[len(s.recs)-1].Value = nil
		}
	}
	return nil
}

func (s *memStore) records() []Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Record(nil), s.recs...)
}

func (s *memStore) setFail(err error) {
	s.mu.Lock()
	s.fail = err
	s.mu.Unlock()
}

var errDisk = errors.New("disk on fire")

// testConfig is a Config with session bounds loose enough for short test timeouts.
func testConfig() Config {
	return Config{MinSessionTimeout: time.Millisecond, MaxSessionTimeout: time.Hour}
}

// bubbleConfig is testConfig for synctest bubbles: concurrent first joins land in one generation
// because the initial rebalance waits a (fake) second for them.
func bubbleConfig() Config {
	cfg := testConfig()
	cfg.InitialRebalanceDelay = time.Second
	return cfg
}

func newTestCoordinator(t *testing.T, cfg Config) (*Coordinator, *memStore) {
	t.Helper()
	s := &memStore{}
	c := New(cfg, s)
	t.Cleanup(c.Close)
	return c, s
}

// restart builds a new coordinator from what s stored, as a broker restart would.
func restart(t *testing.T, s *memStore) *Coordinator {
	t.Helper()
	c := New(testConfig(), s)
	t.Cleanup(c.Close)
	if err := c.Load(s.records()); err != nil {
		t.Fatalf("Load: %v", err)
	}
	return c
}

func consumerMeta(topics ...string) []byte {
	m := kmsg.NewConsumerMemberMetadata()
	m.Topics = topics
	return m.AppendTo(nil)
}

// client plays one group member the way a Kafka client does.
type client struct {
	c         *Coordinator
	group     string
	clientID  string
	id        string
	instance  *string
	gen       int32
	version   int16
	protocols []kmsg.JoinGroupRequestProtocol
	session   time.Duration
	rebalance time.Duration
}

func newClient(c *Coordinator, group, clientID string) *client {
	return &client{
		c: c, group: group, clientID: clientID, gen: -1, version: 9,
		protocols: []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: consumerMeta("t1")}},
		session:   10 * time.Second, rebalance: 20 * time.Second,
	}
}

func (cl *client) static(instance string) *client {
	cl.instance = &instance
	return cl
}

func (cl *client) joinRequest() *kmsg.JoinGroupRequest {
	r := kmsg.NewPtrJoinGroupRequest()
	r.Version = cl.version
	r.Group, r.MemberID, r.InstanceID = cl.group, cl.id, cl.instance
	r.SessionTimeoutMillis = int32(cl.session / time.Millisecond)
	r.RebalanceTimeoutMillis = int32(cl.rebalance / time.Millisecond)
	r.ProtocolType = consumerProtocol
	r.Protocols = cl.protocols
	return r
}

// joinOnce sends one JoinGroup and records the member ID and generation it gets.
func (cl *client) joinOnce(ctx context.Context) *kmsg.JoinGroupResponse {
	resp := cl.c.JoinGroup(ctx, Client{ID: cl.clientID, Host: "127.0.0.1"}, cl.joinRequest())
	if resp.MemberID != "" {
		cl.id = resp.MemberID
	}
	if resp.ErrorCode == 0 {
		cl.gen = resp.Generation
	}
	return resp
}

// join sends JoinGroup, redoing it once after MEMBER_ID_REQUIRED as clients do.
func (cl *client) join(ctx context.Context) *kmsg.JoinGroupResponse {
	resp := cl.joinOnce(ctx)
	if resp.ErrorCode == kerr.MemberIDRequired.Code {
		resp = cl.joinOnce(ctx)
	}
	return resp
}

func (cl *client) sync(ctx context.Context, assign map[string][]byte) *kmsg.SyncGroupResponse {
	r := kmsg.NewPtrSyncGroupRequest()
	r.Version = 5
	r.Group, r.MemberID, r.InstanceID, r.Generation = cl.group, cl.id, cl.instance, cl.gen
	for id, a := range assign {
		r.GroupAssignment = append(r.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: id, MemberAssignment: a})
	}
	return cl.c.SyncGroup(ctx, r)
}

func (cl *client) heartbeat(ctx context.Context) int16 {
	r := kmsg.NewPtrHeartbeatRequest()
	r.Version = 4
	r.Group, r.MemberID, r.InstanceID, r.Generation = cl.group, cl.id, cl.instance, cl.gen
	return cl.c.Heartbeat(ctx, r).ErrorCode
}

// assignEach gives every member of a leader's JoinGroup response its own ID as assignment bytes.
func assignEach(resp *kmsg.JoinGroupResponse) map[string][]byte {
	out := make(map[string][]byte)
	for _, m := range resp.Members {
		out[m.MemberID] = []byte("assigned:" + m.MemberID)
	}
	return out
}

// stableGroup joins the clients as one generation (they join concurrently, within the initial delay
// or a rebalance), syncs them, and returns the leader's JoinGroup response.
func stableGroup(t *testing.T, ctx context.Context, cls ...*client) *kmsg.JoinGroupResponse {
	t.Helper()
	return settle(t, ctx, cls, joinAll(ctx, cls))
}

// rebalance has the leader of a Stable group rejoin, which starts a rebalance, then the others, and
// settles the new generation. Call it inside a synctest bubble.
func rebalance(t *testing.T, ctx context.Context, leader *client, others ...*client) *kmsg.JoinGroupResponse {
	t.Helper()
	lj := make(chan *kmsg.JoinGroupResponse, 1)
	go func() { lj <- leader.join(ctx) }()
	synctest.Wait()
	joins := append(joinAll(ctx, others), <-lj)
	return settle(t, ctx, append(others, leader), joins)
}

func joinAll(ctx context.Context, cls []*client) []*kmsg.JoinGroupResponse {
	joins := make([]*kmsg.JoinGroupResponse, len(cls))
	var wg sync.WaitGroup
	for i, cl := range cls {
		wg.Go(func() { joins[i] = cl.join(ctx) })
	}
	wg.Wait()
	return joins
}

// settle syncs clients whose JoinGroup answers are joins, the leader with assignEach.
func settle(t *testing.T, ctx context.Context, cls []*client, joins []*kmsg.JoinGroupResponse) *kmsg.JoinGroupResponse {
	t.Helper()
	var leader *kmsg.JoinGroupResponse
	for i, j := range joins {
		if j.ErrorCode != 0 {
			t.Fatalf("member %d join: %v", i, kerr.ErrorForCode(j.ErrorCode))
		}
		if j.LeaderID == j.MemberID {
			leader = j
		}
	}
	if leader == nil {
		t.Fatal("no member was told it leads")
	}
	assign := assignEach(leader)
	var wg sync.WaitGroup
	for i, cl := range cls {
		wg.Go(func() {
			var a map[string][]byte
			if cl.id == leader.LeaderID {
				a = assign
			}
			if r := cl.sync(ctx, a); r.ErrorCode != 0 {
				t.Errorf("member %d sync: %v", i, kerr.ErrorForCode(r.ErrorCode))
			}
		})
	}
	wg.Wait()
	return leader
}

func commitReq(group string, gen int32, member string, topic string, offsets map[int32]int64) *kmsg.OffsetCommitRequest {
	r := kmsg.NewPtrOffsetCommitRequest()
	r.Version = 9
	r.Group, r.Generation, r.MemberID = group, gen, member
	t := kmsg.NewOffsetCommitRequestTopic()
	t.Topic = topic
	for p, o := range offsets {
		tp := kmsg.NewOffsetCommitRequestTopicPartition()
		tp.Partition, tp.Offset, tp.LeaderEpoch = p, o, 3
		md := "md"
		tp.Metadata = &md
		t.Partitions = append(t.Partitions, tp)
	}
	r.Topics = append(r.Topics, t)
	return r
}

// commitCodes flattens an OffsetCommit response to topic/partition -> code.
func commitCodes(resp *kmsg.OffsetCommitResponse) map[topicPartition]int16 {
	out := make(map[topicPartition]int16)
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out[topicPartition{t.Topic, p.Partition}] = p.ErrorCode
		}
	}
	return out
}

// fetched is one partition of an OffsetFetch answer.
type fetched struct {
	offset int64
	epoch  int32
	code   int16
}

// fetch sends OffsetFetch v7 for topic/partitions and returns partition -> answer, plus the top-level code.
func fetch(c *Coordinator, group, topic string, requireStable bool, partitions ...int32) (map[int32]fetched, int16) {
	r := kmsg.NewPtrOffsetFetchRequest()
	r.Version = 7
	r.Group, r.RequireStable = group, requireStable
	r.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: topic, Partitions: partitions}}
	resp := c.OffsetFetch(context.Background(), r)
	out := make(map[int32]fetched)
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out[p.Partition] = fetched{p.Offset, p.LeaderEpoch, p.ErrorCode}
		}
	}
	return out, resp.ErrorCode
}

func describe(c *Coordinator, version int16, group string) kmsg.DescribeGroupsResponseGroup {
	r := kmsg.NewPtrDescribeGroupsRequest()
	r.Version = version
	r.Groups = []string{group}
	return c.DescribeGroups(context.Background(), r).Groups[0]
}

func listGroups(c *Coordinator) map[string]string {
	r := kmsg.NewPtrListGroupsRequest()
	r.Version = 5
	out := make(map[string]string)
	for _, g := range c.ListGroups(context.Background(), r).Groups {
		out[g.Group] = g.GroupState + "/" + g.ProtocolType
	}
	return out
}

func wantCode(t *testing.T, what string, got int16, want *kerr.Error) {
	t.Helper()
	var wantCode int16
	if want != nil {
		wantCode = want.Code
	}
	if got != wantCode {
		t.Fatalf("%s: got %v, want %v", what, kerr.ErrorForCode(got), want)
	}
}
