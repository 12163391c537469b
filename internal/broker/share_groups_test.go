package broker_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/kawatest"
)

// shareSetup creates a one-partition topic holding n records "0".."n-1"
// and sets the share group's configs (kvs: name, value pairs) through
// IncrementalAlterConfigs GROUP resources, as franz-go's tests do.
func shareSetup(t *testing.T, k *kawatest.Broker, topic, group string, n int, kvs ...string) {
	t.Helper()
	k.CreateTopic(topic, 1, nil)
	setShareConfigs(t, k, group, append([]string{"share.auto.offset.reset", "earliest"}, kvs...)...)
	shareProduce(t, k, topic, 0, n)
}

func shareProduce(t *testing.T, k *kawatest.Broker, topic string, from, to int) {
	t.Helper()
	p := k.Client(kgo.DefaultProduceTopic(topic))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var rs []*kgo.Record
	for i := from; i < to; i++ {
		rs = append(rs, kgo.StringRecord(strconv.Itoa(i)))
	}
	if err := p.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

func setShareConfigs(t *testing.T, k *kawatest.Broker, group string, kvs ...string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	for i := 0; i < len(kvs); i += 2 {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value = kvs[i], kmsg.StringPtr(kvs[i+1])
		res.Configs = append(res.Configs, c)
	}
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(context.Background(), k.Client())
	if err == nil {
		err = kerr.ErrorForCode(resp.Resources[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("IncrementalAlterConfigs GROUP: %v", err)
	}
	dreq := kmsg.NewPtrDescribeConfigsRequest()
	dres := kmsg.NewDescribeConfigsRequestResource()
	dres.ResourceType, dres.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	dreq.Resources = append(dreq.Resources, dres)
	dresp, err := dreq.RequestWith(context.Background(), k.Client())
	if err != nil {
		t.Fatalf("DescribeConfigs GROUP: %v", err)
	}
	got := map[string]string{}
	for _, c := range dresp.Resources[0].Configs {
		got[c.Name] = *c.Value
	}
	for i := 0; i < len(kvs); i += 2 {
		if got[kvs[i]] != kvs[i+1] {
			t.Fatalf("DescribeConfigs GROUP %s = %q, want %q", kvs[i], got[kvs[i]], kvs[i+1])
		}
	}
}

func shareConsumer(k *kawatest.Broker, topic, group string, opts ...kgo.Opt) *kgo.Client {
	return k.Client(append([]kgo.Opt{kgo.ConsumeTopics(topic), kgo.ShareGroup(group)}, opts...)...)
}

// pollUntil polls c, handing every record to each, until done reports
// true; it fails the test after 20 s.
func pollUntil(t *testing.T, c *kgo.Client, each func(*kgo.Record), done func() bool) {
	t.Helper()
	pollUntilCtx(t, context.Background(), c, each, done)
}

// pollUntilCtx is pollUntil that also returns when parent ends (another
// consumer saw the end).
func pollUntilCtx(t *testing.T, parent context.Context, c *kgo.Client, each func(*kgo.Record), done func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(parent, 20*time.Second)
	defer cancel()
	for !done() {
		fs := c.PollFetches(ctx)
		if parent.Err() != nil {
			return
		}
		if ctx.Err() != nil {
			t.Errorf("share consumer: timed out")
			return
		}
		for _, e := range fs.Errors() {
			t.Errorf("share fetch error: %v", e.Err)
		}
		fs.EachRecord(each)
	}
}

// Many consumers of one partition each get distinct records: every record
// is delivered once (delivery count 1) over all of them.
func TestShareGroupDistinctRecords(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	const n = 600
	shareSetup(t, k, "q", "g", n)
	var mu sync.Mutex
	seen := map[string]int{}
	per := make([]int, 3)
	total := func() bool { mu.Lock(); defer mu.Unlock(); return len(seen) >= n }
	all, allSeen := context.WithCancel(context.Background())
	defer allSeen()
	var wg sync.WaitGroup
	for i := range per {
		c := shareConsumer(k, "q", "g", kgo.ShareMaxRecords(20))
		wg.Go(func() {
			pollUntilCtx(t, all, c, func(r *kgo.Record) {
				mu.Lock()
				defer mu.Unlock()
				seen[string(r.Value)]++
				per[i]++
				if r.DeliveryCount() != 1 {
					t.Errorf("record %s: delivery count %d, want 1", r.Value, r.DeliveryCount())
				}
				r.Ack(kgo.AckAccept)
				if len(seen) == n {
					allSeen()
				}
			}, total)
		})
	}
	wg.Wait()
	for v, c := range seen {
		if c != 1 {
			t.Errorf("record %s delivered %d times", v, c)
		}
	}
	if len(seen) != n {
		t.Errorf("%d distinct records delivered, want %d", len(seen), n)
	}
	t.Logf("records per consumer: %v", per)
}

// RELEASE makes a record available again: it is redelivered with delivery
// count 2, and once accepted never again.
func TestShareGroupReleaseRedelivers(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	const n = 50
	shareSetup(t, k, "q", "g", n)
	c := shareConsumer(k, "q", "g")
	counts := map[string][]int32{}
	accepted := 0
	pollUntil(t, c, func(r *kgo.Record) {
		counts[string(r.Value)] = append(counts[string(r.Value)], r.DeliveryCount())
		if r.DeliveryCount() == 1 {
			r.Ack(kgo.AckRelease)
			return
		}
		r.Ack(kgo.AckAccept)
		accepted++
	}, func() bool { return accepted == n })
	for i := range n {
		got := counts[strconv.Itoa(i)]
		if len(got) != 2 || got[0] != 1 || got[1] != 2 {
			t.Errorf("record %d: delivery counts %v, want [1 2]", i, got)
		}
	}
	// Nothing is left: the next record delivered is one produced now.
	shareProduce(t, k, "q", n, n+1)
	var next []string
	pollUntil(t, c, func(r *kgo.Record) { next = append(next, string(r.Value)); r.Ack(kgo.AckAccept) }, func() bool { return len(next) > 0 })
	if len(next) != 1 || next[0] != strconv.Itoa(n) {
		t.Errorf("after all accepted, got %v, want [%d]", next, n)
	}
}

// REJECT archives a record at once; releasing one at the delivery-count
// limit archives it too. Neither is delivered again.
func TestShareGroupRejectAndDeliveryLimit(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	const n = 40
	shareSetup(t, k, "q", "g", n, "share.delivery.count.limit", "3")
	c := shareConsumer(k, "q", "g")
	counts := map[string]int{}
	deliveries := 0
	pollUntil(t, c, func(r *kgo.Record) {
		v, _ := strconv.Atoi(string(r.Value))
		counts[string(r.Value)]++
		deliveries++
		if v < 10 {
			r.Ack(kgo.AckReject)
		} else {
			r.Ack(kgo.AckRelease)
		}
	}, func() bool { return deliveries == 10+3*(n-10) })
	shareProduce(t, k, "q", n, n+1) // a sentinel: the next delivery must be it
	var next []string
	pollUntil(t, c, func(r *kgo.Record) { next = append(next, string(r.Value)); r.Ack(kgo.AckAccept) }, func() bool { return len(next) > 0 })
	if len(next) != 1 || next[0] != strconv.Itoa(n) {
		t.Errorf("after reject and limit, got %v, want only the sentinel %d", next, n)
	}
	for i := range n {
		want := 3
		if i < 10 {
			want = 1
		}
		if got := counts[strconv.Itoa(i)]; got != want {
			t.Errorf("record %d delivered %d times, want %d", i, got, want)
		}
	}
}

// A record whose acquisition lock expires unacknowledged goes to another
// consumer with delivery count 2 (share.record.lock.duration.ms = 500).
func TestShareGroupLockExpiryRedelivers(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	const n = 20
	shareSetup(t, k, "q", "g", n, "share.record.lock.duration.ms", "500")
	// The stuck member acquires everything with raw requests and then goes
	// silent (a kgo share consumer would keep fetching in the background).
	raw := k.Client()
	ctx := context.Background()
	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.GroupID, hb.MemberID, hb.SubscribedTopicNames = "g", "stuck-member-000000000", []string{"q"}
	hbr, err := hb.RequestWith(ctx, raw)
	if err != nil || hbr.ErrorCode != 0 || hbr.Assignment == nil || len(hbr.Assignment.TopicPartitions) != 1 {
		t.Fatalf("heartbeat: %v %+v", err, hbr)
	}
	sf := kmsg.NewPtrShareFetchRequest()
	sf.GroupID, sf.MemberID, sf.MaxWaitMillis, sf.MaxBytes, sf.MaxRecords = kmsg.StringPtr("g"), hbr.MemberID, 5000, 1<<20, 500
	sf.Topics = []kmsg.ShareFetchRequestTopic{{TopicID: hbr.Assignment.TopicPartitions[0].TopicID, Partitions: []kmsg.ShareFetchRequestTopicPartition{{Partition: 0}}}}
	sfr, err := sf.RequestWith(ctx, raw)
	if err != nil || sfr.ErrorCode != 0 || len(sfr.Topics) != 1 {
		t.Fatalf("share fetch: %v %+v", err, sfr)
	}
	if acq := sfr.Topics[0].Partitions[0].AcquiredRecords; len(acq) != 1 || acq[0].FirstOffset != 0 || acq[0].LastOffset != n-1 || acq[0].DeliveryCount != 1 {
		t.Fatalf("acquired %+v, want [0, %d] with delivery count 1", acq, n-1)
	}
	if sfr.AcquisitionLockTimeoutMillis != 500 {
		t.Errorf("acquisition_lock_timeout_ms %d, want 500", sfr.AcquisitionLockTimeoutMillis)
	}
	c := shareConsumer(k, "q", "g")
	got := map[string]int32{}
	pollUntil(t, c, func(r *kgo.Record) { got[string(r.Value)] = r.DeliveryCount(); r.Ack(kgo.AckAccept) }, func() bool { return len(got) == n })
	for i := range n {
		if dc := got[strconv.Itoa(i)]; dc != 2 {
			t.Errorf("record %d: redelivered with delivery count %d, want 2", i, dc)
		}
	}
}

// Acknowledgements survive a broker restart: accepted records are never
// redelivered, records released by a closing consumer are.
func TestShareGroupRestartKeepsAcks(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	const n = 50
	shareSetup(t, k, "q", "g", n)
	c := k.Client(kgo.ConsumeTopics("q"), kgo.ShareGroup("g"))
	seen := 0
	pollUntil(t, c, func(r *kgo.Record) {
		seen++
		if v, _ := strconv.Atoi(string(r.Value)); v < n/2 {
			r.Ack(kgo.AckAccept)
		} else {
			r.Ack(kgo.AckRelease)
		}
	}, func() bool { return seen == n })
	c.Close() // acks on close (standalone ShareAcknowledge)

	k = k.Restart()
	c2 := shareConsumer(k, "q", "g")
	got := map[string]bool{}
	pollUntil(t, c2, func(r *kgo.Record) { got[string(r.Value)] = true; r.Ack(kgo.AckAccept) }, func() bool { return len(got) >= n/2 })
	for i := range n {
		if want := i >= n/2; got[strconv.Itoa(i)] != want {
			t.Errorf("record %d redelivered after restart = %v, want %v", i, got[strconv.Itoa(i)], want)
		}
	}
}

// AlterShareGroupOffsets moves the SPSO (delivery starts there),
// DescribeShareGroupOffsets reports it, DeleteShareGroupOffsets forgets
// it, and DeleteGroups deletes the share group.
func TestShareGroupOffsetsAdmin(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	k.CreateTopic("q", 1, nil)
	shareProduce(t, k, "q", 0, 10)
	ctx := context.Background()
	cl := k.Client()

	alt := kmsg.NewPtrAlterShareGroupOffsetsRequest()
	alt.GroupID = "g"
	alt.Topics = []kmsg.AlterShareGroupOffsetsRequestTopic{{Topic: "q", Partitions: []kmsg.AlterShareGroupOffsetsRequestTopicPartition{{Partition: 0, StartOffset: 7}}}}
	altr, err := alt.RequestWith(ctx, cl)
	if err != nil || altr.ErrorCode != 0 || altr.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("AlterShareGroupOffsets: %v %+v", err, altr)
	}
	describe := func() int64 {
		d := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
		d.Groups = []kmsg.DescribeShareGroupOffsetsRequestGroup{{GroupID: "g"}}
		dr, err := d.RequestWith(ctx, cl)
		if err != nil || dr.Groups[0].ErrorCode != 0 {
			t.Fatalf("DescribeShareGroupOffsets: %v %+v", err, dr)
		}
		for _, rt := range dr.Groups[0].Topics {
			if rt.Topic == "q" && len(rt.Partitions) == 1 {
				return rt.Partitions[0].StartOffset
			}
		}
		return -1
	}
	if got := describe(); got != 7 {
		t.Fatalf("start offset %d after alter, want 7", got)
	}

	c := shareConsumer(k, "q", "g")
	var got []string
	pollUntil(t, c, func(r *kgo.Record) { got = append(got, string(r.Value)); r.Ack(kgo.AckAccept) }, func() bool { return len(got) >= 3 })
	if len(got) != 3 || got[0] != "7" || got[2] != "9" {
		t.Errorf("delivered %v after SPSO 7, want [7 8 9]", got)
	}
	c.Close()
	if got := describe(); got != 10 {
		t.Errorf("start offset %d after accepting all, want 10", got)
	}

	del := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
	del.GroupID = "g"
	del.Topics = []kmsg.DeleteShareGroupOffsetsRequestTopic{{Topic: "q"}}
	delr, err := del.RequestWith(ctx, cl)
	if err != nil || delr.ErrorCode != 0 || delr.Topics[0].ErrorCode != 0 {
		t.Fatalf("DeleteShareGroupOffsets: %v %+v", err, delr)
	}
	if got := describe(); got != -1 {
		t.Errorf("start offset %d after delete, want -1 (no state)", got)
	}

	dg := kmsg.NewPtrDeleteGroupsRequest()
	dg.Groups = []string{"g"}
	dgr, err := dg.RequestWith(ctx, cl)
	if err != nil || dgr.Groups[0].ErrorCode != 0 {
		t.Fatalf("DeleteGroups: %v %+v", err, dgr)
	}
	dgr, err = dg.RequestWith(ctx, cl)
	if err != nil || dgr.Groups[0].ErrorCode != kerr.GroupIDNotFound.Code {
		t.Errorf("second DeleteGroups: %v, code %d, want GROUP_ID_NOT_FOUND", err, dgr.Groups[0].ErrorCode)
	}
}

// ShareGroupDescribe lists a consuming member with its subscription and
// assignment; after it leaves the group is Empty.
func TestShareGroupDescribe(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	shareSetup(t, k, "q", "g", 1)
	c := shareConsumer(k, "q", "g")
	n := 0
	pollUntil(t, c, func(r *kgo.Record) { n++ }, func() bool { return n > 0 })
	describe := func() kmsg.ShareGroupDescribeResponseGroup {
		d := kmsg.NewPtrShareGroupDescribeRequest()
		d.GroupIDs = []string{"g"}
		dr, err := d.RequestWith(context.Background(), k.Client())
		if err != nil || len(dr.Groups) != 1 || dr.Groups[0].ErrorCode != 0 {
			t.Fatalf("ShareGroupDescribe: %v %+v", err, dr)
		}
		return dr.Groups[0]
	}
	g := describe()
	if g.GroupState != "Stable" || len(g.Members) != 1 {
		t.Fatalf("state %s with %d members, want Stable with 1", g.GroupState, len(g.Members))
	}
	m := g.Members[0]
	if len(m.SubscribedTopicNames) != 1 || m.SubscribedTopicNames[0] != "q" || len(m.Assignment.TopicPartitions) != 1 ||
		m.Assignment.TopicPartitions[0].Topic != "q" || len(m.Assignment.TopicPartitions[0].Partitions) != 1 {
		t.Errorf("member %+v, want subscribed to and assigned q[0]", m)
	}
	c.Close() // leaves the group (member epoch -1)
	if g := describe(); g.GroupState != "Empty" || len(g.Members) != 0 {
		t.Errorf("after close: state %s with %d members, want Empty with 0", g.GroupState, len(g.Members))
	}
}

// Under share.isolation.level=read_committed an aborted transaction's
// records are archived, never delivered; committed ones are delivered, and
// the transaction markers are never handed out as records.
func TestShareGroupReadCommitted(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	k.CreateTopic("q", 1, nil)
	setShareConfigs(t, k, "g", "share.auto.offset.reset", "earliest", "share.isolation.level", "read_committed")
	p := k.Client(kgo.DefaultProduceTopic("q"), kgo.TransactionalID("share-rc"))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i, commit := range []kgo.TransactionEndTry{kgo.TryAbort, kgo.TryCommit} {
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for j := range 5 {
			if err := p.ProduceSync(ctx, kgo.StringRecord(strconv.Itoa(i*5+j))).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.EndTransaction(ctx, commit); err != nil {
			t.Fatal(err)
		}
	}
	c := shareConsumer(k, "q", "g")
	var got []string
	pollUntil(t, c, func(r *kgo.Record) { got = append(got, string(r.Value)); r.Ack(kgo.AckAccept) }, func() bool { return len(got) >= 5 })
	shareProduce(t, k, "q", 100, 101) // a sentinel after the markers
	pollUntil(t, c, func(r *kgo.Record) { got = append(got, string(r.Value)); r.Ack(kgo.AckAccept) }, func() bool { return len(got) >= 6 })
	want := []string{"5", "6", "7", "8", "9", "100"}
	if len(got) != len(want) {
		t.Fatalf("delivered %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("delivered %v, want %v", got, want)
		}
	}
}
