// Package share is Kawa's share-group coordinator (KIP-932, "queues for
// Kafka"): ShareGroupHeartbeat membership with server-side assignment, and
// the share-partition state (SPSO, SPEO, acquisition locks, delivery counts,
// acknowledgements) that ShareFetch and ShareAcknowledge act on.
//
// Assignment: every member is assigned every partition of every topic it
// subscribes to. Share groups allow many members per partition (records,
// not partitions, are what members get exclusively), so this is a valid
// KIP-932 assignment; it trades fetch fan-out for never leaving a
// partition unconsumed during membership changes.
//
// Durability: as in Kafka, share state lives in an internal topic,
// __share_group_state, written through the Store the broker gives (one
// partition, durable before Append's wait returns). Each change appends
// the whole new state of what it touched: a group record (the group
// exists; its configs) or a share-partition record (SPSO, SPEO and the
// state and delivery count of every offset between them, run-length
// encoded); later records win, nil values are tombstones, and Load
// replays the log at start. Changes are appended under the coordinator's
// lock, so the log order is the order of the changes, and waited for
// after it, so concurrent requests share one fsync. An acquisition is
// appended (as its new delivery count) and durable before the ShareFetch
// is answered, an acknowledgement before its answer; a restart ends every
// acquisition lock as an expiry would: records that were acquired are
// available again with their delivery counts kept (redelivered), or
// archived at the limit; acknowledged ones are never redelivered.
//
// Locking: one mutex over all groups. Timeouts are applied lazily by the
// next request that looks at a group; the only goroutines are one per
// share session opened on a connection, waiting for that connection to
// close, and each ends with its session.
package share

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Defaults of the broker configs KIP-932 names.
const (
	DefaultLockDuration      = 30 * time.Second // group.share.record.lock.duration.ms
	DefaultDeliveryLimit     = 5                // group.share.delivery.count.limit
	DefaultSessionTimeout    = 45 * time.Second // group.share.session.timeout.ms
	DefaultHeartbeatInterval = 5 * time.Second  // group.share.heartbeat.interval.ms
	// DefaultMaxShareSessions is group.share.max.share.sessions: share
	// sessions open at once on the broker.
	DefaultMaxShareSessions = 2000
	// DefaultMaxRecordLocks is group.share.partition.max.record.locks,
	// Kafka 4.1's default (4.0's was 200): the in-flight window of one
	// share-partition, and so the acquired records it holds at most.
	DefaultMaxRecordLocks = 2000
)

// Limits are the broker-wide share-group limits; a zero field takes its
// Kafka default.
type Limits struct {
	// MaxRecordLocks is group.share.partition.max.record.locks (records;
	// default DefaultMaxRecordLocks).
	MaxRecordLocks int
	// MaxShareSessions is group.share.max.share.sessions (default
	// DefaultMaxShareSessions).
	MaxShareSessions int
	// SnapshotUpdateRecords is share.coordinator.snapshot.update.records.per.snapshot:
	// update records written for a share-partition between two snapshots
	// of it (default DefaultSnapshotUpdateRecords).
	SnapshotUpdateRecords int
	// PruneInterval is share.coordinator.state.topic.prune.interval.ms:
	// the time between prune rounds of the state log (default
	// DefaultPruneInterval; negative: every change is one, for tests).
	PruneInterval time.Duration
}

// Defaults of the share coordinator's configs (Kafka's ShareCoordinatorConfig).
const (
	DefaultSnapshotUpdateRecords = 500
	DefaultPruneInterval         = 5 * time.Minute
)

func (l Limits) withDefaults() Limits {
	if l.MaxRecordLocks <= 0 {
		l.MaxRecordLocks = DefaultMaxRecordLocks
	}
	if l.MaxShareSessions <= 0 {
		l.MaxShareSessions = DefaultMaxShareSessions
	}
	if l.SnapshotUpdateRecords <= 0 {
		l.SnapshotUpdateRecords = DefaultSnapshotUpdateRecords
	}
	if l.PruneInterval == 0 {
		l.PruneInterval = DefaultPruneInterval
	}
	return l
}

// Group config names accepted by SetConfig (KIP-932 "Group configuration",
// as IncrementalAlterConfigs GROUP resources).
const (
	ConfigAutoOffsetReset = "share.auto.offset.reset"       // "latest" (default) or "earliest"
	ConfigLockDuration    = "share.record.lock.duration.ms" // milliseconds
	ConfigDeliveryLimit   = "share.delivery.count.limit"    // acquisitions before archiving
	ConfigIsolationLevel  = "share.isolation.level"         // "read_uncommitted" (default) or "read_committed"
	ConfigSessionTimeout  = "share.session.timeout.ms"      // milliseconds
)

// TP names one partition.
type TP struct {
	Topic     string
	Partition int32
}

