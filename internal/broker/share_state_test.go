package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/config"
	"github.com/kawa-broker/kawa/internal/kawatest"
	"github.com/kawa-broker/kawa/internal/vfs"
)

// shareFetchStrict is one ShareFetch of partition 0 in record_limit mode
// (at most max records), piggybacking acks, answered without waiting.
func shareFetchStrict(t *testing.T, k *kawatest.Broker, group, member string, id [16]byte, epoch, max int32, acks []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch) []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord {
	t.Helper()
	sf := kmsg.NewPtrShareFetchRequest()
	sf.GroupID, sf.MemberID, sf.ShareSessionEpoch = kmsg.StringPtr(group), kmsg.StringPtr(member), epoch
	sf.MaxWaitMillis, sf.MaxBytes, sf.MaxRecords, sf.ShareAcquireMode = 0, 1<<20, max, 1
	sf.Topics = []kmsg.ShareFetchRequestTopic{{TopicID: id, Partitions: []kmsg.ShareFetchRequestTopicPartition{{Partition: 0, AcknowledgementBatches: acks}}}}
	r, err := sf.RequestWith(context.Background(), k.Client())
	if err != nil || r.ErrorCode != 0 {
		t.Fatalf("share fetch at epoch %d: %v %v", epoch, err, r)
	}
	for _, tp := range r.Topics {
		for _, p := range tp.Partitions {
			if p.AcknowledgeErrorCode != 0 || p.ErrorCode != 0 {
				t.Fatalf("share fetch at epoch %d: partition errors %d, ack %d", epoch, p.ErrorCode, p.AcknowledgeErrorCode)
			}
		}
	}
	return acquiredOf(r)
}

// stateLog returns __share_group_state's log start and end offsets and its
// size on disk (DescribeLogDirs).
func stateLog(t *testing.T, k *kawatest.Broker) (start, end, size int64) {
	t.Helper()
	ctx := context.Background()
	adm := k.Admin()
	s, err := adm.ListStartOffsets(ctx, "__share_group_state")
	if err != nil {
		t.Fatal(err)
	}
	e, err := adm.ListEndOffsets(ctx, "__share_group_state")
	if err != nil {
		t.Fatal(err)
	}
	so, _ := s.Lookup("__share_group_state", 0)
	eo, _ := e.Lookup("__share_group_state", 0)
	dirs, err := adm.DescribeAllLogDirs(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	dirs.Each(func(d kadm.DescribedLogDir) {
		if p, ok := d.Topics["__share_group_state"][0]; ok {
			size = p.Size
		}
	})
	return so.Offset, eo.Offset, size
}

// __share_group_state stays bounded and restores exactly (issue 15): 300
// rounds of ShareFetch acquiring 10 records in record_limit mode, each
// piggybacking the previous round's accept / release / reject
// acknowledgements, append over a thousand state records; with snapshots
// every 5 updates, prune rounds every millisecond and 8 KiB segments, the
// state topic's log start follows its end and its size stays a few
// segments. A power cut (only fsynced bytes survive) and restart then
// restore exactly the share-partition the acknowledgements made: its start
// offset, and every record still to deliver, in order, with its delivery
// count (the held locks ended by the restart, as an expiry would).
func TestShareStateLogPrunedAndRestored(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBrokerOn(t, vfs.NewMem(), func(c *config.Broker) {
		c.OffsetsTopicSegmentBytes = 8 << 10
		c.ShareSnapshotUpdateRecords = 5
		c.SharePruneInterval = time.Millisecond
	})
	const n = 3000
	shareSetup(t, k, "q", "g", n)
	id := shareJoin(t, k, "g", "a", "q")

	type state struct {
		final bool // accepted or archived
		count int16
	}
	model := map[int64]*state{}
	const limit = 5 // share.delivery.count.limit
	var acks []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch
	epoch := int32(0)
	var held []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord
	for round := 0; round < 300; round++ {
		held = shareFetchStrict(t, k, "g", "a", id, epoch, 10, acks)
		epoch++
		acks = nil
		for _, q := range held {
			for o := q.FirstOffset; o <= q.LastOffset; o++ {
				s := model[o]
				if s == nil {
					s = &state{}
					model[o] = s
				}
				if s.final || q.DeliveryCount != s.count+1 {
					t.Fatalf("round %d: offset %d delivered with count %d, model %+v", round, o, q.DeliveryCount, *s)
				}
				s.count = q.DeliveryCount
				typ := int8(1) // accept
				switch {
				case o%7 == 3:
					typ = 2 // release: redelivered until the limit archives it
					s.final = s.count >= limit
				case o%11 == 5:
					typ = 3 // reject
					s.final = true
				default:
					s.final = true
				}
				acks = append(acks, kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{FirstOffset: o, LastOffset: o, AcknowledgeTypes: []int8{typ}})
			}
		}
	}
	// The last round's records stay acquired (their acks are never sent):
	// the restart ends their locks, archiving those at the limit.
	for _, q := range held {
		for o := q.FirstOffset; o <= q.LastOffset; o++ {
			model[o].final = model[o].count >= limit
		}
	}
	start, end, size := stateLog(t, k)
	if end < 600 || start < end-200 || size > 64<<10 {
		t.Fatalf("__share_group_state: log start %d, end %d, %d bytes; want the start within 200 records of the end and at most 64 KiB", start, end, size)
	}
	t.Logf("__share_group_state before the power cut: log start %d, end %d, %d bytes", start, end, size)

	k = k.PowerCut()
	var spso int64
	for spso = 0; model[spso] != nil && model[spso].final; spso++ {
	}
	d, err := k.Admin().DescribeShareGroupOffsets(context.Background(), "g")
	if err == nil {
		err = d.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := d["g"].Offsets.Lookup("q", 0); o.StartOffset != spso {
		got := o.StartOffset
		t.Errorf("share-partition start offset after restart %d, want %d", got, spso)
	}
	type rec struct {
		off   int64
		count int16
	}
	var want, got []rec
	for o := spso; o < n && len(want) < 1000; o++ {
		switch s := model[o]; {
		case s == nil:
			want = append(want, rec{o, 1})
		case !s.final && s.count < limit:
			want = append(want, rec{o, s.count + 1})
		}
	}
	shareJoin(t, k, "g", "a", "q")
	for _, q := range shareFetchStrict(t, k, "g", "a", id, 0, 1000, nil) {
		for o := q.FirstOffset; o <= q.LastOffset; o++ {
			got = append(got, rec{o, q.DeliveryCount})
		}
	}
	if len(got) != len(want) {
		t.Fatalf("after restart acquired %d records, want %d (first %v, want %v)", len(got), len(want), got[:min(5, len(got))], want[:min(5, len(want))])
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("after restart record %d is offset %d with delivery count %d, want offset %d count %d", i, got[i].off, got[i].count, want[i].off, want[i].count)
		}
	}
}
