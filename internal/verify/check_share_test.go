package verify

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// shareBuilder is a clean share-group history: shr-p0.1 writes four
// records to the two partitions of kv-t-shr; the members settle them
// (limit 4):
//   - :1 at 0@0 accepted on its first delivery;
//   - :2 at 0@1 released, then rejected;
//   - :3 at 1@0 delivered to shr-m0.1, which crashed holding it, then
//     accepted with an unknown outcome (so delivered again: allowed), then
//     accepted;
//   - :25 at 1@1, poison, released on each of its 4 deliveries: archived.
//
// The share-partition start offsets end at the log end.
type shareBuilder struct {
	*builder
	topic string
}

func newShareBuilder() *shareBuilder {
	b := &shareBuilder{builder: &builder{plan: NewPlan(PlanOptions{RunID: "t", Semantics: []Semantic{Share}})}}
	b.topic = b.plan.topicOf(Share, RoleShare)
	id1 := b.write("shr-p0.1", 1, b.topic, 0, 0)
	id2 := b.write("shr-p0.1", 2, b.topic, 0, 1)
	id3 := b.write("shr-p0.1", 3, b.topic, 1, 0)
	poison := b.write("shr-p0.1", 25, b.topic, 1, 1)
	b.deliver(id1, 0, 0, "shr-m0.1", 1, AckAccept, true)
	b.deliver(id2, 0, 1, "shr-m0.1", 1, AckRelease, true)
	b.deliver(id2, 0, 1, "shr-m1.1", 2, AckReject, true)
	for n := int32(1); n <= 4; n++ {
		b.deliver(poison, 1, 1, "shr-m2.1", n, AckRelease, true)
	}
	b.add(Event{Kind: KindDeliver, W: "shr-m0.1", ID: id3, Topic: b.topic, Part: 1, Off: 0, Gen: 1})
	b.add(Event{Kind: KindFault, Fault: string(FaultClientCrash), W: "shr-m0.1"})
	b.add(Event{Kind: KindExit, W: "shr-m0.1", Err: ErrKilled.Error()})
	b.deliver(id3, 1, 0, "shr-m1.1", 2, AckAccept, false)
	b.deliver(id3, 1, 0, "shr-m2.1", 3, AckAccept, true)
	for part := range int32(2) {
		b.add(Event{Kind: KindEnd, Topic: b.topic, Part: part, Off: 2})
		b.add(Event{Kind: KindShareStart, W: b.plan.ShareGroups[0].Name, Topic: b.topic, Part: part, Off: 2})
	}
	return b
}

// deliver adds one delivery and its acknowledgement.
func (b *shareBuilder) deliver(id string, part int32, off int64, w string, count int32, ack AckType, confirmed bool) {
	b.add(Event{Kind: KindDeliver, W: w, ID: id, Topic: b.topic, Part: part, Off: off, Gen: count})
	k := Event{Kind: KindShareAck, W: w, ID: id, Topic: b.topic, Part: part, Off: off, Gen: count, Ack: ack, Commit: confirmed}
	if !confirmed {
		k.Err = "flush: context deadline exceeded"
	}
	b.add(k)
}

// removeAll drops every event matching f.
func (b *shareBuilder) removeAll(f func(e *Event) bool) {
	b.events = slices.DeleteFunc(b.events, func(e Event) bool { return f(&e) })
}

func (b *shareBuilder) check() Checked {
	return CheckHistory(b.plan, b.events, []Semantic{Share})
}

func TestCheckShareCleanHistory(t *testing.T) {
	t.Parallel()
	b := newShareBuilder()
	c := b.check()
	if got := observed(c.Findings); len(got) != 0 {
		t.Fatalf("clean history: anomalies %v", got)
	}
	for _, f := range c.Findings {
		if !f.Pass {
			t.Errorf("%s %s failed on the clean history", f.Semantic, f.Check)
		}
		if f.Check == CheckRecords && f.Observed != 2 {
			t.Errorf("records (accepted) = %d, want 2", f.Observed)
		}
	}
	want := ShareStats{Records: 4, Deliveries: 10, Redeliveries: 6, Accepted: 2, Rejected: 1, Archived: 1, Poison: 1, UnknownAcks: 1}
	if c.Share != want {
		t.Errorf("share stats %+v, want %+v", c.Share, want)
	}
}

