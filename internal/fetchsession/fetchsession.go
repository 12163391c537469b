// Package fetchsession is the broker's cache of KIP-227 incremental fetch sessions: which partitions each
// session fetches, at what offset and size, and what the last response told the client about each (high
// watermark, last stable offset, log start offset), so an incremental fetch can name only the partitions whose
// fetch position changed and be answered with only the partitions that have something new.
//
// It knows sessions, not logs: the broker resolves a request into the partitions to read (Full, Incremental),
// reads them, and asks Respond which of the results go into the response.
//
// Kafka's rules followed (FetchSession.scala, KIP-227 "Fetch Session Caching"):
//   - SessionEpoch 0 (INITIAL) is a full fetch that creates a session (closing the one named by SessionID, if
//     any); the next incremental fetch must carry epoch 1, and each one after it the next epoch (wrapping from
//     2147483647 to 1).
//   - SessionEpoch -1 (FINAL) closes the named session and is answered as a sessionless full fetch.
//   - An incremental fetch names a session that is not cached: FETCH_SESSION_ID_NOT_FOUND (ErrNotFound);
//     with the wrong epoch: INVALID_FETCH_SESSION_EPOCH (ErrInvalidEpoch). Either leaves the cache unchanged.
//   - The cache holds at most max.incremental.fetch.session.cache.slots sessions (default 1000). When full, a
//     new session evicts the least recently used session idle for min.incremental.fetch.session.eviction.ms
//     (default 120 s); failing that, the smallest session if it has fewer partitions than the new one; failing
//     that, the fetch is answered without a session (SessionID 0), which tells the client to keep sending
//     full fetches.
//   - A partition is in an incremental response when it has records or an error, or its high watermark, last
//     stable offset or log start offset changed since the session last reported it. Partitions that returned
//     records move to the end of the session's order, so under a response size limit every partition gets its
//     turn (Kafka's partition rotation).
//
// A Cache is safe for concurrent use.
package fetchsession

import (
	"container/list"
	"errors"
	"math"
	"math/rand/v2"
	"sync"
	"time"
)

// Epochs with a meaning of their own (Kafka's FetchMetadata).
const (
	InitialEpoch int32 = 0  // a full fetch that creates a session
	FinalEpoch   int32 = -1 // a full fetch that closes the session and creates none
)

// Defaults of the broker configs (Kafka's names).
const (
	DefaultSlots      = 1000              // max.incremental.fetch.session.cache.slots
	DefaultEvictAfter = 120 * time.Second // min.incremental.fetch.session.eviction.ms
)

var (
	// ErrNotFound is FETCH_SESSION_ID_NOT_FOUND: an incremental fetch names a session that is not cached.
	ErrNotFound = errors.New("fetch session ID not found")
	// ErrInvalidEpoch is INVALID_FETCH_SESSION_EPOCH: an incremental fetch carries the wrong session epoch.
	ErrInvalidEpoch = errors.New("invalid fetch session epoch")
)

// Key names a partition.
type Key struct {
	Topic     string
	Partition int32
}

// Want is one partition of a request: where to fetch from and how much (FetchOffset, PartitionMaxBytes).
type Want struct {
	Key
	FetchOffset int64
	MaxBytes    int32
}

// Result is what a read of one partition found, for Respond.
type Result struct {
	Key
	HasRecords                       bool
	ErrorCode                        int16
	HighWatermark, LastStable, Start int64
}

type cached struct {
	want           Want
	hw, lso, start int64 // as last reported to the client; -1 before the first response
	elem           *list.Element
}

// Session is one cached fetch session. Its fields are guarded by the Cache's mutex.
type Session struct {
	id       int32
	epoch    int32 // the epoch the next incremental fetch must carry
	order    list.List
	parts    map[Key]*cached
	lastUsed time.Time
}

// ID is the session's ID, for the response's SessionID.
func (s *Session) ID() int32 { return s.id }

// Cache holds the sessions of one broker.
type Cache struct {
	mu         sync.Mutex
	slots      int
	evictAfter time.Duration
	sessions   map[int32]*Session
	evictions  int64
}

// New returns a cache of at most slots sessions (0 disables sessions: every fetch is answered as a full one,
// with SessionID 0), evicting idle ones after evictAfter (0 = DefaultEvictAfter).
func New(slots int, evictAfter time.Duration) *Cache {
	if evictAfter <= 0 {
		evictAfter = DefaultEvictAfter
	}
	return &Cache{slots: max(slots, 0), evictAfter: evictAfter, sessions: map[int32]*Session{}}
}

// Len is the number of cached sessions.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.sessions)
}

