package share

import (
	"time"
)

// Record states of KIP-932's share-partition state machine. Available
// records may be acquired; acquired ones are locked to one member until
// acknowledged or the acquisition lock expires; acknowledged and archived
// ones are terminal and never delivered again.
const (
	stateAvailable    int8 = 0
	stateAcquired     int8 = 1
	stateAcknowledged int8 = 2
	stateArchived     int8 = 4
)

// Acknowledge types of ShareFetch and ShareAcknowledge (KIP-932,
// "AcknowledgeType"; 4 is KIP-1222's RENEW).
const (
	AckGap     int8 = 0
	AckAccept  int8 = 1
	AckRelease int8 = 2
	AckReject  int8 = 3
	AckRenew   int8 = 4
)

// Span is one stored batch as read from the log: offsets [First, Last]
// inclusive. Skip marks a batch that is never delivered to a share
// consumer (a control batch, or an aborted transaction's data under
// read_committed); its offsets are archived when reached.
type Span struct {
	First, Last int64
	Skip        bool
}

// Acquired is a run of offsets [First, Last] acquired by one ShareFetch,
// all with the same delivery count (KIP-932 AcquiredRecords).
type Acquired struct {
	First, Last   int64
	DeliveryCount int16
}

// rec is the in-flight state of one offset in [start, end).
type rec struct {
	state  int8
	count  int16     // delivery count: acquisitions so far
	member string    // the holder while acquired
	lock   time.Time // the acquisition lock's deadline while acquired
}

// sharePartition is one share-partition: the share-partition start offset
// (SPSO) start, the end offset (SPEO) end, and every offset between them.
// An offset in [start, end) with no entry in recs does not exist in the
// log (compacted away or a gap) and counts as archived.
type sharePartition struct {
	start, end int64
	recs       map[int64]*rec
	// saved is the state the state log holds (nil: none yet, the next
	// record must be a snapshot) and updates the update records written
	// since its last snapshot.
	saved   map[int64]saved
	updates int
}

// advance moves the SPSO past terminal records, dropping their state.
func (sp *sharePartition) advance() {
	for sp.start < sp.end {
		r, ok := sp.recs[sp.start]
		if ok && (r.state == stateAvailable || r.state == stateAcquired) {
			return
		}
		delete(sp.recs, sp.start)
		sp.start++
	}
}

// release makes an acquired record available again, or archives it when
// its delivery count reached limit (group.share.delivery.count.limit).
func release(r *rec, limit int) {
	r.member, r.lock = "", time.Time{}
	if int(r.count) >= limit {
		r.state = stateArchived
		return
	}
	r.state = stateAvailable
}

// expire releases every acquisition whose lock deadline is not after now
// and reports whether any was released.
func (sp *sharePartition) expire(now time.Time, limit int) bool {
	any := false
	for _, r := range sp.recs {
		if r.state == stateAcquired && !r.lock.After(now) {
			release(r, limit)
			any = true
		}
	}
	if any {
		sp.advance()
	}
	return any
}

// releaseMember releases everything member holds (it left, was removed or
// closed its share session).
func (sp *sharePartition) releaseMember(member string, limit int) bool {
	any := false
	for _, r := range sp.recs {
		if r.state == stateAcquired && r.member == member {
			release(r, limit)
			any = true
		}
	}
	if any {
		sp.advance()
	}
	return any
}

// firstAvailable is the offset a read should start at: the lowest
// available record below the SPEO, else the SPEO.
func (sp *sharePartition) firstAvailable() int64 {
	best := sp.end
	for o, r := range sp.recs {
		if r.state == stateAvailable && o < best {
			best = o
		}
	}
	return best
}

