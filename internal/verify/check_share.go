package verify

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// The share-group (KIP-932) checks. A record's deliveries are told apart
// by their delivery count (every acquisition raises it), and each
// acknowledgement names the delivery it answered by that count.
//
// Not every acquisition is seen: one whose ShareFetch response died with
// the broker (kill, pause) or with the member (client crash, or a member
// closed while a fetch was in flight, whose records the client releases)
// raised the count with no deliver event. Each such fault hides at most one
// acquisition of a record, so a record whose deliveries end below the
// limit without an accept or reject is archived legitimately only if
// enough of those faults came after its last seen delivery ("cut short");
// otherwise the broker archived it early or lost it.

// shareRec is what the history says about one share record.
type shareRec struct {
	deliveries []*Event           // by T
	acks       map[int32][]*Event // by delivery count
}

// shareIndex is the history's share events arranged per record.
type shareIndex struct {
	recs   map[idKey]*shareRec
	starts []*Event // KindShareStart
	// hidersT are the times of events after which an acquisition may have
	// gone unseen: broker kills, power cuts and pauses, and share members'
	// exits.
	hidersT []int64
}

func (ix *index) addShare(e *Event) {
	s := &ix.share
	if s.recs == nil {
		s.recs = map[idKey]*shareRec{}
	}
	r := func() *shareRec {
		k := idKey{e.Topic, e.ID}
		r := s.recs[k]
		if r == nil {
			r = &shareRec{acks: map[int32][]*Event{}}
			s.recs[k] = r
		}
		return r
	}
	switch e.Kind {
	case KindDeliver:
		r().deliveries = append(r().deliveries, e)
	case KindShareAck:
		r().acks[e.Gen] = append(r().acks[e.Gen], e)
	case KindShareStart:
		s.starts = append(s.starts, e)
	}
}

// shareDropWindow bounds how long after a drop fault on ShareFetch is
// armed the proxy drops a response: the next ShareFetch answered, within
// one long poll (franz-go's FetchMaxWait, 5 s) of the members polling.
const shareDropWindow = 10 * time.Second

// noteHider records events that may hide a share acquisition.
func (ix *index) noteHider(e *Event) {
	t := e.T
	switch {
	case e.Kind == KindFault && (e.Fault == string(FaultKill) || e.Fault == string(FaultPowerCut) || e.Fault == string(FaultPause)):
	case e.Kind == KindFault && e.Fault == string(FaultDrop) && e.W == fmt.Sprintf("api %d", apiShareFetch):
		// Armed at T, the drop happens at the next ShareFetch response.
		t += int64(shareDropWindow)
	case e.Kind == KindExit && ix.isShareMember(e.W):
	default:
		return
	}
	ix.share.hidersT = append(ix.share.hidersT, t)
}

// isShareMember reports whether worker instance w ("<slot>.<n>") belongs
// to a share-member slot.
func (ix *index) isShareMember(w string) bool {
	slot, _, _ := strings.Cut(w, ".")
	for _, s := range ix.plan.Slots {
		if s.Slot == slot {
			return s.Role == WorkerShare
		}
	}
	return false
}

// shareLimit returns the delivery-count limit of topic's share group.
func (ix *index) shareLimit(topic string) int {
	for _, g := range ix.plan.ShareGroups {
		if g.Topic == topic {
			return g.DeliveryLimit
		}
	}
	return 0
}

// shareRecords returns the share records of sem's topics in the final
// read_uncommitted scan, in scan order, with their history.
func (ix *index) shareRecords(sem Semantic) []shareEntry {
	var out []shareEntry
	for _, e := range ix.scanRU {
		if ix.sem(e.Topic) != sem || ix.role(e.Topic) != RoleShare || !isWorkloadID(e.ID) {
			continue
		}
		k := idKey{e.Topic, e.ID}
		if ix.ru.first[k] != e {
			continue // dup-log counts a second copy
		}
		r := ix.share.recs[k]
		if r == nil {
			r = &shareRec{}
		}
		out = append(out, shareEntry{scan: e, rec: r, limit: ix.shareLimit(e.Topic)})
	}
	return out
}

type shareEntry struct {
	scan  *Event
	rec   *shareRec
	limit int
}

// last is the delivery with the highest count (nil: never delivered).
func (r *shareRec) last() *Event {
	var best *Event
	for _, d := range r.deliveries {
		if best == nil || d.Gen > best.Gen {
			best = d
		}
	}
	return best
}

