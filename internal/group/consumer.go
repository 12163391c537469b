package group

import (
	"cmp"
	"encoding/binary"
	"hash/fnv"
	"maps"
	"regexp"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kawa-broker/kawa/internal/recfmt"
)

// consumerGroup is the KIP-848 state of a group using the consumer protocol (a group with
// cg != nil). The group epoch bumps on every change of membership, subscriptions or subscribed
// topics' partitions; the target assignment is recomputed for it; each member then reconciles
// towards its target (CurrentAssignmentBuilder): it first revokes what it must give up, keeping its
// epoch until its heartbeat shows the partitions released, and only then moves to the assignment
// epoch and receives the partitions no other member still holds. owner records the holder of every
// partition, so a partition is never assigned to two members at once (KAFKA-16147).
type consumerGroup struct {
	epoch       int32 // group epoch
	targetEpoch int32 // epoch the target assignment was computed for
	members     map[string]*consumerMember
	static      map[string]string // group.instance.id -> member ID
	target      map[string]map[topicPartition]bool
	owner       map[topicPartition]string // member holding the partition (assigned or being revoked)
	// metadataHash is KIP-1101's hash of the subscribed topics (IDs, names, partition counts) at
	// targetEpoch: a different hash means a topic was created, deleted, recreated or grown, and the
	// group epoch bumps. regexes holds what each subscription regex in use resolved to.
	metadataHash int64
	regexes      map[string]cgRegexValue
	// dirty lists the members (by ID) whose records must be written again; storedTarget is the
	// target epoch whose member records were last queued (consumer_persist.go).
	dirty        map[string]bool
	storedTarget int32
}

// consumerMember is one member of a consumer group.
type consumerMember struct {
	id               string
	instanceID       *string
	rackID           *string
	clientID, host   string
	epoch, prevEpoch int32
	rebalanceTimeout time.Duration
	names            []string // SubscribedTopicNames
	regex            string   // SubscribedTopicRegex ("" for none)
	re               *regexp.Regexp
	assignor         string
	assigned         map[topicPartition]int32 // owned partition -> epoch it was assigned in
	revoking         map[topicPartition]bool  // asked to release, not yet confirmed
	sent             bool                     // the client was sent the current assigned set
	sessionTimer     *time.Timer
	revokeTimer      *time.Timer
}

func newConsumerGroup() *consumerGroup {
	return &consumerGroup{
		members: map[string]*consumerMember{},
		static:  map[string]string{},
		target:  map[string]map[topicPartition]bool{},
		owner:   map[topicPartition]string{},
		regexes: map[string]cgRegexValue{},
		dirty:   map[string]bool{},
	}
}

// state is the group state ConsumerGroupDescribe and ListGroups show.
func (cg *consumerGroup) state() string {
	switch {
	case len(cg.members) == 0:
		return "Empty"
	case cg.targetEpoch < cg.epoch:
		return "Assigning"
	}
	for _, m := range cg.members {
		if m.epoch != cg.targetEpoch || len(m.revoking) > 0 || !sameSet(m.assigned, cg.target[m.id]) {
			return "Reconciling"
		}
	}
	return "Stable"
}

func sameSet(a map[topicPartition]int32, b map[topicPartition]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for tp := range a {
		if !b[tp] {
			return false
		}
	}
	return true
}

// subscribes reports whether m subscribes to topic: by name, or through the topics its regex
// resolved to.
func (cg *consumerGroup) subscribes(m *consumerMember, topic string) bool {
	if m.re != nil {
		_, ok := slices.BinarySearch(cg.regexes[m.regex].topics, topic)
		return ok
	}
	return slices.Contains(m.names, topic)
}

// subscribedBySome reports whether any member subscribes to topic.
func (cg *consumerGroup) subscribedBySome(topic string) bool {
	for _, m := range cg.members {
		if cg.subscribes(m, topic) {
			return true
		}
	}
	return false
}