// Each share checker reports the one violation fed to it, and no other
// checker does: none of them is blind.
func TestCheckShareOneAnomalyEach(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		mutate  func(b *shareBuilder)
		want    Check
		example string
	}{{
		name: "released below the limit, never delivered again",
		mutate: func(b *shareBuilder) {
			b.removeAll(func(e *Event) bool { return e.ID == "shr-p0.1:2" && e.Gen == 2 })
		},
		want: CheckShareLost, example: "shr-p0.1:2 at kv-t-shr/0@1 last delivered to shr-m0.1 with count 1 (limit 4), release confirmed",
	}, {
		name: "in the log, never delivered",
		mutate: func(b *shareBuilder) {
			b.write("shr-p0.1", 26, b.topic, 1, 2)
			b.find(func(e *Event) bool { return e.Kind == KindEnd && e.Part == 1 }).Off = 3
			b.find(func(e *Event) bool { return e.Kind == KindShareStart && e.Part == 1 }).Off = 3
		},
		want: CheckShareLost, example: "shr-p0.1:26 at kv-t-shr/1@2 never delivered",
	}, {
		name: "delivered again after a confirmed accept",
		mutate: func(b *shareBuilder) {
			b.deliver("shr-p0.1:1", 0, 0, "shr-m1.1", 2, AckAccept, true)
		},
		want: CheckShareDupAccept, example: "shr-p0.1:1 accept by shr-m0.1 (count 1, confirmed), then delivered to shr-m1.1 with count 2",
	}, {
		name: "delivered again after a confirmed reject",
		mutate: func(b *shareBuilder) {
			b.deliver("shr-p0.1:2", 0, 1, "shr-m2.1", 3, AckReject, true)
		},
		want: CheckShareReject, example: "shr-p0.1:2 reject by shr-m1.1 (count 2, confirmed), then delivered to shr-m2.1 with count 3",
	}, {
		name: "delivered past the limit",
		mutate: func(b *shareBuilder) {
			b.deliver("shr-p0.1:25", 1, 1, "shr-m0.2", 5, AckRelease, true)
		},
		want: CheckShareOverLimit, example: "shr-p0.1:25 delivered to shr-m0.2 with count 5 (limit 4)",
	}, {
		name: "a later delivery with a lower count",
		mutate: func(b *shareBuilder) {
			// The count-3 delivery of :3 happened first.
			b.find(func(e *Event) bool { return e.Kind == KindDeliver && e.ID == "shr-p0.1:3" && e.Gen == 3 }).T = 1
		},
		want: CheckShareCountOrder, example: "shr-p0.1:3 delivered to shr-m0.1 with count 1 after shr-m2.1's delivery with count 3",
	}, {
		name: "the same count twice",
		mutate: func(b *shareBuilder) {
			b.find(func(e *Event) bool { return e.Kind == KindDeliver && e.ID == "shr-p0.1:2" && e.Gen == 2 }).Gen = 1
			b.find(func(e *Event) bool { return e.Kind == KindShareAck && e.ID == "shr-p0.1:2" && e.Gen == 2 }).Gen = 1
		},
		want: CheckShareCountOrder, example: "shr-p0.1:2 delivered to shr-m1.1 with count 1 after shr-m0.1's delivery with count 1",
	}, {
		name: "poison record accepted",
		mutate: func(b *shareBuilder) {
			b.find(func(e *Event) bool { return e.Kind == KindShareAck && e.ID == "shr-p0.1:25" && e.Gen == 4 }).Ack = AckAccept
		},
		want: CheckSharePoison, example: "poison shr-p0.1:25 ended accept confirmed at count 4 by shr-m2.1",
	}, {
		name: "start offset short of the log end",
		mutate: func(b *shareBuilder) {
			b.find(func(e *Event) bool { return e.Kind == KindShareStart && e.Part == 1 }).Off = 1
		},
		want: CheckShareStart, example: "start offset of kv-t-shr/1 at 1, log end 2",
	}, {
		name: "no start offset",
		mutate: func(b *shareBuilder) {
			b.remove(func(e *Event) bool { return e.Kind == KindShareStart && e.Part == 0 })
		},
		want: CheckShareStart, example: "no start offset of kv-t-shr/0 (log end 2)",
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := newShareBuilder()
			c.mutate(b)
			fs := b.check().Findings
			want := string(Share) + "/" + string(c.want)
			if got := observed(fs); !reflect.DeepEqual(got, map[string]int{want: 1}) {
				t.Fatalf("anomalies %v, want %v", got, map[string]int{want: 1})
			}
			for _, f := range fs {
				if f.Check != c.want {
					continue
				}
				if f.Pass || len(f.Examples) != 1 || !strings.Contains(f.Examples[0], c.example) {
					t.Errorf("pass %v, examples %q, want one containing %q", f.Pass, f.Examples, c.example)
				}
			}
		})
	}
}

