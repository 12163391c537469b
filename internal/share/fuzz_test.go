package share

import (
	"testing"
	"time"
)

// FuzzLoad replays a snapshot record of a share-partition followed by one
// arbitrary __share_group_state record (key, value; a nil value is a
// tombstone), as Load does at start from the log start. Load must not
// panic; when it accepts, the state it built is one a share-partition can
// be in: SPSO <= SPEO within maxWindow, every entry inside the window in a
// persisted state, and the coordinator serves it (a ReadFrom and an
// Acquire over the window do not fail or panic).
func FuzzLoad(f *testing.F) {
	snap := Record{Key: partKey("g", tp), Value: []byte(`{"spso":2,"speo":6,"runs":[{"first":2,"last":3,"state":0,"count":1},{"first":5,"last":5,"state":2,"count":1}]}`)}
	upd := []byte(`{"type":"update","group":"g","topic":"q"}`)
	f.Add(upd, []byte(`{"spso":3,"speo":9,"runs":[{"first":4,"last":4,"state":-1},{"first":6,"last":8,"state":4,"count":5}]}`), false)
	f.Add(upd, []byte(`{"spso":0,"speo":0}`), false)
	f.Add(partKey("g", tp), []byte(nil), true)
	f.Add(groupKey("g"), []byte(`{"configs":{"share.delivery.count.limit":"2"}}`), false)
	f.Add([]byte(`{"type":"update","group":"other","topic":"q"}`), []byte(`{"spso":1,"speo":2}`), false)
	f.Fuzz(func(t *testing.T, key, value []byte, tombstone bool) {
		if tombstone {
			value = nil
		} else if value == nil {
			value = []byte{}
		}
		c := New(newLog(), time.Now, Limits{})
		if err := c.Load([]Record{snap, {Key: key, Value: value, Offset: 1}}); err != nil {
			return
		}
		for _, g := range c.groups {
			for p, sp := range g.parts {
				if sp.start < 0 || sp.end < sp.start || sp.end-sp.start > maxWindow {
					t.Fatalf("%v: window [%d, %d)", p, sp.start, sp.end)
				}
				for o, r := range sp.recs {
					if o < sp.start || o >= sp.end || (r.state != stateAvailable && r.state != stateAcknowledged && r.state != stateArchived) {
						t.Fatalf("%v: offset %d state %d outside [%d, %d) or not persisted", p, o, r.state, sp.start, sp.end)
					}
				}
			}
		}
		if _, err := c.Heartbeat("g", "a", 0, []string{"q"}, one); err != nil {
			t.Fatal(err)
		}
		if from, _, ok := c.ReadFrom("g", tp, 0, 10, 10); ok {
			if _, err := c.Acquire(ctx, "g", "a", tp, from, []Span{{First: from, Last: 9}}, 10, 100, true); err != nil {
				t.Fatal(err)
			}
		}
	})
}