// resolveRegexesLocked resolves every subscription regex in use against topics and forgets the
// resolutions no member uses any more. Kafka resolves regexes asynchronously, at most every few
// seconds, against its metadata image; the catalog is local here, so they are resolved at every
// refresh. A resolution whose topics changed gets the next version (Kafka's field holds the
// metadata image's offset; Kawa has none, so it counts the changes) and the time now.
func (c *Coordinator) resolveRegexesLocked(cg *consumerGroup, topics []TopicInfo) {
	used := map[string]*regexp.Regexp{}
	for _, m := range cg.members {
		if m.re != nil {
			used[m.regex] = m.re
		}
	}
	maps.DeleteFunc(cg.regexes, func(rx string, _ cgRegexValue) bool { return used[rx] == nil })
	for rx, re := range used {
		names := []string{}
		for _, t := range topics {
			if re.MatchString(t.Name) {
				names = append(names, t.Name)
			}
		}
		slices.Sort(names)
		old, ok := cg.regexes[rx]
		if ok && slices.Equal(old.topics, names) {
			continue
		}
		cg.regexes[rx] = cgRegexValue{topics: names, version: old.version + 1, timestamp: c.now().UnixMilli()}
	}
}

// subscribedTopicsLocked is every existing topic some member subscribes to, with its partition
// count, and their metadata hash.
func (c *Coordinator) subscribedTopicsLocked(cg *consumerGroup) (map[string]int32, int64) {
	out := map[string]int32{}
	var all []TopicInfo
	if c.cfg.Topics != nil {
		all = c.cfg.Topics()
	}
	c.resolveRegexesLocked(cg, all)
	var subscribed []TopicInfo
	for _, t := range all {
		for _, m := range cg.members {
			if cg.subscribes(m, t.Name) {
				out[t.Name] = t.Partitions
				subscribed = append(subscribed, t)
				break
			}
		}
	}
	return out, metadataHash(subscribed)
}

// metadataHash is the KIP-1101 metadata hash of topics: 0 for none, else FNV-1a (64 bits) over each
// topic in name order: its ID, its name (int16 length first) and its partition count (int32, big
// endian). Kafka hashes the same facts (and racks, which one node has none of) with XXH3; the
// value only has to differ when they do, so a hash Kafka wrote reads as one change.
func metadataHash(topics []TopicInfo) int64 {
	if len(topics) == 0 {
		return 0
	}
	ts := slices.SortedFunc(slices.Values(topics), func(a, b TopicInfo) int { return cmp.Compare(a.Name, b.Name) })
	h := fnv.New64a()
	var b []byte
	for _, t := range ts {
		b = append(b, t.ID[:]...)
		b = recfmt.AppendString(b, t.Name)
		b = binary.BigEndian.AppendUint32(b, uint32(t.Partitions))
	}
	h.Write(b)
	return int64(h.Sum64())
}

// refreshTargetLocked bumps the group epoch if the subscribed topics changed, and recomputes the
// target assignment when the group epoch moved past it.
func (c *Coordinator) refreshTargetLocked(cg *consumerGroup) {
	topics, hash := c.subscribedTopicsLocked(cg)
	if hash != cg.metadataHash && cg.targetEpoch == cg.epoch {
		cg.epoch++ // a topic created, deleted, recreated or grown
	}
	if cg.targetEpoch == cg.epoch {
		return
	}
	cg.metadataHash = hash
	ins := make([]assignInput, 0, len(cg.members))
	assignor := c.cfg.ConsumerAssignor
	for _, m := range sortedConsumers(cg) {
		in := assignInput{id: m.id, topics: map[string]bool{}, current: cg.target[m.id]}
		for t := range topics {
			if cg.subscribes(m, t) {
				in.topics[t] = true
			}
		}
		ins = append(ins, in)
		if m.assignor != "" {
			assignor = m.assignor // Kafka: the assignor most members ask for; one is enough here
		}
	}
	cg.target = assign(assignor, ins, topics)
	cg.targetEpoch = cg.epoch
}

func sortedConsumers(cg *consumerGroup) []*consumerMember {
	ms := make([]*consumerMember, 0, len(cg.members))
	for _, m := range cg.members {
		ms = append(ms, m)
	}
	slices.SortFunc(ms, func(a, b *consumerMember) int { return cmp.Compare(a.id, b.id) })
	return ms
}

