package group

import (
	"bytes"
	"context"
	"encoding/hex"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kafka's bytes for the records this file is about (group-coordinator's
// ConsumerGroupRegularExpressionKey/Value and ConsumerGroupMetadataValue with its KIP-1101 tag).
func TestConsumerGroupRegexAndHashRecordBytes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name      string
		got, want string
	}{
		{"regex key", hex.EncodeToString(cgKey(cgRegexType, "g", "t.*")), "0010" + "000167" + "0003742e2a"},
		{"regex value", hex.EncodeToString(encodeRegexValue(cgRegexValue{topics: []string{"t", "tx"}, version: 2, timestamp: 0x0102030405060708})),
			"0000" + "03" + "0274" + "037478" + "0000000000000002" + "0102030405060708" + "00"},
		{"metadata with hash", hex.EncodeToString(encodeCGGroupValue(cgGroupValue{epoch: 7, metadataHash: -2})),
			"0000" + "00000007" + "01" + "00" + "08" + "fffffffffffffffe"},
		{"metadata without hash", hex.EncodeToString(encodeCGGroupValue(cgGroupValue{epoch: 7})), "0000" + "00000007" + "00"},
	} {
		if c.got != c.want {
			t.Errorf("%s: %s, want %s", c.name, c.got, c.want)
		}
	}
	// Kafka 4.1's tag 1 (CreationTimeMs) beside the hash is skipped, the hash kept.
	v := kbinHex(t, "0000"+"00000007"+"02"+"00"+"08"+"0000000000000009"+"01"+"08"+"0000018c00000000")
	if gv, err := decodeCGGroupValue(v); err != nil || gv != (cgGroupValue{epoch: 7, metadataHash: 9}) {
		t.Errorf("metadata with hash and creation time: %+v, %v", gv, err)
	}
}

func kbinHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// regexEnv is a coordinator over a catalog the test changes: topics t (4 partitions) and tx (2).
type regexEnv struct {
	*cgEnv
	topics []TopicInfo
	owned  map[string][]kmsg.ConsumerGroupHeartbeatRequestTopic // what each member was last assigned
}

func newRegexEnv(t *testing.T) *regexEnv {
	e := &regexEnv{owned: map[string][]kmsg.ConsumerGroupHeartbeatRequestTopic{}, topics: []TopicInfo{{Name: "t", ID: topicT, Partitions: 4}, {Name: "tx", ID: [16]byte{2}, Partitions: 2}}}
	cfg := testConfig()
	cfg.Topics = func() []TopicInfo { return slices.Clone(e.topics) }
	cfg.TopicID = func(name string) ([16]byte, bool) {
		for _, ti := range e.topics {
			if ti.Name == name {
				return ti.ID, true
			}
		}
		return [16]byte{}, false
	}
	cfg.TopicName = func(id [16]byte) (string, bool) {
		for _, ti := range e.topics {
			if ti.ID == id {
				return ti.Name, true
			}
		}
		return "", false
	}
	c, s := newTestCoordinator(t, cfg)
	e.cgEnv = &cgEnv{t: t, c: c, s: s, cfg: cfg}
	return e
}

// join joins id subscribed to regex rx (names nil) or to names.
func (e *regexEnv) join(id, rx string, names ...string) *kmsg.ConsumerGroupHeartbeatResponse {
	e.t.Helper()
	r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.Version = 1
	r.Group, r.MemberID, r.RebalanceTimeoutMillis = "g", id, 10000
	if rx != "" {
		r.SubscribedTopicRegex = &rx
	} else {
		r.SubscribedTopicNames = names
	}
	resp := e.c.ConsumerGroupHeartbeat(context.Background(), Client{}, r)
	if resp.ErrorCode != 0 {
		e.t.Fatalf("join %s: code %d", id, resp.ErrorCode)
	}
	e.took(id, resp)
	return resp
}

// took records the assignment resp carries as what id owns from now on.
func (e *regexEnv) took(id string, resp *kmsg.ConsumerGroupHeartbeatResponse) {
	if resp.Assignment == nil {
		return
	}
	owned := []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	for _, t := range resp.Assignment.Topics {
		owned = append(owned, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: t.TopicID, Partitions: t.Partitions})
	}
	e.owned[id] = owned
}

