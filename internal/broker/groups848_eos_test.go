package broker_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/kawatest"
	"github.com/kawa-broker/kawa/internal/kawatest/wait"
	"github.com/kawa-broker/kawa/internal/proxy"
)

// eos848Member is one consume-transform-produce member: a franz-go GroupTransactSession in a
// KIP-848 group (kgo.ServerSideBalancer), connected through its own proxy so the test can cut
// it off the network. Each transaction copies the polled input records to the output topic as
// "partition:offset" and commits their offsets with TxnOffsetCommit (KIP-447: member ID and the
// member epoch as generation). Any error ending a transaction drops the session and starts a new
// one with the same transactional.id.
type eos848Member struct {
	id     int
	px     *proxy.Proxy
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	// armed cuts the network at the member's next EndTxn, which is then never sent: its
	// transaction stays open with its output records written and its offsets staged.
	armed, cut atomic.Bool
	openAtCut  atomic.Int64 // records of the transaction left open by the cut
	restarts   atomic.Int64
	committed  *atomic.Int64 // input records in committed transactions, over all members
}

func startEOS848Member(t *testing.T, k *kawatest.Broker, id int, group, in, out string, committed *atomic.Int64) *eos848Member {
	t.Helper()
	px, err := proxy.New(k.Addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &eos848Member{id: id, px: px, ctx: ctx, cancel: cancel, done: make(chan struct{}), committed: committed}
	px.OnRequest(func(f proxy.Frame) proxy.Action {
		if m.armed.Load() && f.Key == int16(kmsg.EndTxn) {
			m.cut.Store(true)
		}
		return proxy.Action{Cut: m.cut.Load()} // once cut, every connection is refused its first request
	})
	opts := []kgo.Opt{kgo.SeedBrokers(px.Addr()), kgo.ClientID(fmt.Sprintf("eos848-member-%d", id)),
		kgo.TransactionalID(fmt.Sprintf("%s-member-%d", group, id)), kgo.TransactionTimeout(3 * time.Second),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(in), kgo.DefaultProduceTopic(out),
		kgo.ServerSideBalancer(), kgo.Balancers(kgo.StickyBalancer()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), // require_stable offset fetches: always on in franz-go 1.22
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100 * time.Millisecond),
		kgo.RetryTimeout(5 * time.Second)}
	go m.run(t, opts)
	t.Cleanup(m.stop)
	return m
}

func (m *eos848Member) run(t *testing.T, opts []kgo.Opt) {
	defer close(m.done)
	for m.ctx.Err() == nil {
		s, err := kgo.NewGroupTransactSession(opts...)
		if err != nil {
			t.Errorf("member %d: %v", m.id, err)
			return
		}
		err = m.loop(s)
		if m.cut.Load() {
			// Cut off: leave nothing behind (no LeaveGroup, no EndTxn can reach the broker).
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			_ = s.Client().LeaveGroupContext(ctx)
			s.Close()
			<-m.ctx.Done()
			return
		}
		s.Close()
		if m.ctx.Err() == nil {
			m.restarts.Add(1)
			t.Logf("member %d: new session after %v", m.id, err)
		}
	}
}

// loop transforms until the member is stopped or a transaction fails; it returns the error.
func (m *eos848Member) loop(s *kgo.GroupTransactSession) error {
	for m.ctx.Err() == nil {
		recs := s.PollRecords(m.ctx, 100).Records()
		if len(recs) == 0 {
			continue
		}
		if err := s.Begin(); err != nil {
			return err
		}
		for _, r := range recs {
			s.Produce(m.ctx, &kgo.Record{Value: fmt.Appendf(nil, "%d:%d", r.Partition, r.Offset)}, nil)
		}
		m.openAtCut.Store(int64(len(recs))) // kept if this End is the one cut
		committed, err := s.End(m.ctx, kgo.TryCommit)
		if err != nil {
			return err
		}
		if committed {
			m.committed.Add(int64(len(recs)))
		}
	}
	return nil
}

// stop ends the member; a member not cut off leaves the group.
func (m *eos848Member) stop() {
	m.cancel()
	<-m.done
	m.px.Close()
}