// reconcileLocked moves m towards its target. owned is what the client reports holding (nil: the
// request did not say, so what it was last sent). It returns whether m's assigned set changed.
func (c *Coordinator) reconcileLocked(g *group, m *consumerMember, owned map[topicPartition]bool) bool {
	cg := g.cg
	cg.dirty[m.id] = true
	target := cg.target[m.id]
	changed := false
	// Partitions being revoked are released once the client no longer reports them.
	if len(m.revoking) > 0 && owned != nil {
		for tp := range m.revoking {
			if !owned[tp] {
				delete(m.revoking, tp)
				if cg.owner[tp] == m.id {
					delete(cg.owner, tp)
				}
			}
		}
	}
	if m.epoch < cg.targetEpoch && len(m.revoking) == 0 {
		var revoke []topicPartition
		for tp := range m.assigned {
			if !target[tp] {
				revoke = append(revoke, tp)
			}
		}
		if len(revoke) > 0 {
			// Revoke first; the epoch stays until the client confirms.
			for _, tp := range revoke {
				delete(m.assigned, tp)
				m.revoking[tp] = true
			}
			c.schedule(&m.revokeTimer, m.rebalanceTimeout, func() { c.fenceConsumerLocked(g, m, "rebalance timeout") })
			return true
		}
		m.prevEpoch, m.epoch = m.epoch, cg.targetEpoch
		stopTimer(&m.revokeTimer)
	}
	if len(m.revoking) > 0 {
		return changed
	}
	stopTimer(&m.revokeTimer)
	// Partitions of the target nobody else holds are assigned now; the others when released.
	for tp := range target {
		if _, ok := m.assigned[tp]; ok {
			continue
		}
		if o, held := cg.owner[tp]; held && o != m.id {
			continue
		}
		cg.owner[tp] = m.id
		m.assigned[tp] = m.epoch
		changed = true
	}
	// A partition no longer in the target whose topic shrank or vanished is dropped without revoking.
	return changed
}

// removeConsumerLocked drops m from the group, releasing everything it held, and bumps the epoch.
func (c *Coordinator) removeConsumerLocked(g *group, m *consumerMember) {
	cg := g.cg
	stopTimer(&m.sessionTimer)
	stopTimer(&m.revokeTimer)
	for tp, o := range cg.owner {
		if o == m.id {
			delete(cg.owner, tp)
		}
	}
	delete(cg.members, m.id)
	delete(cg.target, m.id)
	cg.dirty[m.id] = true
	if m.instanceID != nil && cg.static[*m.instanceID] == m.id {
		delete(cg.static, *m.instanceID)
	}
	cg.epoch++
	if len(cg.members) == 0 {
		g.stateSince = c.now()
	}
}

// fenceConsumerLocked removes a member that missed its session or rebalance timeout; its next
// heartbeat gets UNKNOWN_MEMBER_ID (or FENCED_MEMBER_EPOCH) and it rejoins with epoch 0.
func (c *Coordinator) fenceConsumerLocked(g *group, m *consumerMember, why string) {
	if g.cg == nil || g.cg.members[m.id] != m {
		return
	}
	c.cfg.Logger.Info("consumer group member fenced", "group", g.name, "member", m.id, "epoch", m.epoch, "reason", why)
	c.removeConsumerLocked(g, m)
	c.refreshTargetLocked(g.cg)
	c.persistConsumerLocked(g) // nobody waits: the member is gone either way
}

// validateConsumerCommit is Kafka's ConsumerGroup.validateOffsetCommit with KIP-1251's rule (Kafka
// 4.3): a commit by a member is accepted when its epoch is at most the member's epoch and, for every
// partition it commits, at least the epoch the partition was assigned to it in (a partition it is
// revoking counts as assigned; one it does not hold needs the member's current epoch). Otherwise it
// is STALE_MEMBER_EPOCH; an unknown member is UNKNOWN_MEMBER_ID. A commit without a member
// (epoch < 0: an admin, or a consumer without group management) needs an empty group, as in Kafka.
func (g *group) validateConsumerCommit(memberID string, epoch int32, tps []topicPartition) int16 {
	cg := g.cg
	if epoch < 0 && len(cg.members) == 0 {
		return 0
	}
	m := cg.members[memberID]
	if m == nil {
		return kerr.UnknownMemberID.Code
	}
	if epoch > m.epoch {
		return kerr.StaleMemberEpoch.Code
	}
	for _, tp := range tps {
		if ae, ok := m.assigned[tp]; ok && epoch < ae {
			return kerr.StaleMemberEpoch.Code
		}
		if _, ok := m.assigned[tp]; !ok && !m.revoking[tp] && epoch != m.epoch {
			return kerr.StaleMemberEpoch.Code
		}
	}
	return 0
}