// keepAlive heartbeats id at epoch reporting what it was last assigned (so it confirms
// revocations), takes what it is assigned, and returns the epoch it is told.
func (e *regexEnv) keepAlive(id string, epoch int32) int32 {
	e.t.Helper()
	r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.Version = 1
	r.Group, r.MemberID, r.MemberEpoch, r.Topics = "g", id, epoch, e.owned[id]
	resp := e.c.ConsumerGroupHeartbeat(context.Background(), Client{}, r)
	if resp.ErrorCode != 0 {
		e.t.Fatalf("heartbeat %s at %d: code %d", id, epoch, resp.ErrorCode)
	}
	e.took(id, resp)
	return resp.MemberEpoch
}

// latest is the last value stored under key (nil: none, or a tombstone).
func (e *regexEnv) latest(key []byte) []byte {
	var v []byte
	for _, r := range e.s.records() {
		if bytes.Equal(r.Key, key) {
			v = r.Value
		}
	}
	return v
}

func (e *regexEnv) groupEpoch() int32 { return e.c.groups["g"].cg.epoch }

// A regex-subscribed group stores what its regex resolved to (Kafka's ConsumerGroupRegularExpression
// record) and the metadata hash of its topics (KIP-1101) instead of the partition metadata, and a
// restart, from the whole log or its compacted form, brings back the same group epoch, resolution,
// hash and assignment: keep-alive heartbeats after it bump nothing and write nothing. The hash sees
// what the partition counts alone did not: a subscribed topic deleted and recreated with the same
// partition count is a new topic and bumps the group epoch.
func TestConsumerGroupRegexSurvivesRestart(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		e := newRegexEnv(t)
		e.join("a", "t.*")
		e.join("b", "", "t")
		rxKey := cgKey(cgRegexType, "g", "t.*")
		rv, err := decodeRegexValue(e.latest(rxKey))
		if err != nil || !slices.Equal(rv.topics, []string{"t", "tx"}) || rv.version != 1 {
			t.Fatalf("regex record: %+v, %v; want topics [t tx] at version 1", rv, err)
		}
		gv, err := decodeCGGroupValue(e.latest(cgKey(cgMetadataType, "g")))
		if err != nil || gv.epoch != 2 || gv.metadataHash == 0 || gv.metadataHash != metadataHash(e.topics) {
			t.Fatalf("group record: %+v, %v; want epoch 2 and the hash of t and tx", gv, err)
		}
		// Reconcile to a stable group: a revokes what b gets.
		var aEpoch, bEpoch int32 = 1, 2
		for range 3 {
			aEpoch, bEpoch = e.keepAlive("a", aEpoch), e.keepAlive("b", bEpoch)
		}
		before := e.snapshot()
		if !strings.HasPrefix(before, "Stable epoch 2 target 2") {
			t.Fatalf("before restart: %s, want Stable at epoch 2", before)
		}
		epoch := e.groupEpoch()
		full := e.s.records()
		for _, recs := range [][]Record{full, compacted(full)} {
			e.restart(recs...)
			if got := e.snapshot(); got != before {
				t.Fatalf("after restart from %d records: %s\nwant %s", len(recs), got, before)
			}
			cg := e.c.groups["g"].cg
			if !slices.Equal(cg.regexes["t.*"].topics, []string{"t", "tx"}) || cg.regexes["t.*"].version != 1 || cg.metadataHash != gv.metadataHash {
				t.Fatalf("restored resolution %+v, hash %d; want [t tx] at version 1, hash %d", cg.regexes, cg.metadataHash, gv.metadataHash)
			}
			n := len(e.s.records())
			for range 2 {
				if got := e.keepAlive("a", aEpoch); got != aEpoch {
					t.Fatalf("a told epoch %d after restart, want %d", got, aEpoch)
				}
				e.keepAlive("b", bEpoch)
			}
			if e.groupEpoch() != epoch {
				t.Fatalf("group epoch %d after restart and keep-alives, want %d (no spurious bump)", e.groupEpoch(), epoch)
			}
			if got := len(e.s.records()); got != n {
				t.Fatalf("keep-alives after restart wrote %d records", got-n)
			}
		}
		// A new matching topic: resolution version 2, one bump.
		e.topics = append(e.topics, TopicInfo{Name: "ty", ID: [16]byte{3}, Partitions: 1})
		e.keepAlive("a", aEpoch)
		if rv, _ := decodeRegexValue(e.latest(rxKey)); !slices.Equal(rv.topics, []string{"t", "tx", "ty"}) || rv.version != 2 || e.groupEpoch() != epoch+1 {
			t.Fatalf("after ty was created: resolution %+v, group epoch %d; want [t tx ty] at version 2, epoch %d", rv, e.groupEpoch(), epoch+1)
		}
		// tx deleted and recreated (a new ID, the same partition count) between two heartbeats.
		e.topics[1].ID = [16]byte{4}
		e.keepAlive("b", bEpoch)
		if e.groupEpoch() != epoch+2 {
			t.Fatalf("group epoch %d after tx was recreated, want %d", e.groupEpoch(), epoch+2)
		}
		// Nobody uses the regex any more: its record is tombstoned.
		r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		r.Version, r.Group, r.MemberID, r.MemberEpoch = 1, "g", "a", -1
		e.c.ConsumerGroupHeartbeat(context.Background(), Client{}, r)
		if recs := e.s.records(); !slices.ContainsFunc(recs, func(r Record) bool { return bytes.Equal(r.Key, rxKey) && r.Value == nil }) {
			t.Error("no tombstone for the regex nobody subscribes with")
		}
		if recs := compacted(e.s.records()); slices.ContainsFunc(recs, func(r Record) bool {
			return bytes.Equal(r.Key, cgKey(cgPartitionMetadataType, "g"))
		}) {
			t.Error("a partition metadata record is in the log")
		}
	})
}