// Topics resolves a subscribed topic name to its partition count (ok false:
// no such topic, it is not assigned).
type Topics func(name string) (partitions int32, ok bool)

type member struct {
	clientID string // the client ID and host of its last heartbeat (ShareGroupDescribe)
	host     string
	epoch    int32
	topics   []string
	deadline time.Time
	// The member's share session (KIP-932 "Share sessions"; Kafka's
	// ShareSessionCache keys it by group and member ID too): its
	// partitions and the epoch its next ShareFetch or ShareAcknowledge must
	// carry; session nil means no session is open. sessionEnd is closed
	// when the session ends (its watch goroutine stops then).
	session      map[TP]struct{}
	sessionEpoch int32
	sessionEnd   chan struct{}
}

type group struct {
	id      string
	epoch   int32
	members map[string]*member
	configs map[string]string
	parts   map[TP]*sharePartition
}

// Coordinator owns every share group. Its only goroutines watch the
// connections that opened share sessions (watchSession); session and
// lock timeouts are applied lazily, by the next request that looks at the
// group, using the injected clock.
type Coordinator struct {
	store Store
	now   func() time.Time
	lim   Limits

	mu     sync.Mutex
	groups map[string]*group
	wake   chan struct{} // closed and replaced when records become available
	// need is, per state-log key of a live group or share-partition, the
	// offset of the record its replay starts from (its latest group record
	// or snapshot): the log start may advance to the lowest of them.
	need      map[string]int64
	nextPrune time.Time // when the next prune round is due
	coldBelow int64     // the previous prune round's end: keys needing less are cold
	sessions  int       // share sessions open, at most lim.MaxShareSessions
}

// New returns a coordinator persisting to store (call Load with the
// store's records before serving). now is the clock (time.Now in
// production, fake in tests); lim's zero fields take Kafka's defaults.
func New(store Store, now func() time.Time, lim Limits) *Coordinator {
	return &Coordinator{store: store, now: now, lim: lim.withDefaults(), groups: map[string]*group{}, wake: make(chan struct{}), need: map[string]int64{}}
}

// Wake returns a channel closed when records are released (RELEASE, lock
// expiry, a member leaving), so parked ShareFetches try again.
func (c *Coordinator) Wake() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.wake
}

func (c *Coordinator) wakeLocked() {
	close(c.wake)
	c.wake = make(chan struct{})
}

func (c *Coordinator) groupLocked(id string, create bool) *group {
	g := c.groups[id]
	if g == nil && create {
		g = &group{id: id, members: map[string]*member{}, configs: map[string]string{}, parts: map[TP]*sharePartition{}}
		c.groups[id] = g
	}
	return g
}

func (g *group) duration(name string, def time.Duration) time.Duration {
	if v, err := strconv.ParseInt(g.configs[name], 10, 64); err == nil && v > 0 {
		return time.Duration(v) * time.Millisecond
	}
	return def
}

func (g *group) limit() int {
	if v, err := strconv.Atoi(g.configs[ConfigDeliveryLimit]); err == nil && v > 0 {
		return v
	}
	return DefaultDeliveryLimit
}

// LockDuration is the group's acquisition lock (share.record.lock.duration.ms,
// default group.share.record.lock.duration.ms = 30 s).
func (c *Coordinator) LockDuration(groupID string) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if g := c.groups[groupID]; g != nil {
		return g.duration(ConfigLockDuration, DefaultLockDuration)
	}
	return DefaultLockDuration
}

// ReadCommitted reports whether the group reads under read_committed
// (share.isolation.level).
func (c *Coordinator) ReadCommitted(groupID string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[groupID]
	return g != nil && g.configs[ConfigIsolationLevel] == "read_committed"
}

// SetConfig validates and stores one group config (value nil deletes it)
// durably. Errors: kerr.InvalidConfig for an unknown name or bad value.
func (c *Coordinator) SetConfig(ctx context.Context, groupID, name string, value *string, validateOnly bool) error {
	if value != nil {
		if err := validConfig(name, *value); err != nil {
			return err
		}
	} else if err := validConfig(name, ""); err != nil && !errors.Is(err, errBadValue) {
		return err
	}
	if validateOnly {
		return nil
	}
	return c.durably(ctx, func() (func(context.Context) error, error) {
		g := c.groupLocked(groupID, true)
		if value == nil {
			delete(g.configs, name)
		} else {
			g.configs[name] = *value
		}
		return c.appendLocked(change{rec: groupRecord(g), need: true})
	})
}

// durably runs change under the coordinator's lock, then waits, unlocked,
// until what it appended is durable (a nil wait: it appended nothing).
func (c *Coordinator) durably(ctx context.Context, change func() (func(context.Context) error, error)) error {
	c.mu.Lock()
	wait, err := change()
	c.mu.Unlock()
	if err != nil || wait == nil {
		return err
	}
	return wait(ctx)
}

