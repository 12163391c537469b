package group

import (
	"cmp"
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetFetch (key 9), versions 1-10. The coordinator also answers v0, which the broker does not advertise.
//
// Behaviour: returns each requested partition's committed offset, leader epoch and metadata, or -1 with
// no error when nothing is committed (or the group does not exist). No topics (v2+) means every
// committed partition of the group. With require_stable (v7+, KIP-447) a partition that has a
// transactional offset staged and not yet committed or aborted answers UNSTABLE_OFFSET_COMMIT, so a
// new owner does not start from an offset a transaction is about to replace (BL-15, BL-17).
// Offsets become visible only once durable.
//
// Errors: UNSTABLE_OFFSET_COMMIT and UNKNOWN_TOPIC_ID (v10) per partition; COORDINATOR_LOAD_IN_PROGRESS
// and COORDINATOR_NOT_AVAILABLE per group (top level v2-v7, every partition v0-v1); v9+ on a consumer
// group (KIP-848) naming a member: UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH (an epoch other than the
// member's), per group.
//
// Version notes: v5 leader epochs, v7 require_stable, v8 many groups per request, v9 member ID/epoch
// (KIP-848, checked for consumer groups, ignored for classic groups as Kafka does), v10 topic IDs.
func (c *Coordinator) OffsetFetch(_ context.Context, r *kmsg.OffsetFetchRequest) *kmsg.OffsetFetchResponse {
	resp := r.ResponseKind().(*kmsg.OffsetFetchResponse)
	if r.Version >= 8 {
		for _, rg := range r.Groups {
			topics := c.fetchTopics(r.Version, rg.Topics)
			c.mu.Lock()
			member := fetchMember{id: rg.MemberID, epoch: rg.MemberEpoch}
			if r.Version < 9 {
				member = fetchMember{epoch: -1}
			}
			resp.Groups = append(resp.Groups, c.fetchGroupLocked(rg.Group, member, topics, r.RequireStable))
			c.mu.Unlock()
		}
		return resp
	}
	var topics []fetchTopic
	if r.Topics != nil || r.Version < 2 {
		topics = make([]fetchTopic, 0, len(r.Topics))
		for _, t := range r.Topics {
			topics = append(topics, fetchTopic{name: t.Topic, partitions: t.Partitions})
		}
	}
	c.mu.Lock()
	res := c.fetchGroupLocked(r.Group, fetchMember{epoch: -1}, topics, r.RequireStable)
	c.mu.Unlock()
	fillFetchV0(resp, res)
	return resp
}

// fetchTopic is one requested topic; partitions of an unresolved topic ID answer code.
type fetchTopic struct {
	name       string
	id         [16]byte
	partitions []int32
	code       int16
}

// fetchTopics normalises v8+ topics; nil means all topics.
func (c *Coordinator) fetchTopics(version int16, ts []kmsg.OffsetFetchRequestGroupTopic) []fetchTopic {
	if ts == nil {
		return nil
	}
	out := make([]fetchTopic, 0, len(ts))
	for _, t := range ts {
		name, code := c.topicName(version >= 10, t.Topic, t.TopicID)
		out = append(out, fetchTopic{name: name, id: t.TopicID, partitions: t.Partitions, code: code})
	}
	return out
}

// fetchMember is who an OffsetFetch v9+ says it is: a member ID (nil: none) and member epoch.
type fetchMember struct {
	id    *string
	epoch int32
}

// validateConsumerFetch is Kafka's ConsumerGroup.validateOffsetFetch (v9+): a fetch naming no member
// (an admin, a consumer without group management) is answered; otherwise the member must exist
// (UNKNOWN_MEMBER_ID) at exactly that epoch (STALE_MEMBER_EPOCH). Classic groups do not check.
func (g *group) validateConsumerFetch(fm fetchMember) int16 {
	if g.cg == nil || (fm.id == nil && fm.epoch < 0) {
		return 0
	}
	id := ""
	if fm.id != nil {
		id = *fm.id
	}
	m := g.cg.members[id]
	switch {
	case m == nil:
		return kerr.UnknownMemberID.Code
	case fm.epoch != m.epoch:
		return kerr.StaleMemberEpoch.Code
	}
	return 0
}

// fetchGroupLocked answers one group in the v8+ shape; topics nil means every committed partition.
func (c *Coordinator) fetchGroupLocked(name string, fm fetchMember, topics []fetchTopic, requireStable bool) kmsg.OffsetFetchResponseGroup {
	out := kmsg.NewOffsetFetchResponseGroup()
	out.Group = name
	out.ErrorCode = c.availableLocked()
	g := c.groups[name]
	if out.ErrorCode == 0 && g != nil && g.state != stateDead {
		if out.ErrorCode = g.validateConsumerFetch(fm); out.ErrorCode != 0 {
			return out // Kafka answers the group's error without topics
		}
	}
	if out.ErrorCode != 0 || (g != nil && g.state == stateDead) {
		g = nil // unavailable, or being deleted: its offsets are gone as far as readers are concerned
	}
	if topics == nil {
		topics = c.committedTopics(g)
	}
	for _, t := range topics {
		rt := kmsg.NewOffsetFetchResponseGroupTopic()
		rt.Topic, rt.TopicID = t.name, t.id
		code := cmp.Or(out.ErrorCode, t.code)
		for _, p := range t.partitions {
			rt.Partitions = append(rt.Partitions, fetchPartition(g, topicPartition{t.name, p}, code, requireStable))
		}
		out.Topics = append(out.Topics, rt)
	}
	return out
}

func fetchPartition(g *group, tp topicPartition, code int16, requireStable bool) kmsg.OffsetFetchResponseGroupTopicPartition {
	rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
	rp.Partition = tp.partition
	rp.Offset, rp.LeaderEpoch = -1, -1
	empty := ""
	rp.Metadata = &empty
	rp.ErrorCode = code
	if code != 0 || g == nil {
		return rp
	}
	if requireStable && g.hasStaged(tp) {
		rp.ErrorCode = kerr.UnstableOffsetCommit.Code
		return rp
	}
	if o, ok := g.offsets[tp]; ok {
		rp.Offset, rp.LeaderEpoch = o.offset, o.leaderEpoch
		md := o.metadata
		rp.Metadata = &md
	}
	return rp
}

// committedTopics lists g's committed partitions, sorted, for an all-topics fetch.
func (c *Coordinator) committedTopics(g *group) []fetchTopic {
	if g == nil {
		return []fetchTopic{}
	}
	byTopic := make(map[string][]int32)
	for tp := range g.offsets {
		byTopic[tp.topic] = append(byTopic[tp.topic], tp.partition)
	}
	out := make([]fetchTopic, 0, len(byTopic))
	for name, ps := range byTopic {
		slices.Sort(ps)
		t := fetchTopic{name: name, partitions: ps}
		if c.cfg.TopicID != nil {
			t.id, _ = c.cfg.TopicID(name)
		}
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b fetchTopic) int { return cmp.Compare(a.name, b.name) })
	return out
}

// fillFetchV0 shapes a group answer for OffsetFetch v0-v7.
func fillFetchV0(resp *kmsg.OffsetFetchResponse, res kmsg.OffsetFetchResponseGroup) {
	resp.ErrorCode = res.ErrorCode
	if resp.Version >= 2 && res.ErrorCode != 0 {
		return // the top-level code says it all, as in Kafka
	}
	for _, t := range res.Topics {
		rt := kmsg.NewOffsetFetchResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetFetchResponseTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch = p.Partition, p.Offset, p.LeaderEpoch
			rp.Metadata, rp.ErrorCode = p.Metadata, p.ErrorCode // v0-v1 carry group errors here
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
}