// acquire locks up to max records of spans (batches read from the log in
// offset order) for member until lockUntil. Records at or past bound (the
// high watermark or last stable offset) are never acquired. With
// wholeBatches (KIP-1206's batch_optimized acquire mode, the default) max
// is a soft limit, as in Kafka: the batch in which it is reached is
// acquired to its end, so a response never carries a stored batch only
// partly acquired by this fetch, which the client would decode whole for
// a few records; otherwise (record_limit) at most max are acquired.
//
// from is the offset the read started at: available records between from
// and the spans' end that no span covers are gone from the log (compacted
// or deleted), so they are dropped rather than waited for forever.
//
// maxLocks is group.share.partition.max.record.locks: the in-flight window
// [SPSO, SPEO) never grows past it (records past the SPEO are acquired only
// while the window has room), and the partition never holds more acquired
// records than it, whatever the mode (a limit lowered below a window
// loaded from the state log is honoured too).
func (sp *sharePartition) acquire(from int64, spans []Span, bound int64, member string, lockUntil time.Time, max, limit, maxLocks int, wholeBatches bool) []Acquired {
	var out []Acquired
	n := 0
	locks := maxLocks - sp.acquired()
	if locks <= 0 {
		return nil
	}
	next := from
	for _, s := range spans {
		for o := max64(next, sp.start); o < s.First && o < sp.end; o++ {
			if r, ok := sp.recs[o]; ok && r.state == stateAvailable {
				delete(sp.recs, o)
			}
		}
		next = s.Last + 1
		for o := max64(s.First, sp.start); o <= s.Last && o < bound && (n < max || wholeBatches) && n < locks; o++ {
			if o >= sp.end {
				if sp.end-sp.start >= int64(maxLocks) {
					break // the window is full: nothing new until the SPSO moves
				}
				// Offsets between the SPEO and this batch are gaps; they get no entry.
				if s.Skip {
					sp.end = o + 1
					continue
				}
				sp.recs[o] = &rec{}
				sp.end = o + 1
			}
			r, ok := sp.recs[o]
			if !ok || r.state != stateAvailable {
				continue
			}
			// A record already delivered limit times (the limit was
			// lowered, or its lock ended with the broker) is archived,
			// never delivered again.
			if s.Skip || int(r.count) >= limit {
				r.state = stateArchived
				continue
			}
			r.state, r.member, r.lock = stateAcquired, member, lockUntil
			r.count++
			n++
			if k := len(out) - 1; k >= 0 && out[k].Last == o-1 && out[k].DeliveryCount == r.count {
				out[k].Last = o
			} else {
				out = append(out, Acquired{First: o, Last: o, DeliveryCount: r.count})
			}
		}
		if n >= max || n >= locks {
			break
		}
	}
	sp.advance()
	return out
}

// counts is how many records of the window are available and how many
// are acquired (locked to some member).
func (sp *sharePartition) counts() (avail, acq int) {
	for _, r := range sp.recs {
		switch r.state {
		case stateAvailable:
			avail++
		case stateAcquired:
			acq++
		}
	}
	return avail, acq
}

// acquired is how many records are acquired (locked to some member).
func (sp *sharePartition) acquired() int {
	_, acq := sp.counts()
	return acq
}

// room is how many records an acquisition could lock now, at most: the
// available records in the window plus what the window may still grow by
// under maxLocks, bounded by the locks left.
func (sp *sharePartition) room(maxLocks int) int {
	avail, acq := sp.counts()
	grow := max(0, int64(maxLocks)-(sp.end-sp.start))
	return int(min(int64(avail)+grow, int64(max(0, maxLocks-acq))))
}

// unacquire undoes acquire's runs (their acquisition could not be made
// durable): the records are available again with their old counts.
func (sp *sharePartition) unacquire(acq []Acquired) {
	for _, q := range acq {
		for o := q.First; o <= q.Last; o++ {
			if r := sp.recs[o]; r != nil && r.state == stateAcquired {
				r.state, r.member, r.lock = stateAvailable, "", time.Time{}
				r.count--
			}
		}
	}
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

func min64(a, b int64) int64 {
	if a < b {
		return a
	}
	return b
}