// TestConsumerGroupTransactionalChurn848 (issue 15 acceptance, EOS item): three franz-go
// GroupTransactSession members of a KIP-848 group consume 12 input partitions that a producer
// keeps writing, transform each record and produce it to an output topic in the transaction
// that commits its offset (TxnOffsetCommit by member epoch, KIP-447, with KIP-1251's
// per-partition assignment epochs while partitions move). Two members join later; one member is
// cut off the network right before its EndTxn, never leaving: its transaction (records written,
// offsets staged) stays open until the transaction timeout aborts it, and its partitions move
// once its session times out, to members whose require_stable offset fetches wait for the abort.
// The read_committed output then holds every acknowledged input record exactly once.
func TestConsumerGroupTransactionalChurn848(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t, consumerProtocol)
	const in, out, group, parts = "eos848-in", "eos848-out", "eos848", 12
	k.CreateTopic(in, parts, nil)
	k.CreateTopic(out, 3, nil)
	prod := startBgProducer(t, k, in, parts)
	var committed atomic.Int64
	progress := func(what string, n int64) {
		t.Helper()
		from := committed.Load()
		wait.Until(t, 30*time.Second, what, func() bool { return committed.Load() >= from+n })
	}
	var ms []*eos848Member
	for i := range 3 {
		ms = append(ms, startEOS848Member(t, k, i, group, in, out, &committed))
	}
	progress("three members committing", 300)
	ms = append(ms, startEOS848Member(t, k, 3, group, in, out, &committed))
	progress("four members committing", 300)

	victim := ms[0]
	victim.armed.Store(true)
	wait.Until(t, 20*time.Second, "member 0 cut off at its EndTxn", victim.cut.Load)
	victim.px.Close()
	cutAt := time.Now()
	ms = append(ms, startEOS848Member(t, k, 4, group, in, out, &committed))
	progress("members committing after the cut", 300)
	acked := prod.Stop(t)

	// Done when the group's committed offsets cover every acknowledged record.
	adm := k.Admin()
	end := map[int32]int64{}
	for _, a := range acked {
		end[a.Partition] = max(end[a.Partition], a.Offset+1)
	}
	wait.Until(t, 40*time.Second, "the committed offsets to cover every acknowledged input record", func() bool {
		os, err := adm.FetchOffsets(context.Background(), group)
		if err != nil {
			return false
		}
		for p, e := range end {
			if o, ok := os.Lookup(in, p); !ok || o.At < e {
				return false
			}
		}
		return true
	})
	covered := time.Since(cutAt)
	if victim.openAtCut.Load() == 0 {
		t.Error("member 0 was cut with no records in its open transaction")
	}
	var restarts int64
	for _, m := range ms {
		m.stop()
		restarts += m.restarts.Load()
	}

	got := readCommittedAll(t, k, out, 3)
	seen := map[string]int{}
	for _, v := range got {
		seen[v]++
	}
	for _, a := range acked {
		key := fmt.Sprintf("%d:%d", a.Partition, a.Offset)
		if c := seen[key]; c != 1 {
			t.Errorf("input %s in the output %d times, want exactly once", key, c)
		}
		delete(seen, key)
	}
	for v, c := range seen {
		t.Errorf("output %q (%d times) is no acknowledged input record", v, c)
	}
	t.Logf("%d input records, %d output records read_committed; member 0 cut with %d records in its open transaction; %d session restarts; committed offsets covered everything %v after the cut",
		len(acked), len(got), victim.openAtCut.Load(), restarts, covered.Round(time.Millisecond))
}

// readCommittedAll reads topic (partitions 0..n-1) from the start with read_committed, once no
// transaction on it is open: a non-transactional sentinel is appended to every partition, and
// everything before the sentinels is read. It returns the values, sentinels left out.
func readCommittedAll(t *testing.T, k *kawatest.Broker, topic string, n int32) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := k.Admin()
	wait.Until(t, 20*time.Second, "no open transaction on "+topic, func() bool {
		ts, err := adm.ListTransactions(ctx, nil, []string{"Ongoing", "PrepareCommit", "PrepareAbort"})
		return err == nil && len(ts) == 0
	})
	const sentinel = "sentinel"
	p := k.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic(topic))
	for i := range n {
		if err := p.ProduceSync(ctx, &kgo.Record{Partition: i, Value: []byte(sentinel)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cl := k.Client(kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	var mu sync.Mutex
	var vals []string
	ended := map[int32]bool{}
	wait.Until(t, 30*time.Second, "every partition of "+topic+" read to its sentinel", func() bool {
		pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer pcancel()
		cl.PollFetches(pctx).EachRecord(func(r *kgo.Record) {
			mu.Lock()
			defer mu.Unlock()
			if string(r.Value) == sentinel {
				ended[r.Partition] = true
				return
			}
			if !ended[r.Partition] {
				vals = append(vals, string(r.Value))
			}
		})
		mu.Lock()
		defer mu.Unlock()
		return len(ended) == int(n)
	})
	return vals
}
