package broker_test

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kawa-broker/kawa/internal/kawatest"
	"github.com/kawa-broker/kawa/internal/vfs"
)

// powerCutModel is what the broker has acknowledged so far, which every power
// cut must keep: acks=all records by offset, the last answered OffsetCommit,
// committed and aborted transactional values, the topics that exist and the
// ones deleted, and the last batch an idempotent producer had acknowledged.
type powerCutModel struct {
	records    map[int64]string
	committed  int64 // group "pc-group" on pc-data/0; -1 = none
	txnOK      []string
	txnAborted map[string]bool
	topics     map[string]bool // name -> exists
	idem       idem
	idemSeq    int32
	idemBatch  []byte // the last acknowledged batch, resent after each cut
	idemBase   int64
	idemLog    []string
}

// TestPowerCutKeepsAcknowledged runs a workload on the in-memory crash-clone
// FS and cuts the power (every write not fsynced is dropped, directory
// entries not fsynced included) after each step, several rounds over: the
// broker must start every time, and everything it acknowledged before the
// cut must be there after it (issue 11 item 12). The second round tears the
// writes the cut catches: half of every unsynced tail survives.
func TestPowerCutKeepsAcknowledged(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBrokerOn(t, vfs.NewMem())
	k.CreateTopic("pc-data", 1, nil)
	k.CreateTopic("pc-txn", 1, nil)
	k.CreateTopic("pc-idem", 1, nil)
	m := &powerCutModel{records: map[int64]string{}, committed: -1, txnAborted: map[string]bool{},
		topics: map[string]bool{"pc-data": true, "pc-txn": true, "pc-idem": true}}
	m.idem = initProducer(t, k.Addr)
	k = k.PowerCut() // right after creating the data dir, the topics and a producer ID block
	m.check(t, k)
	steps := []struct {
		name string
		run  func(m *powerCutModel, t *testing.T, k *kawatest.Broker, round int)
	}{
		{"produce", (*powerCutModel).produce},
		{"commit offsets", (*powerCutModel).commit},
		{"transactions", (*powerCutModel).transactions},
		{"idempotent batch", (*powerCutModel).idempotent},
		{"create and delete topics", (*powerCutModel).createDelete},
	}
	for round := range 2 {
		for _, s := range steps {
			s.run(m, t, k, round)
			if round == 0 {
				k = k.PowerCut()
			} else {
				k = k.PowerCutKeeping(tornTail)
			}
			t.Logf("round %d: power cut after %s; broker restarted", round, s.name)
			m.check(t, k)
		}
	}
}

// tornTail keeps a file's durable bytes plus half of what was appended to
// them and not fsynced, as a power cut in the middle of a write would.
func tornTail(_ string, synced, current []byte) []byte {
	if len(current) > len(synced) && bytes.Equal(current[:len(synced)], synced) {
		return current[:len(synced)+(len(current)-len(synced))/2]
	}
	return synced
}

func (m *powerCutModel) produce(t *testing.T, k *kawatest.Broker, round int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl := k.Client(kgo.DefaultProduceTopic("pc-data"), kgo.RequiredAcks(kgo.AllISRAcks()))
	for i := range 5 {
		v := fmt.Sprintf("round-%d-record-%d", round, i)
		res := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v)})
		if err := res.FirstErr(); err != nil {
			t.Fatal(err)
		}
		m.records[res[0].Record.Offset] = v
	}
}

func (m *powerCutModel) commit(t *testing.T, k *kawatest.Broker, _ int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	next := int64(len(m.records))
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "pc-data", Partition: 0, At: next, LeaderEpoch: -1})
	resp, err := k.Admin().CommitOffsets(ctx, "pc-group", offs)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("OffsetCommit: %v", err)
	}
	m.committed = next
}

func (m *powerCutModel) transactions(t *testing.T, k *kawatest.Broker, round int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl := k.Client(kgo.TransactionalID("pc-txn-id"), kgo.DefaultProduceTopic("pc-txn"))
	for _, commit := range []bool{true, false} {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		var vals []string
		for i := range 2 {
			v := fmt.Sprintf("round-%d-commit-%v-%d", round, commit, i)
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			vals = append(vals, v)
		}
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("EndTxn(commit %v): %v", commit, err)
		}
		if commit {
			m.txnOK = append(m.txnOK, vals...)
		} else {
			for _, v := range vals {
				m.txnAborted[v] = true
			}
		}
	}
}

func (m *powerCutModel) idempotent(t *testing.T, k *kawatest.Broker, round int) {
	t.Helper()
	vals := seqValues(fmt.Sprintf("idem-round-%d", round), 0, 3)
	b := m.idem.batch(m.idemSeq, vals...)
	got := dial(t, k.Addr).produce("pc-idem", 0, b)
	if got.code != 0 {
		t.Fatalf("idempotent produce: %v", got)
	}
	m.idemBatch, m.idemBase = b, got.base
	m.idemSeq += int32(len(vals))
	m.idemLog = append(m.idemLog, vals...)
}

func (m *powerCutModel) createDelete(t *testing.T, k *kawatest.Broker, round int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	name := fmt.Sprintf("pc-made-%d", round)
	k.CreateTopic(name, 2, nil)
	m.topics[name] = true
	if round > 0 {
		old := fmt.Sprintf("pc-made-%d", round-1)
		resp, err := k.Admin().DeleteTopics(ctx, old)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			t.Fatalf("DeleteTopics %s: %v", old, err)
		}
		m.topics[old] = false
	}
}