// Evictions counts the sessions evicted to make room for new ones.
func (c *Cache) Evictions() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.evictions
}

// Full handles a full fetch (epoch InitialEpoch or FinalEpoch): it closes the session id names (if cached) and,
// for InitialEpoch, caches a new session of wants, returned (nil when the cache has no room, or for
// FinalEpoch). The partitions to read are wants themselves.
func (c *Cache) Full(id, epoch int32, wants []Want, now time.Time) *Session {
	c.mu.Lock()
	defer c.mu.Unlock()
	if id != 0 {
		delete(c.sessions, id)
	}
	if epoch != InitialEpoch || c.slots == 0 || len(wants) == 0 {
		return nil
	}
	if len(c.sessions) >= c.slots && !c.evictFor(len(wants), now) {
		return nil
	}
	s := &Session{id: c.newID(), epoch: 1, parts: make(map[Key]*cached, len(wants)), lastUsed: now}
	for _, w := range wants {
		s.put(w)
	}
	c.sessions[s.id] = s
	return s
}

// Incremental handles an incremental fetch (epoch > 0): it checks id and epoch (ErrNotFound, ErrInvalidEpoch,
// leaving the cache as it was), applies the request's partitions (added, or their offset and size updated) and
// forgotten ones (removed), advances the epoch, and returns the session with every partition to read, in the
// session's order.
func (c *Cache) Incremental(id, epoch int32, wants []Want, forgotten []Key, now time.Time) (*Session, []Want, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.sessions[id]
	if s == nil {
		return nil, nil, ErrNotFound
	}
	if epoch != s.epoch {
		return nil, nil, ErrInvalidEpoch
	}
	for _, w := range wants {
		s.put(w)
	}
	for _, k := range forgotten {
		if p := s.parts[k]; p != nil {
			s.order.Remove(p.elem)
			delete(s.parts, k)
		}
	}
	s.epoch = nextEpoch(s.epoch)
	s.lastUsed = now
	out := make([]Want, 0, len(s.parts))
	for e := s.order.Front(); e != nil; e = e.Next() {
		out = append(out, s.parts[e.Value.(Key)].want)
	}
	return s, out, nil
}

// Respond records what the response tells the client about each partition read for s and reports, for each
// of results (in order), whether it belongs in the response. full is true for the full fetch that created s:
// every partition is in it. Partitions that returned records move to the end of the session's order. Results
// for partitions the session no longer holds are left out.
func (c *Cache) Respond(s *Session, full bool, results []Result) []bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	include := make([]bool, len(results))
	var rotate []*cached
	for i, r := range results {
		p := s.parts[r.Key]
		if p == nil {
			continue
		}
		changed := p.hw != r.HighWatermark || p.lso != r.LastStable || p.start != r.Start
		include[i] = full || r.HasRecords || r.ErrorCode != 0 || changed
		if include[i] {
			p.hw, p.lso, p.start = r.HighWatermark, r.LastStable, r.Start
		}
		if r.HasRecords {
			rotate = append(rotate, p)
		}
	}
	for _, p := range rotate {
		s.order.MoveToBack(p.elem)
	}
	return include
}

// put adds w to the session or updates its offset and size.
func (s *Session) put(w Want) {
	if p := s.parts[w.Key]; p != nil {
		p.want = w
		return
	}
	p := &cached{want: w, hw: -1, lso: -1, start: -1}
	p.elem = s.order.PushBack(w.Key)
	s.parts[w.Key] = p
}

// evictFor makes room for a new session of n partitions, by Kafka's rules (package doc). It reports whether a
// session was evicted.
func (c *Cache) evictFor(n int, now time.Time) bool {
	var stale, smallest *Session
	for _, s := range c.sessions {
		if now.Sub(s.lastUsed) >= c.evictAfter && (stale == nil || s.lastUsed.Before(stale.lastUsed)) {
			stale = s
		}
		if smallest == nil || len(s.parts) < len(smallest.parts) {
			smallest = s
		}
	}
	victim := stale
	if victim == nil && smallest != nil && len(smallest.parts) < n {
		victim = smallest
	}
	if victim == nil {
		return false
	}
	delete(c.sessions, victim.id)
	c.evictions++
	return true
}

// newID picks a random positive ID not in use (Kafka's FetchSessionCache.newSessionId).
func (c *Cache) newID() int32 {
	for {
		id := rand.Int32N(math.MaxInt32) + 1
		if c.sessions[id] == nil {
			return id
		}
	}
}

// nextEpoch is the epoch after e: incremental epochs run 1..MaxInt32 and wrap to 1.
func nextEpoch(e int32) int32 {
	if e == math.MaxInt32 {
		return 1
	}
	return e + 1
}
