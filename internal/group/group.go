package group

import (
	"bytes"
	"cmp"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// state is a classic group's state, as Kafka's ClassicGroupState.
type state int8

const (
	stateEmpty               state = iota // no members; offsets may exist
	statePreparingRebalance               // waiting for members to (re)join
	stateCompletingRebalance              // joined; waiting for the leader's assignment
	stateStable                           // assignment handed out
	stateDead                             // being deleted; the group leaves the map once that is stored
)

func (s state) String() string {
	switch s {
	case stateEmpty:
		return "Empty"
	case statePreparingRebalance:
		return "PreparingRebalance"
	case stateCompletingRebalance:
		return "CompletingRebalance"
	case stateStable:
		return "Stable"
	}
	return "Dead"
}

// consumerProtocol is the protocol type of Kafka consumers; only its metadata is parsed (for the
// subscribed topics that OffsetDelete and offset retention look at).
const consumerProtocol = "consumer"

type topicPartition struct {
	topic     string
	partition int32
}

// offset is one committed (or staged) offset.
type offset struct {
	offset      int64
	leaderEpoch int32
	metadata    string
	commitTime  time.Time
	expireTime  time.Time // zero unless an OffsetCommit v2-v4 set a retention time
	// pos is the log position of the record that wrote this offset; for a committed transactional
	// offset, that of its staged record. A transaction's commit replaces a partition's offset only if
	// its staged record is later than the current offset's (Kafka's GroupMetadata
	// completePendingTxnOffsetCommit, "olderThan"), so a plain commit written after the staging wins.
	pos int64
}

// staged holds one producer's transactional offsets until its marker (KIP-98).
type staged struct {
	epoch   int16
	offsets map[topicPartition]offset
}

// pendingMember is a member ID handed out with MEMBER_ID_REQUIRED (KIP-394), not yet joined.
type pendingMember struct{ timer *time.Timer }

// group is one classic group. All fields are guarded by Coordinator.mu.
type group struct {
	name           string
	state          state
	prevState      state
	stateSince     time.Time // Kafka's currentStateTimestamp: the retention base of an Empty group
	protocolType   string    // "" for a simple group (offsets only)
	protocol       string    // selected protocol of this generation; "" while Empty
	generation     int32
	leader         string
	members        map[string]*member
	static         map[string]string // group.instance.id -> member ID (KIP-345)
	pending        map[string]*pendingMember
	pendingSync    map[string]bool   // members of this generation that have not sent SyncGroup
	nextSeq        uint64            // join order, so listings and leader choice are deterministic
	joinTimer      *time.Timer       // initial delay or rebalance timeout of the join phase
	syncTimer      *time.Timer       // rebalance timeout of the sync phase
	newMemberAdded bool              // a member joined during the initial delay, so extend it
	subscribed     map[string]bool   // topics the consumer members subscribe to; nil = unknown
	persisted      bool              // a group record was written, so removal needs a tombstone
	cg             *consumerGroup    // non-nil: a KIP-848 consumer-protocol group
	cgWritten      map[string][]byte // consumer-group record key -> value last queued (consumer_persist.go)
	cgUnsure       map[string]bool   // consumer-group keys whose last write failed

	offsets   map[topicPartition]offset
	txn       map[int64]*staged // producer ID -> staged offsets
	txnWrites map[int64]int     // producer ID -> staged writes not yet stored
	inflight  map[string]int    // record keys of queued writes
}

func newGroup(name string, now time.Time) *group {
	return &group{
		name:        name,
		stateSince:  now,
		members:     make(map[string]*member),
		static:      make(map[string]string),
		pending:     make(map[string]*pendingMember),
		pendingSync: make(map[string]bool),
		offsets:     make(map[topicPartition]offset),
		txn:         make(map[int64]*staged),
		txnWrites:   make(map[int64]int),
		inflight:    make(map[string]int),
		cgWritten:   make(map[string][]byte),
		cgUnsure:    make(map[string]bool),
	}
}

func (g *group) transition(s state, now time.Time) {
	g.prevState, g.state, g.stateSince = g.state, s, now
}

// canRebalance is Kafka's PREPARING_REBALANCE.validPreviousStates.
func (g *group) canRebalance() bool {
	return g.state == stateStable || g.state == stateCompletingRebalance || g.state == stateEmpty
}

// idle reports a group that holds nothing worth keeping.
func (g *group) idle() bool {
	return g.state == stateEmpty && len(g.members) == 0 && len(g.pending) == 0 && (g.cg == nil || len(g.cg.members) == 0) &&
		len(g.offsets) == 0 && len(g.txn) == 0 && len(g.inflight) == 0
}

// sortedMembers lists members in join order.
func (g *group) sortedMembers() []*member {
	ms := make([]*member, 0, len(g.members))
	for _, m := range g.members {
		ms = append(ms, m)
	}
	slices.SortFunc(ms, func(a, b *member) int { return cmp.Compare(a.seq, b.seq) })
	return ms
}

// rebalanceTimeout is the longest rebalance timeout of the members.
func (g *group) rebalanceTimeout() time.Duration {
	var d time.Duration
	for _, m := range g.members {
		d = max(d, m.rebalanceTimeout)
	}
	return d
}

// allJoined reports whether every member has a JoinGroup parked and no KIP-394 member is still to come.
func (g *group) allJoined() bool {
	if len(g.pending) > 0 {
		return false
	}
	for _, m := range g.members {
		if m.joinCh == nil {
			return false
		}
	}
	return true
}

// add registers m; the first member sets the protocol type and is the first leader.
func (g *group) add(m *member) {
	if len(g.members) == 0 {
		g.protocolType = m.protocolType
	}
	g.nextSeq++
	m.seq = g.nextSeq
	g.members[m.id] = m
	if m.instanceID != nil {
		g.static[*m.instanceID] = m.id
	}
	if g.leader == "" {
		g.leader = m.id
	}
}

// remove drops m, answers its parked requests with UNKNOWN_MEMBER_ID and hands leadership on.
func (g *group) remove(m *member) {
	stopTimer(&m.hbTimer)
	g.completeJoin(m, joinResult{code: kerr.UnknownMemberID.Code, generation: -1})
	g.completeSync(m, syncResult{code: kerr.UnknownMemberID.Code})
	delete(g.members, m.id)
	delete(g.pendingSync, m.id)
	if m.instanceID != nil && g.static[*m.instanceID] == m.id {
		delete(g.static, *m.instanceID)
	}
	if g.leader == m.id {
		g.leader = ""
		if ms := g.sortedMembers(); len(ms) > 0 {
			g.leader = ms[0].id
		}
	}
}

// rekeyStatic moves the static member oldID to newID. Requests parked by the old incarnation get
// FENCED_INSTANCE_ID; the member keeps its place, leadership and assignment.
func (g *group) rekeyStatic(oldID, newID string) *member {
	m := g.members[oldID]
	g.completeJoin(m, joinResult{code: kerr.FencedInstanceID.Code, memberID: oldID, generation: -1})
	g.completeSync(m, syncResult{code: kerr.FencedInstanceID.Code})
	delete(g.members, oldID)
	m.id = newID
	g.members[newID] = m
	g.static[*m.instanceID] = newID
	if g.leader == oldID {
		g.leader = newID
	}
	if g.pendingSync[oldID] {
		delete(g.pendingSync, oldID)
		g.pendingSync[newID] = true
	}
	return m
}

// validateMember is Kafka's ClassicGroup.validateMember: a static member must present the member ID
// its instance ID maps to (else FENCED_INSTANCE_ID), and the member must exist.
func (g *group) validateMember(memberID string, instanceID *string) int16 {
	if instanceID != nil {
		existing, ok := g.static[*instanceID]
		if !ok {
			return kerr.UnknownMemberID.Code
		}
		if existing != memberID {
			return kerr.FencedInstanceID.Code
		}
	}
	if g.members[memberID] == nil {
		return kerr.UnknownMemberID.Code
	}
	return 0
}

// supportsProtocols: an Empty group takes any non-empty protocol type and list; otherwise the type
// must match and one of the protocols must be supported by every member.
func (g *group) supportsProtocols(protocolType string, protocols []kmsg.JoinGroupRequestProtocol) bool {
	if g.state == stateEmpty {
		return protocolType != "" && len(protocols) > 0
	}
	if protocolType != g.protocolType {
		return false
	}
	for _, p := range protocols {
		if g.supportCount(p.Name) == len(g.members) {
			return true
		}
	}
	return false
}

func (g *group) supportCount(name string) int {
	n := 0
	for _, m := range g.members {
		if m.supports(name) {
			n++
		}
	}
	return n
}

// selectProtocol is Kafka's: among the protocols every member supports, each member votes for its most
// preferred one and the most votes win. Ties go to the protocol the earliest-joined voter chose.
func (g *group) selectProtocol() string {
	votes := make(map[string]int)
	var order []string
	for _, m := range g.sortedMembers() {
		for _, p := range m.protocols {
			if g.supportCount(p.Name) == len(g.members) {
				if votes[p.Name] == 0 {
					order = append(order, p.Name)
				}
				votes[p.Name]++
				break
			}
		}
	}
	best := ""
	for _, name := range order {
		if best == "" || votes[name] > votes[best] {
			best = name
		}
	}
	return best
}

// initNextGeneration ends a join phase: bump the generation and pick the protocol, or go Empty.
func (g *group) initNextGeneration(now time.Time) {
	g.generation++
	if len(g.members) > 0 {
		g.protocol = g.selectProtocol()
		g.transition(stateCompletingRebalance, now)
	} else {
		g.protocol = ""
		g.transition(stateEmpty, now)
	}
	g.subscribed = g.computeSubscribed()
	clear(g.pendingSync)
}

// computeSubscribed parses the consumer protocol metadata of every member (nil if not a consumer
// group or any metadata does not parse).
func (g *group) computeSubscribed() map[string]bool {
	if g.protocolType != consumerProtocol {
		return nil
	}
	topics := make(map[string]bool)
	for _, m := range g.members {
		var meta kmsg.ConsumerMemberMetadata
		if err := meta.ReadFrom(m.metadata(g.protocol)); err != nil {
			return nil
		}
		for _, t := range meta.Topics {
			topics[t] = true
		}
	}
	return topics
}

// subscribedTo is Kafka's isSubscribedToTopic: unknown subscriptions count as subscribed for consumer
// groups.
func (g *group) subscribedTo(topic string) bool {
	if g.subscribed == nil {
		return g.protocolType == consumerProtocol
	}
	return g.subscribed[topic]
}

// joinMembers is the member list the leader gets in its JoinGroup response.
func (g *group) joinMembers() []kmsg.JoinGroupResponseMember {
	ms := g.sortedMembers()
	out := make([]kmsg.JoinGroupResponseMember, 0, len(ms))
	for _, m := range ms {
		jm := kmsg.NewJoinGroupResponseMember()
		jm.MemberID = m.id
		jm.InstanceID = m.instanceID
		jm.ProtocolMetadata = m.metadata(g.protocol)
		out = append(out, jm)
	}
	return out
}

// hasStaged reports whether any producer has a transactional offset staged for tp.
func (g *group) hasStaged(tp topicPartition) bool {
	for _, s := range g.txn {
		if _, ok := s.offsets[tp]; ok {
			return true
		}
	}
	return false
}

// member is one member of a classic group.
type member struct {
	id               string
	instanceID       *string // group.instance.id of a static member (KIP-345)
	clientID         string
	clientHost       string
	protocolType     string
	protocols        []kmsg.JoinGroupRequestProtocol // in the member's preference order
	sessionTimeout   time.Duration
	rebalanceTimeout time.Duration
	assignment       []byte
	seq              uint64
	isNew            bool            // joined but not yet through a join phase; expires on NewMemberJoinTimeout
	joinCh           chan joinResult // non-nil while a JoinGroup is parked
	syncCh           chan syncResult // non-nil while a SyncGroup is parked
	hbTimer          *time.Timer
}

func (m *member) supports(name string) bool {
	for _, p := range m.protocols {
		if p.Name == name {
			return true
		}
	}
	return false
}

func (m *member) metadata(protocol string) []byte {
	for _, p := range m.protocols {
		if p.Name == protocol {
			return p.Metadata
		}
	}
	return nil
}

// matches reports whether protocols equal the member's, in order (Kafka's ClassicGroupMember.matches).
func (m *member) matches(protocols []kmsg.JoinGroupRequestProtocol) bool {
	protocols = dedupProtocols(protocols)
	if len(protocols) != len(m.protocols) {
		return false
	}
	for i, p := range protocols {
		if p.Name != m.protocols[i].Name || !bytes.Equal(p.Metadata, m.protocols[i].Metadata) {
			return false
		}
	}
	return true
}

// satisfiedHeartbeat is Kafka's hasSatisfiedHeartbeat: a member parked in a rebalance needs no
// heartbeat, unless it is new.
func (m *member) satisfiedHeartbeat() bool {
	return !m.isNew && (m.joinCh != nil || m.syncCh != nil)
}

// dedupProtocols keeps the first of each protocol name, as Kafka's keyed protocol collection does.
func dedupProtocols(ps []kmsg.JoinGroupRequestProtocol) []kmsg.JoinGroupRequestProtocol {
	out := make([]kmsg.JoinGroupRequestProtocol, 0, len(ps))
	for _, p := range ps {
		if !slices.ContainsFunc(out, func(q kmsg.JoinGroupRequestProtocol) bool { return q.Name == p.Name }) {
			out = append(out, p)
		}
	}
	return out
}

// setAwaitingJoin parks a JoinGroup for m. A JoinGroup already parked for m is answered
// REBALANCE_IN_PROGRESS: its client has retried and will not read it.
func (g *group) setAwaitingJoin(m *member, ch chan joinResult) {
	g.completeJoin(m, joinResult{code: kerr.RebalanceInProgress.Code, memberID: m.id, generation: -1})
	m.joinCh = ch
}

func (g *group) completeJoin(m *member, res joinResult) bool {
	if m.joinCh == nil {
		return false
	}
	m.joinCh <- res
	m.joinCh = nil
	return true
}

func (g *group) completeSync(m *member, res syncResult) bool {
	if m.syncCh == nil {
		return false
	}
	m.syncCh <- res
	m.syncCh = nil
	return true
}