// confirmed returns the first confirmed acknowledgement of type a for the
// delivery with count n.
func (r *shareRec) confirmed(n int32, a AckType) *Event {
	for _, k := range r.acks[n] {
		if k.Commit && k.Ack == a {
			return k
		}
	}
	return nil
}

// outcome is how a share record ended, per its history.
type shareOutcome int

const (
	shareLost        shareOutcome = iota // unexplained: no accept or reject, below the limit
	shareAccepted                        // its last delivery was accepted
	shareRejected                        // its last delivery was rejected
	shareArchived                        // delivered up to the limit, never accepted or rejected
	shareArchivedCut                     // below the limit, but enough faults after its last delivery could have hidden the rest
)

func (ix *index) shareOutcome(s shareEntry) shareOutcome {
	last := s.rec.last()
	var from int64
	count := int32(0)
	if last != nil {
		for _, k := range s.rec.acks[last.Gen] {
			switch k.Ack {
			case AckAccept:
				return shareAccepted
			case AckReject:
				return shareRejected
			}
		}
		from, count = last.T, last.Gen
	}
	if int(count) >= s.limit {
		return shareArchived
	}
	hidden := len(ix.share.hidersT) - countNotAfter(ix.share.hidersT, from)
	if int(count)+hidden >= s.limit {
		return shareArchivedCut
	}
	return shareLost
}

// countNotAfter is the number of times in ts (unsorted) not after t.
func countNotAfter(ts []int64, t int64) int {
	n := 0
	for _, x := range ts {
		if x <= t {
			n++
		}
	}
	return n
}

// shareLostRecords: every share record in the log ended accepted, rejected or
// archived after the delivery-count limit.
func (ix *index) shareLostRecords(sem Semantic) tally {
	var t tally
	for _, s := range ix.shareRecords(sem) {
		if ix.shareOutcome(s) != shareLost {
			continue
		}
		if last := s.rec.last(); last == nil {
			t.add("%s at %s/%d@%d never delivered", s.scan.ID, s.scan.Topic, s.scan.Part, s.scan.Off)
		} else {
			t.add("%s at %s/%d@%d last delivered to %s with count %d (limit %d), %s; never delivered again",
				s.scan.ID, s.scan.Topic, s.scan.Part, s.scan.Off, last.W, last.Gen, s.limit, fmtShareAcks(s.rec.acks[last.Gen]))
		}
	}
	return t
}

func fmtShareAcks(acks []*Event) string {
	if len(acks) == 0 {
		return "no acknowledgement"
	}
	var parts []string
	for _, k := range acks {
		if k.Commit {
			parts = append(parts, k.Ack.String()+" confirmed")
		} else {
			parts = append(parts, k.Ack.String()+" unknown ("+k.Err+")")
		}
	}
	return strings.Join(parts, ", ")
}

// sharePoison: a poison record is released on every delivery, so it ends
// archived; accepted or rejected means an acknowledgement nobody sent
// took effect (franz-go accepts what a poll left unacknowledged).
func (ix *index) sharePoison(sem Semantic) tally {
	var t tally
	for _, s := range ix.shareRecords(sem) {
		if !isPoison(s.scan.ID) {
			continue
		}
		switch o := ix.shareOutcome(s); o {
		case shareAccepted, shareRejected:
			last := s.rec.last()
			t.add("poison %s ended %s at count %d by %s", s.scan.ID, fmtShareAcks(s.rec.acks[last.Gen]), last.Gen, last.W)
		}
	}
	return t
}

// shareAfterConfirmed counts records delivered again after a confirmed
// acknowledgement of type a (accept: also a second confirmed accept).
func (ix *index) shareAfterConfirmed(sem Semantic, a AckType) tally {
	var t tally
	for _, s := range ix.shareRecords(sem) {
		for _, d := range s.rec.deliveries {
			k := s.rec.confirmed(d.Gen, a)
			if k == nil {
				continue
			}
			if later := s.rec.after(d.Gen); later != nil {
				t.add("%s %s by %s (count %d, confirmed), then delivered to %s with count %d",
					s.scan.ID, a, k.W, d.Gen, later.W, later.Gen)
				break
			}
		}
	}
	return t
}

// after returns a delivery with a count above n, if any.
func (r *shareRec) after(n int32) *Event {
	for _, d := range r.deliveries {
		if d.Gen > n {
			return d
		}
	}
	return nil
}