// Configs returns a copy of the group's config overrides.
func (c *Coordinator) Configs(groupID string) map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]string{}
	if g := c.groups[groupID]; g != nil {
		for k, v := range g.configs {
			out[k] = v
		}
	}
	return out
}

// ConfigDef is one group config with its default, for DescribeConfigs.
type ConfigDef struct {
	Name, Default, Type, Doc string
}

// ConfigDefs lists the share-group configs SetConfig accepts.
var ConfigDefs = []ConfigDef{
	{ConfigAutoOffsetReset, "latest", "STRING", "where a new share-partition starts: latest or earliest"},
	{ConfigDeliveryLimit, strconv.Itoa(DefaultDeliveryLimit), "INT", "deliveries of a record before it is archived"},
	{ConfigIsolationLevel, "read_uncommitted", "STRING", "read_uncommitted or read_committed"},
	{ConfigLockDuration, strconv.FormatInt(DefaultLockDuration.Milliseconds(), 10), "INT", "acquisition lock duration in milliseconds"},
	{ConfigSessionTimeout, strconv.FormatInt(DefaultSessionTimeout.Milliseconds(), 10), "INT", "member session timeout in milliseconds"},
}

var errBadValue = fmt.Errorf("%w: bad value", kerr.InvalidConfig)

func validConfig(name, v string) error {
	switch name {
	case ConfigAutoOffsetReset:
		if v != "latest" && v != "earliest" {
			return errBadValue
		}
	case ConfigIsolationLevel:
		if v != "read_uncommitted" && v != "read_committed" {
			return errBadValue
		}
	case ConfigLockDuration, ConfigDeliveryLimit, ConfigSessionTimeout:
		if n, err := strconv.ParseInt(v, 10, 32); err != nil || n <= 0 {
			return errBadValue
		}
	default:
		return fmt.Errorf("%w: unknown group config %q", kerr.InvalidConfig, name)
	}
	return nil
}

// Assignment is one member's heartbeat answer: its epoch and its partitions.
type Assignment struct {
	MemberID    string
	MemberEpoch int32
	Partitions  map[string][]int32 // topic -> partitions
}