// A record released below the limit and never seen again is archived
// legitimately only if enough faults after its last seen delivery could
// have hidden the acquisitions that used up the rest.
func TestCheckShareHiddenAcquisitions(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		count   int32 // the last seen delivery of :2, released
		kills   int   // broker kills after it
		exits   int   // share members exiting after it
		drop    int16 // a drop fault on this API armed just before it
		lost    int
		cutDown int
	}{
		{"one below the limit, a ShareFetch response dropped", 3, 0, 0, apiShareFetch, 0, 1},
		{"one below the limit, a ShareAcknowledge response dropped", 3, 0, 0, apiShareAcknowledge, 1, 0},
		{"one below the limit, one kill after", 3, 1, 0, 0, 0, 1},
		{"one below the limit, a member exit after", 3, 0, 1, 0, 0, 1},
		{"two below the limit, one kill after", 2, 1, 0, 0, 1, 0},
		{"two below the limit, a kill and an exit after", 2, 1, 1, 0, 0, 1},
		{"one below the limit, nothing after", 3, 0, 0, 0, 1, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := newShareBuilder()
			b.removeAll(func(e *Event) bool { return e.ID == "shr-p0.1:2" && (e.Kind == KindDeliver || e.Kind == KindShareAck) })
			if c.drop != 0 {
				b.add(Event{Kind: KindFault, Fault: string(FaultDrop), W: fmt.Sprintf("api %d", c.drop)})
			}
			b.deliver("shr-p0.1:2", 0, 1, "shr-m1.1", c.count, AckRelease, true)
			for range c.kills {
				b.add(Event{Kind: KindFault, Fault: string(FaultKill), W: "broker"})
			}
			for range c.exits {
				b.add(Event{Kind: KindExit, W: "shr-m1.1"})
			}
			// A producer's exit hides nothing.
			b.add(Event{Kind: KindExit, W: "shr-p0.1"})
			ch := b.check()
			if got := observed(ch.Findings)[string(Share)+"/"+string(CheckShareLost)]; got != c.lost {
				t.Errorf("share-lost %d, want %d (%v)", got, c.lost, observed(ch.Findings))
			}
			if ch.Share.ArchivedCutShort != c.cutDown {
				t.Errorf("archived cut short %d, want %d", ch.Share.ArchivedCutShort, c.cutDown)
			}
		})
	}
}

func TestShareExpectations(t *testing.T) {
	t.Parallel()
	for _, c := range shareChecks {
		if Expectations(Share, c) != ExpectZero || Expectations(AtLeastOnce, c) != ExpectNA {
			t.Errorf("%s: share %s, at-least-once %s", c, Expectations(Share, c), Expectations(AtLeastOnce, c))
		}
	}
	for c, want := range map[Check]Expect{CheckLostWrite: ExpectZero, CheckDupLog: ExpectZero, CheckOrder: ExpectZero,
		CheckLostE2E: ExpectNA, CheckCommitBack: ExpectNA, CheckRecords: ExpectPositive} {
		if got := Expectations(Share, c); got != want {
			t.Errorf("Expectations(share, %s) = %s, want %s", c, got, want)
		}
	}
	if got, err := ParseSemantics("share,at-least-once"); err != nil || !reflect.DeepEqual(got, []Semantic{Share, AtLeastOnce}) {
		t.Errorf("share,at-least-once: %v %v", got, err)
	}
	if got, err := ParseSemantics("all,share,exactly-once"); err != nil || !reflect.DeepEqual(got, append(slices.Clone(AllSemantics), Share)) {
		t.Errorf("all,share: %v %v", got, err)
	}
	if all, _ := ParseSemantics("all"); len(all) != 3 {
		t.Errorf("all = %v: share is selected by name", all)
	}
}

// The table and the HTML report leave out the other family's n/a rows and
// show the share summary.
func TestShareReportRows(t *testing.T) {
	t.Parallel()
	b := newShareBuilder()
	r := &Result{Semantics: []Semantic{AtLeastOnce, Share}, Plan: b.plan, Started: time.Unix(0, 0)}
	r.check(b.events)
	for _, f := range r.TableRows() {
		if f.Expected == ExpectNA && (f.Semantic == Share) != slices.Contains(shareChecks, f.Check) {
			t.Errorf("row %s %s (%s) shown", f.Semantic, f.Check, f.Expected)
		}
	}
	if n := len(r.TableRows()); n != 12+11 {
		t.Errorf("%d rows, want 12 at-least-once and 11 share", n)
	}
	var table, page strings.Builder
	r.WriteTable(&table)
	if err := r.WriteHTML(&page); err != nil {
		t.Fatal(err)
	}
	want := "share: 4 records, 10 deliveries (6 redeliveries), 2 accepted, 1 rejected, 1 archived at the limit"
	for name, out := range map[string]string{"table": table.String(), "html": page.String()} {
		if !strings.Contains(out, want) {
			t.Errorf("%s lacks %q:\n%s", name, want, out)
		}
	}
}