// shareOverLimit: no delivery count outside [1, limit].
func (ix *index) shareOverLimit(sem Semantic) tally {
	var t tally
	for _, s := range ix.shareRecords(sem) {
		for _, d := range s.rec.deliveries {
			if d.Gen < 1 || int(d.Gen) > s.limit {
				t.add("%s delivered to %s with count %d (limit %d)", s.scan.ID, d.W, d.Gen, s.limit)
				break
			}
		}
	}
	return t
}

// shareCountOrder: in time order, every delivery of a record has a higher
// count than all before it (an acquisition that did not raise the count,
// or a count that went back after a restart).
func (ix *index) shareCountOrder(sem Semantic) tally {
	var t tally
	for _, s := range ix.shareRecords(sem) {
		ds := slices.Clone(s.rec.deliveries)
		slices.SortStableFunc(ds, func(a, b *Event) int { return cmp.Compare(a.T, b.T) })
		var high *Event
		for _, d := range ds {
			if high != nil && d.Gen <= high.Gen {
				t.add("%s delivered to %s with count %d after %s's delivery with count %d", s.scan.ID, d.W, d.Gen, high.W, high.Gen)
				break
			}
			high = d
		}
	}
	return t
}

// shareStartBehind: after the drain, every share-partition start offset
// (DescribeShareGroupOffsets) is at the log end: nothing left available or
// in flight.
func (ix *index) shareStartBehind(sem Semantic) tally {
	var t tally
	for _, g := range ix.plan.ShareGroups {
		if ix.sem(g.Topic) != sem {
			continue
		}
		starts := map[int32]*Event{}
		for _, e := range ix.share.starts {
			if e.W == g.Name && e.Topic == g.Topic {
				starts[e.Part] = e
			}
		}
		for p := range ix.topics[g.Topic].Partitions {
			end, ok := ix.ends[tp{g.Topic, p}]
			if !ok {
				t.add("share group %s: no end offset of %s/%d", g.Name, g.Topic, p)
				continue
			}
			switch s := starts[p]; {
			case s == nil && end > 0:
				t.add("share group %s: no start offset of %s/%d (log end %d)", g.Name, g.Topic, p, end)
			case s != nil && s.Off != end:
				t.add("share group %s: start offset of %s/%d at %d, log end %d", g.Name, g.Topic, p, s.Off, end)
			}
		}
	}
	return t
}

// ShareStats shows the share checks had something to check.
type ShareStats struct {
	Records      int `json:"records"`      // share records in the log
	Deliveries   int `json:"deliveries"`   // deliver events
	Redeliveries int `json:"redeliveries"` // deliveries with a count above 1
	Accepted     int `json:"accepted"`
	Rejected     int `json:"rejected"`
	Archived     int `json:"archived"` // at the delivery-count limit
	// ArchivedCutShort are archived below the seen limit: acquisitions hidden by faults.
	ArchivedCutShort int `json:"archived_cut_short"`
	Poison           int `json:"poison"`       // records always released
	UnknownAcks      int `json:"unknown_acks"` // acknowledgements the broker did not confirm
}

func (ix *index) shareStats() ShareStats {
	var s ShareStats
	for _, e := range ix.shareRecords(Share) {
		s.Records++
		if isPoison(e.scan.ID) {
			s.Poison++
		}
		for _, d := range e.rec.deliveries {
			s.Deliveries++
			if d.Gen > 1 {
				s.Redeliveries++
			}
		}
		for _, acks := range e.rec.acks {
			for _, k := range acks {
				if !k.Commit {
					s.UnknownAcks++
				}
			}
		}
		switch ix.shareOutcome(e) {
		case shareAccepted:
			s.Accepted++
		case shareRejected:
			s.Rejected++
		case shareArchived:
			s.Archived++
		case shareArchivedCut:
			s.ArchivedCutShort++
		}
	}
	return s
}

// shareAcceptedCount is the share records that ended accepted.
func (ix *index) shareAcceptedCount(sem Semantic) int {
	n := 0
	for _, s := range ix.shareRecords(sem) {
		if ix.shareOutcome(s) == shareAccepted {
			n++
		}
	}
	return n
}

// String is the one-line summary of the report.
func (s ShareStats) String() string {
	return fmt.Sprintf("%d records, %d deliveries (%d redeliveries), %d accepted, %d rejected, %d archived at the limit, %d archived with acquisitions hidden by faults, %d poison, %d acknowledgements unconfirmed",
		s.Records, s.Deliveries, s.Redeliveries, s.Accepted, s.Rejected, s.Archived, s.ArchivedCutShort, s.Poison, s.UnknownAcks)
}