// Heartbeat is ShareGroupHeartbeat v1 (KIP-932; KIP-1082: the client
// generates the member ID and keeps it for its lifetime): memberEpoch 0
// joins (or rejoins) with a non-empty subscription, -1 leaves, anything
// else is a heartbeat of a known member. topics nil keeps the
// subscription. Errors, as Kafka's GroupMetadataManager: kerr.InvalidRequest
// (group or member ID empty or only spaces, epoch below -1, a join with no
// subscription), kerr.GroupIDNotFound (a leave or heartbeat naming a group
// that does not exist), kerr.UnknownMemberID (a leave or heartbeat of a
// member not in the group), kerr.FencedMemberEpoch.
func (c *Coordinator) Heartbeat(groupID, memberID string, memberEpoch int32, topics []string, resolve Topics) (Assignment, error) {
	switch {
	case strings.TrimSpace(groupID) == "":
		return Assignment{}, fmt.Errorf("%w: GroupId can't be empty", kerr.InvalidRequest)
	case strings.TrimSpace(memberID) == "":
		return Assignment{}, fmt.Errorf("%w: MemberId can't be empty (KIP-1082: the client generates it)", kerr.InvalidRequest)
	case memberEpoch < -1:
		return Assignment{}, fmt.Errorf("%w: MemberEpoch is invalid", kerr.InvalidRequest)
	case memberEpoch == 0 && len(topics) == 0:
		return Assignment{}, fmt.Errorf("%w: SubscribedTopicNames must be set in first request", kerr.InvalidRequest)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	// Only a join creates the group: a leave or a heartbeat naming a group
	// that does not exist must not leave an empty group behind, or any client
	// could fill the coordinator's memory with made-up group IDs.
	g := c.groupLocked(groupID, memberEpoch == 0)
	if g == nil {
		return Assignment{}, kerr.GroupIDNotFound
	}
	c.expireMembersLocked(g, now)
	m := g.members[memberID]
	switch {
	case memberEpoch == -1:
		if m == nil {
			return Assignment{}, kerr.UnknownMemberID
		}
		c.removeMemberLocked(g, memberID)
		return Assignment{MemberID: memberID, MemberEpoch: -1}, nil
	case memberEpoch == 0:
		if m == nil {
			m = &member{}
			g.members[memberID] = m
		}
		g.epoch++
	case m == nil:
		return Assignment{}, kerr.UnknownMemberID
	case memberEpoch > m.epoch:
		return Assignment{}, kerr.FencedMemberEpoch
	}
	if topics != nil && !equalStrings(topics, m.topics) {
		m.topics = append([]string(nil), topics...)
		g.epoch++
	}
	m.epoch = g.epoch
	m.deadline = now.Add(g.duration(ConfigSessionTimeout, DefaultSessionTimeout))
	return Assignment{MemberID: memberID, MemberEpoch: m.epoch, Partitions: m.assignment(resolve)}, nil
}

// assignment is every partition of every subscribed topic that exists.
func (m *member) assignment(resolve Topics) map[string][]int32 {
	out := map[string][]int32{}
	for _, t := range m.topics {
		n, ok := resolve(t)
		if !ok {
			continue
		}
		ps := make([]int32, n)
		for i := range ps {
			ps[i] = int32(i)
		}
		out[t] = ps
	}
	return out
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// expireMembersLocked removes members whose session timed out.
func (c *Coordinator) expireMembersLocked(g *group, now time.Time) {
	for id, m := range g.members {
		if !m.deadline.After(now) {
			c.removeMemberLocked(g, id)
		}
	}
}

func (c *Coordinator) removeMemberLocked(g *group, id string) {
	if m := g.members[id]; m != nil {
		c.endSessionLocked(m)
	}
	delete(g.members, id)
	g.epoch++
	c.releaseMemberLocked(g, id)
}

// releaseMemberLocked releases every record member holds in g's
// share-partitions, wakes parked ShareFetches if any was, and returns the
// share-partitions that changed.
func (c *Coordinator) releaseMemberLocked(g *group, member string) []TP {
	var changed []TP
	for tp, sp := range g.parts {
		if sp.releaseMember(member, g.limit()) {
			changed = append(changed, tp)
		}
	}
	if len(changed) > 0 {
		c.wakeLocked()
	}
	return changed
}

// Member describes one member for ShareGroupDescribe.
type Member struct {
	ID          string
	ClientID    string
	Host        string
	Epoch       int32
	Topics      []string
	Assignments map[string][]int32
}

// GroupInfo describes a group for ShareGroupDescribe; ok false if unknown.
type GroupInfo struct {
	Epoch   int32
	State   string // Empty or Stable
	Members []Member
}

// SetMemberClient records the client ID and host a member's heartbeat
// came from, for ShareGroupDescribe; an unknown member is ignored.
func (c *Coordinator) SetMemberClient(groupID, memberID, clientID, host string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if g := c.groups[groupID]; g != nil {
		if m := g.members[memberID]; m != nil {
			m.clientID, m.host = clientID, host
		}
	}
}

// state is the group's KIP-932 state: Empty without members, else Stable
// (assignment is immediate, so a share group is never reconciling).
func (g *group) state() string {
	if len(g.members) > 0 {
		return "Stable"
	}
	return "Empty"
}

// List returns every share group's ID and state (ListGroups), by ID.
func (c *Coordinator) List() []GroupState {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	out := make([]GroupState, 0, len(c.groups))
	for id, g := range c.groups {
		c.expireMembersLocked(g, now)
		out = append(out, GroupState{ID: id, State: g.state()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// GroupState is one share group in List.
type GroupState struct {
	ID, State string
}

// Describe returns a group's members (ShareGroupDescribe).
func (c *Coordinator) Describe(groupID string, resolve Topics) (GroupInfo, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[groupID]
	if g == nil {
		return GroupInfo{}, false
	}
	c.expireMembersLocked(g, c.now())
	info := GroupInfo{Epoch: g.epoch, State: g.state()}
	ids := make([]string, 0, len(g.members))
	for id := range g.members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		m := g.members[id]
		info.Members = append(info.Members, Member{ID: id, ClientID: m.clientID, Host: m.host, Epoch: m.epoch, Topics: m.topics, Assignments: m.assignment(resolve)})
	}
	return info, true
}

// Share-session epochs of ShareFetch and ShareAcknowledge (KIP-932,
// ShareRequestMetadata): 0 opens a session, -1 closes it, others must
// equal the session's current epoch.
const (
	SessionOpen  int32 = 0
	SessionClose int32 = -1
)

// nextSessionEpoch is the epoch after e: MaxInt32 wraps to 1, never to the
// reserved 0 and -1 (Kafka's ShareRequestMetadata.nextEpoch).
func nextSessionEpoch(e int32) int32 {
	if e == 1<<31-1 {
		return 1
	}
	return e + 1
}

// sessionMemberLocked returns the group's live member memberID.
// Errors: kerr.UnknownMemberID.
func (c *Coordinator) sessionMemberLocked(groupID, memberID string) (*group, *member, error) {
	g := c.groups[groupID]
	if g == nil {
		return nil, nil, kerr.UnknownMemberID
	}
	c.expireMembersLocked(g, c.now())
	m := g.members[memberID]
	if m == nil {
		return nil, nil, kerr.UnknownMemberID
	}
	return g, m, nil
}

// FetchSession is a ShareFetch's share-session step (Kafka's
// SharePartitionManager.newContext), taken before its acknowledgements are
// applied, and returns the session's partitions to fetch, sorted. Epoch 0
// replaces any session with a new one holding add (acknowledgements are
// not allowed then: INVALID_REQUEST), and the next epoch is 1; -1 needs an
// open session and returns no partitions (the caller applies the
// acknowledgements, then CloseSession); any other epoch must be the
// session's, adds add and drops forget, and moves the epoch on. Errors:
// kerr.UnknownMemberID (not a member), kerr.InvalidRequest,
// kerr.ShareSessionNotFound (no session open), kerr.InvalidShareSessionEpoch.
//
// A session belongs to the connection that opened it (conn is closed when
// that connection ends; nil: never), as in Kafka 4.1's ShareSessionCache:
// a request on another connection continues it at its next epoch, but
// when the opening connection closes the session ends and the member's
// acquired records are released at once (Kafka's onMemberLeave), instead
// of waiting out their locks; the client then gets SHARE_SESSION_NOT_FOUND
// and opens a new session. Opening a session when
// group.share.max.share.sessions are open is SHARE_SESSION_LIMIT_REACHED
// (kerr.ShareSessionLimitReached), as in Kafka, which refuses rather than
// evicts; replacing the member's own session is always allowed.
func (c *Coordinator) FetchSession(groupID, memberID string, epoch int32, add, forget []TP, hasAcks bool, conn <-chan struct{}) ([]TP, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, m, err := c.sessionMemberLocked(groupID, memberID)
	if err != nil {
		return nil, err
	}
	switch {
	case epoch == SessionOpen:
		if hasAcks {
			return nil, fmt.Errorf("%w: acknowledgements in a ShareFetch that opens a share session", kerr.InvalidRequest)
		}
		c.endSessionLocked(m)
		if c.sessions >= c.lim.MaxShareSessions {
			return nil, fmt.Errorf("%w: %d share sessions open (group.share.max.share.sessions)", kerr.ShareSessionLimitReached, c.sessions)
		}
		c.sessions++
		m.session, m.sessionEpoch, m.sessionEnd = map[TP]struct{}{}, 1, make(chan struct{})
		if conn != nil {
			go c.watchSession(groupID, memberID, m.sessionEnd, conn)
		}
	case m.session == nil:
		return nil, kerr.ShareSessionNotFound
	case epoch == SessionClose:
		return nil, nil
	case epoch != m.sessionEpoch:
		return nil, fmt.Errorf("%w: got %d, the session is at %d", kerr.InvalidShareSessionEpoch, epoch, m.sessionEpoch)
	default:
		m.sessionEpoch = nextSessionEpoch(m.sessionEpoch)
	}
	for _, tp := range add {
		m.session[tp] = struct{}{}
	}
	for _, tp := range forget {
		delete(m.session, tp)
	}
	out := make([]TP, 0, len(m.session))
	for tp := range m.session {
		out = append(out, tp)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out, nil
}

// AckSession is a ShareAcknowledge's share-session step (Kafka's
// acknowledgeSessionUpdate), taken before its acknowledgements are
// applied: the epoch must be the open session's (it then moves on) or -1
// (the caller applies the acknowledgements, then CloseSession). Errors:
// kerr.UnknownMemberID, kerr.InvalidShareSessionEpoch (epoch 0: a
// ShareAcknowledge cannot open a session; or a stale epoch),
// kerr.ShareSessionNotFound.
func (c *Coordinator) AckSession(groupID, memberID string, epoch int32) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, m, err := c.sessionMemberLocked(groupID, memberID)
	switch {
	case err != nil:
		return err
	case epoch == SessionOpen:
		return fmt.Errorf("%w: a ShareAcknowledge cannot open a share session", kerr.InvalidShareSessionEpoch)
	case m.session == nil:
		return kerr.ShareSessionNotFound
	case epoch == SessionClose:
		return nil
	case epoch != m.sessionEpoch:
		return fmt.Errorf("%w: got %d, the session is at %d", kerr.InvalidShareSessionEpoch, epoch, m.sessionEpoch)
	}
	m.sessionEpoch = nextSessionEpoch(m.sessionEpoch)
	return nil
}

// CloseSession ends the member's share session (epoch -1) and releases
// every record it still holds, persisting the change. Errors:
// kerr.UnknownMemberID, or the state log's error.
func (c *Coordinator) CloseSession(ctx context.Context, groupID, memberID string) error {
	return c.durably(ctx, func() (func(context.Context) error, error) {
		g, m, err := c.sessionMemberLocked(groupID, memberID)
		if err != nil {
			return nil, err
		}
		c.endSessionLocked(m)
		changed := c.releaseMemberLocked(g, memberID)
		if len(changed) == 0 {
			return nil, nil
		}
		return c.appendLocked(c.partChangesLocked(g, changed)...)
	})
}

// endSessionLocked ends m's share session, if one is open.
func (c *Coordinator) endSessionLocked(m *member) {
	if m.session == nil {
		return
	}
	close(m.sessionEnd)
	m.session, m.sessionEpoch, m.sessionEnd = nil, 0, nil
	c.sessions--
}

// watchSession waits for the connection that opened a share session to
// close, then ends that session (if it is still open: not closed,
// replaced or ended with its member meanwhile) and releases every record
// the member holds, waking parked ShareFetches. It returns when either
// ends: the session owns it.
func (c *Coordinator) watchSession(groupID, memberID string, end <-chan struct{}, conn <-chan struct{}) {
	select {
	case <-end:
		return
	case <-conn:
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[groupID]
	if g == nil {
		return
	}
	m := g.members[memberID]
	if m == nil || m.sessionEnd != end {
		return
	}
	c.endSessionLocked(m)
	c.releaseMemberLocked(g, memberID)
}

// partLocked returns the share-partition, creating it with its SPSO at
// logStart (share.auto.offset.reset=earliest) or hw (latest, the default).
// An SPSO below logStart (records deleted) moves up to it.
func (c *Coordinator) partLocked(g *group, tp TP, logStart, hw int64) *sharePartition {
	sp := g.parts[tp]
	if sp == nil {
		off := hw
		if g.configs[ConfigAutoOffsetReset] == "earliest" {
			off = logStart
		}
		sp = &sharePartition{start: off, end: off, recs: map[int64]*rec{}}
		g.parts[tp] = sp
	}
	if sp.start < logStart {
		for o := sp.start; o < logStart && o < sp.end; o++ {
			delete(sp.recs, o)
		}
		sp.start = logStart
		if sp.end < logStart {
			sp.end = logStart
		}
	}
	return sp
}

// ReadFrom returns the offset a ShareFetch should read tp from (the lowest
// available offset, else the SPEO), after expiring acquisition locks, and
// room, the most records an acquisition could lock now (available ones in
// the window plus what the window may grow by under
// group.share.partition.max.record.locks), so the read can be bounded to
// what can be acquired; ok is false when nothing below bound can be
// acquired. logStart and hw are the partition's log start and high
// watermark (for the SPSO's initialisation).
func (c *Coordinator) ReadFrom(groupID string, tp TP, logStart, hw, bound int64) (from int64, room int, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[groupID]
	if g == nil {
		return 0, 0, false
	}
	sp := c.partLocked(g, tp, logStart, hw)
	if sp.expire(c.now(), g.limit()) {
		// Records archived at the limit must stay archived; nothing waits
		// on it, and a failed append is retried by the next change.
		_, _ = c.appendLocked(c.partChangeLocked(g, tp, false))
	}
	off := sp.firstAvailable()
	room = sp.room(c.lim.MaxRecordLocks)
	return off, room, off < bound && room > 0
}

// Acquire locks up to max records of spans, read from the log at from, for
// member (ShareFetch's acquisition) and returns the acquired runs. The new
// delivery counts are persisted before it returns, so a crash after the
// records went out cannot hand them out again under the same count (the
// delivery-count limit holds over restarts). wholeBatches makes max a
// soft limit (KIP-1206 batch_optimized: the batch reaching it is acquired
// to its end); without it at most max are acquired (record_limit).
// Errors: the state log's; nothing is acquired then.
func (c *Coordinator) Acquire(ctx context.Context, groupID, memberID string, tp TP, from int64, spans []Span, bound int64, max int, wholeBatches bool) ([]Acquired, error) {
	var acq []Acquired
	err := c.durably(ctx, func() (func(context.Context) error, error) {
		g := c.groups[groupID]
		if g == nil || g.members[memberID] == nil {
			return nil, nil
		}
		sp := g.parts[tp]
		if sp == nil {
			return nil, nil
		}
		acq = sp.acquire(from, spans, bound, memberID, c.now().Add(g.duration(ConfigLockDuration, DefaultLockDuration)), max, g.limit(), c.lim.MaxRecordLocks, wholeBatches)
		if len(acq) == 0 {
			return nil, nil
		}
		wait, err := c.appendLocked(c.partChangeLocked(g, tp, false))
		if err != nil {
			sp.unacquire(acq)
			acq = nil
		}
		return wait, err
	})
	if err != nil {
		return nil, err
	}
	return acq, nil
}

// NextExpiry is the earliest acquisition-lock deadline in the group (zero:
// none), for long-polling ShareFetches to wake at.
func (c *Coordinator) NextExpiry(groupID string) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	var t time.Time
	g := c.groups[groupID]
	if g == nil {
		return t
	}
	for _, sp := range g.parts {
		for _, r := range sp.recs {
			if r.state == stateAcquired && (t.IsZero() || r.lock.Before(t)) {
				t = r.lock
			}
		}
	}
	return t
}

// Ack is one acknowledgement batch: offsets [First, Last] and either one
// type for all or one per offset (KIP-932 AcknowledgementBatches).
type Ack struct {
	First, Last int64
	Types       []int8
}

// knownTypes reports whether every type is an AcknowledgeType (AckGap to
// AckRenew). It is checked before the batch touches any record so that an
// unknown type fails the whole batch with INVALID_REQUEST whatever offsets it
// names, instead of applying the offsets before it, or passing unnoticed on
// offsets outside [SPSO, SPEO).
func knownTypes(types []int8) bool {
	for _, t := range types {
		if t < AckGap || t > AckRenew {
			return false
		}
	}
	return true
}

// nonGap reports whether any type of an acknowledgement batch for the
// batch-relative offsets [i, j] is not AckGap (one type: it covers all).
func nonGap(types []int8, i, j int64) bool {
	if len(types) == 1 {
		return types[0] != AckGap
	}
	for k := i; k <= j; k++ {
		if types[k] != AckGap {
			return true
		}
	}
	return false
}

// Acknowledge applies acks to tp's in-flight records held by memberID and
// persists the result before returning. Errors: kerr.InvalidRecordState
// when an offset is not acquired by this member (lock expired, already
// acknowledged), kerr.InvalidRequest for malformed batches, or the
// state log's error.
func (c *Coordinator) Acknowledge(ctx context.Context, groupID, memberID string, tp TP, acks []Ack) error {
	var bad error
	if err := c.durably(ctx, func() (func(context.Context) error, error) {
		if bad = c.acknowledgeLocked(groupID, memberID, tp, acks); bad == errNothingAcked {
			return nil, nil
		}
		return c.appendLocked(c.partChangesLocked(c.groups[groupID], []TP{tp})...)
	}); err != nil {
		return err
	}
	return bad
}

// errNothingAcked is acknowledgeLocked's answer for a group or partition
// with no state: INVALID_RECORD_STATE, and nothing to persist.
var errNothingAcked = fmt.Errorf("%w: no share state", kerr.InvalidRecordState)

// acknowledgeLocked applies acks (see Acknowledge) and returns the
// batches' error.
func (c *Coordinator) acknowledgeLocked(groupID, memberID string, tp TP, acks []Ack) error {
	g := c.groups[groupID]
	if g == nil {
		return errNothingAcked
	}
	sp := g.parts[tp]
	if sp == nil {
		return errNothingAcked
	}
	var bad error
	now := c.now()
	sp.expire(now, g.limit())
	woke := false
	for _, a := range acks {
		if a.Last < a.First || len(a.Types) == 0 || (len(a.Types) != 1 && int64(len(a.Types)) != a.Last-a.First+1) || !knownTypes(a.Types) {
			bad = kerr.InvalidRequest
			continue
		}
		// Offsets outside [SPSO, SPEO) are not acquired by anyone: below
		// the SPSO they are already acknowledged or archived, at or past
		// the SPEO never delivered. Kafka's SharePartition finds no cached
		// batch for them and answers INVALID_RECORD_STATE; a GAP names
		// offsets the log no longer holds, which is no claim on a record.
		if (a.First < sp.start && nonGap(a.Types, 0, min64(a.Last, sp.start-1)-a.First)) ||
			(a.Last >= sp.end && nonGap(a.Types, max64(a.First, sp.end)-a.First, a.Last-a.First)) {
			bad = kerr.InvalidRecordState
		}
		// Only [SPSO, SPEO) holds state, so a batch claiming a huge range
		// costs no more than the records in flight.
		for o := max64(a.First, sp.start); o <= a.Last && o < sp.end; o++ {
			t := a.Types[0]
			if len(a.Types) > 1 {
				t = a.Types[o-a.First]
			}
			r, ok := sp.recs[o]
			if !ok {
				continue // a gap, or already archived and dropped
			}
			if r.state != stateAcquired || r.member != memberID {
				bad = kerr.InvalidRecordState
				continue
			}
			switch t {
			case AckAccept:
				r.state, r.member, r.lock = stateAcknowledged, "", time.Time{}
			case AckGap, AckReject:
				r.state, r.member, r.lock = stateArchived, "", time.Time{}
			case AckRelease:
				release(r, g.limit())
				woke = true
			case AckRenew:
				r.lock = now.Add(g.duration(ConfigLockDuration, DefaultLockDuration))
			default:
				bad = kerr.InvalidRequest
			}
		}
	}
	sp.advance()
	if woke {
		c.wakeLocked()
	}
	return bad
}

// Delete removes an empty share group and its state (DeleteGroups).
// Errors: kerr.GroupIDNotFound, kerr.NonEmptyGroup.
func (c *Coordinator) Delete(ctx context.Context, groupID string) error {
	return c.durably(ctx, func() (func(context.Context) error, error) {
		g, err := c.emptyGroupLocked(groupID)
		if err != nil {
			return nil, err
		}
		chs := []change{{rec: Record{Key: groupKey(groupID)}, tomb: true}}
		for tp := range g.parts {
			chs = append(chs, change{rec: Record{Key: partKey(groupID, tp)}, tomb: true})
		}
		delete(c.groups, groupID)
		return c.appendLocked(chs...)
	})
}

// emptyGroupLocked returns a group that exists and has no members (after
// expiring timed-out ones). Errors: kerr.GroupIDNotFound, kerr.NonEmptyGroup.
func (c *Coordinator) emptyGroupLocked(groupID string) (*group, error) {
	g := c.groups[groupID]
	if g == nil {
		return nil, kerr.GroupIDNotFound
	}
	c.expireMembersLocked(g, c.now())
	if len(g.members) > 0 {
		return nil, kerr.NonEmptyGroup
	}
	return g, nil
}

// Has reports whether groupID is a share group.
func (c *Coordinator) Has(groupID string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.groups[groupID] != nil
}

// SetStartOffset is AlterShareGroupOffsets for one partition: the SPSO and
// SPEO move to offset and all in-flight state of the partition is dropped,
// so delivery restarts there. It creates the group if needed and persists
// the change. Errors: kerr.NonEmptyGroup while the group has members
// (KIP-932 requires an empty group), kerr.InvalidRequest for offset < 0.
func (c *Coordinator) SetStartOffset(ctx context.Context, groupID string, tp TP, offset int64) error {
	if groupID == "" || offset < 0 {
		return kerr.InvalidRequest
	}
	return c.durably(ctx, func() (func(context.Context) error, error) {
		g := c.groupLocked(groupID, true)
		c.expireMembersLocked(g, c.now())
		if len(g.members) > 0 {
			return nil, kerr.NonEmptyGroup
		}
		g.parts[tp] = &sharePartition{start: offset, end: offset, recs: map[int64]*rec{}}
		return c.appendLocked(change{rec: groupRecord(g), need: true}, c.partChangeLocked(g, tp, true))
	})
}

// Lag is a share-partition's lag (KIP-1226, DescribeShareGroupOffsets v1)
// against the log end offset end: the records from the SPSO to end not
// yet acknowledged or archived; ok is false for a partition the group has
// not initialised (Kafka answers -1).
func (c *Coordinator) Lag(groupID string, tp TP, end int64) (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[groupID]
	if g == nil || g.parts[tp] == nil {
		return 0, false
	}
	sp := g.parts[tp]
	lag := end - sp.start
	for o, r := range sp.recs {
		if o < end && (r.state == stateAcknowledged || r.state == stateArchived) {
			lag--
		}
	}
	// Gaps inside the window (offsets the log does not hold) are no
	// records to deliver either.
	for o := sp.start; o < min64(sp.end, end); o++ {
		if sp.recs[o] == nil {
			lag--
		}
	}
	return max64(lag, 0), true
}

// StartOffsets returns every initialised share-partition of the group with
// its SPSO (DescribeShareGroupOffsets with no topics); ok is false for an
// unknown group.
func (c *Coordinator) StartOffsets(groupID string) (map[TP]int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[groupID]
	if g == nil {
		return nil, false
	}
	out := make(map[TP]int64, len(g.parts))
	for tp, sp := range g.parts {
		out[tp] = sp.start
	}
	return out, true
}

// DeleteTopicState is DeleteShareGroupOffsets for one topic: every
// share-partition of topic is forgotten (the next fetch starts at
// share.auto.offset.reset again) and the change persisted. Errors:
// kerr.GroupIDNotFound, kerr.NonEmptyGroup while the group has members.
func (c *Coordinator) DeleteTopicState(ctx context.Context, groupID, topic string) error {
	return c.durably(ctx, func() (func(context.Context) error, error) {
		g, err := c.emptyGroupLocked(groupID)
		if err != nil {
			return nil, err
		}
		var chs []change
		for tp := range g.parts {
			if tp.Topic == topic {
				delete(g.parts, tp)
				chs = append(chs, change{rec: Record{Key: partKey(groupID, tp)}, tomb: true})
			}
		}
		return c.appendLocked(chs...)
	})
}