// check requires everything m holds from the restarted broker k.
func (m *powerCutModel) check(t *testing.T, k *kawatest.Broker) {
	t.Helper()
	got, err := consumeAll(t, k, "pc-data", int64(len(m.records)))
	if err != nil {
		t.Fatalf("reading pc-data after the cut: %v", err)
	}
	if !maps.Equal(got, m.records) {
		t.Fatalf("pc-data after the cut holds %v, want the acknowledged %v", got, m.records)
	}
	cl := k.Client()
	if c := fetchCommitted(t, cl, "pc-group", "pc-data", 0); c[0] != m.committed {
		t.Fatalf("committed offset after the cut = %d, want the answered %d", c[0], m.committed)
	}
	m.checkTopics(t, k)
	m.checkTxn(t, k)
	if m.idemBatch != nil {
		// The producer retries its last acknowledged batch after the cut: a
		// duplicate, answered with its original offset and not stored twice.
		if got := dial(t, k.Addr).produce("pc-idem", 0, m.idemBatch); got.code != 0 || got.base != m.idemBase {
			t.Fatalf("retry of the acknowledged batch after the cut: %v, want success at its original offset %d", got, m.idemBase)
		}
		wantPartitionLog(t, k.Addr, "pc-idem", 0, 0, m.idemLog)
	}
}

func (m *powerCutModel) checkTopics(t *testing.T, k *kawatest.Broker) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	listed, err := k.Admin().ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for name, exists := range m.topics {
		if listed.Has(name) != exists {
			t.Fatalf("after the cut topic %s exists = %v, want %v (topics: %v)", name, listed.Has(name), exists, listed.Names())
		}
	}
}

// checkTxn reads pc-txn read_committed: exactly the committed values, in
// order, none of the aborted ones, and the LSO reaches the HW (no
// transaction left hanging by the cut).
func (m *powerCutModel) checkTxn(t *testing.T, k *kawatest.Broker) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	adm := k.Admin()
	hw, err := adm.ListEndOffsets(ctx, "pc-txn")
	if err != nil {
		t.Fatal(err)
	}
	end, _ := hw.Lookup("pc-txn", 0)
	cl := k.Client(kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"pc-txn": {0: kgo.NewOffset().AtStart()}}))
	var got []string
	var pos int64
	for pos < end.Offset || len(got) < len(m.txnOK) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read_committed read of pc-txn stopped at %d of HW %d (a transaction left open by the cut?); got %v", pos, end.Offset, got)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch pc-txn: %v", err) })
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			pos = max(pos, p.LastStableOffset)
			p.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
		})
	}
	for _, v := range got {
		if m.txnAborted[v] {
			t.Fatalf("read_committed after the cut returned aborted value %q", v)
		}
	}
	if !slices.Equal(got, m.txnOK) {
		t.Fatalf("read_committed after the cut = %v, want the committed %v", got, m.txnOK)
	}
}

// TestPowerCutDuringProduce cuts the power while an idempotent producer has
// batches in flight, five times over, keeping half of every unsynced tail
// (torn writes): the broker starts each time and every record acknowledged
// before the cut is there at its offset, each value once.
func TestPowerCutDuringProduce(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBrokerOn(t, vfs.NewMem())
	k.CreateTopic("pc-live", 1, nil)
	acked := map[int64]string{}
	for cut := range 5 {
		var mu sync.Mutex
		var n int
		enough := make(chan struct{})
		ctx, cancel := context.WithCancel(context.Background())
		cl := k.Client(kgo.DefaultProduceTopic("pc-live"), kgo.ProducerLinger(0), kgo.MaxBufferedRecords(64))
		done := make(chan struct{})
		go func() { // owned by this iteration: stopped by cancel, waited on via done
			defer close(done)
			for i := 0; ctx.Err() == nil; i++ {
				v := fmt.Sprintf("cut-%d-record-%d", cut, i)
				cl.Produce(ctx, &kgo.Record{Value: []byte(v)}, func(r *kgo.Record, err error) {
					if err != nil {
						return // not acknowledged: the cut may or may not keep it
					}
					mu.Lock()
					defer mu.Unlock()
					acked[r.Offset] = v
					if n++; n == 200 {
						close(enough)
					}
				})
			}
		}()
		<-enough
		mu.Lock() // acknowledgements recorded so far all come before the cut
		want := maps.Clone(acked)
		mu.Unlock()
		// The producer keeps going while the power is cut, so writes are
		// in flight.
		durable := k.FS.(*vfs.MemFS).CrashCloneFunc(tornTail)
		cancel()
		<-done
		cl.Close()
		k.Close()
		cfg := k.Config
		cfg.Listen = "127.0.0.1:0"
		k = kawatest.StartOn(t, durable, cfg)

		got, err := consumeAll(t, k, "pc-live", highWatermark(t, k, "pc-live"))
		if err != nil {
			t.Fatalf("cut %d: reading back: %v", cut, err)
		}
		seen := map[string]int64{}
		for off, v := range got {
			if prev, dup := seen[v]; dup {
				t.Fatalf("cut %d: %q stored twice, at %d and %d", cut, v, prev, off)
			}
			seen[v] = off
		}
		for off, v := range want {
			if got[off] != v {
				t.Fatalf("cut %d: acknowledged %q at offset %d, after the cut offset %d holds %q", cut, v, off, off, got[off])
			}
		}
		// What survived unacknowledged is now part of the log too.
		mu.Lock()
		acked = got
		mu.Unlock()
		t.Logf("cut %d: %d acknowledged records kept, %d in the log", cut, len(want), len(got))
	}
}

// highWatermark returns ListOffsets' latest offset of topic/0.
func highWatermark(t *testing.T, k *kawatest.Broker, topic string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := k.Admin().ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup(topic, 0)
	return end.Offset
}