// A log written before the metadata hash (ConsumerGroupMetadata without tag 0, a
// ConsumerGroupPartitionMetadata record, no regex record) loads without a rebalance: the hash is
// computed from the partition metadata, the regex resolved at load; the group's next write stores
// both and tombstones the partition metadata.
func TestConsumerGroupOldLogUpgrade(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		e := newRegexEnv(t)
		e.join("a", "t.*")
		var old []Record
		for _, r := range compacted(e.s.records()) {
			switch dk, _ := decodeKey(r.Key); dk.kind {
			case kindCGRegex:
				continue
			case kindCGMetadata:
				gv, _ := decodeCGGroupValue(r.Value)
				old = append(old, Record{Key: r.Key, Value: encodeEpochValue(gv.epoch)},
					Record{Key: cgKey(cgPartitionMetadataType, "g"), Value: encodePartitionMetadataValue([]cgTopicMeta{
						{id: topicT, name: "t", partitions: 4}, {id: [16]byte{2}, name: "tx", partitions: 2}})})
				continue
			}
			old = append(old, r)
		}
		e.restart(old...)
		n := len(e.s.records())
		if got := e.keepAlive("a", 1); got != 1 || e.groupEpoch() != 1 {
			t.Fatalf("after loading the old log: member epoch %d, group epoch %d; want 1 and 1", got, e.groupEpoch())
		}
		if e.c.groups["g"].cg.metadataHash != metadataHash(e.topics) {
			t.Error("the hash computed from the partition metadata differs from the catalog's")
		}
		// The heartbeat was the group's first write after the load.
		if !slices.ContainsFunc(e.s.records()[n:], func(r Record) bool {
			return bytes.Equal(r.Key, cgKey(cgPartitionMetadataType, "g")) && r.Value == nil
		}) {
			t.Error("the partition metadata record was not tombstoned")
		}
		if gv, err := decodeCGGroupValue(e.latest(cgKey(cgMetadataType, "g"))); err != nil || gv != (cgGroupValue{epoch: 1, metadataHash: metadataHash(e.topics)}) {
			t.Errorf("group record after the upgrade: %+v, %v", gv, err)
		}
		if rv, err := decodeRegexValue(e.latest(cgKey(cgRegexType, "g", "t.*"))); err != nil || !slices.Equal(rv.topics, []string{"t", "tx"}) {
			t.Errorf("regex record after the upgrade: %+v, %v", rv, err)
		}
	})
}

// encodePartitionMetadataValue writes a ConsumerGroupPartitionMetadata value as Kawa did before the
// metadata hash; the broker only reads them now, so only tests that build such logs write one.
func encodePartitionMetadataValue(topics []cgTopicMeta) []byte {
	b := kbin.AppendCompactArrayLen(cgValueHeader(), len(topics))
	for _, t := range topics {
		b = kbin.AppendUuid(b, t.id)
		b = kbin.AppendCompactString(b, t.name)
		b = kbin.AppendInt32(b, t.partitions)
		b = kbin.AppendCompactArrayLen(b, 0) // PartitionMetadata: racks, unused since Kafka 4.0
		b = noTags(b)
	}
	return noTags(b)
}
