package broker_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/batch"
	"github.com/kawa-broker/kawa/internal/config"
	"github.com/kawa-broker/kawa/internal/kawatest"
	"github.com/kawa-broker/kawa/internal/server"
)

// sfValue is the value the sendfile tests produce at index i: 1 KiB, unique, checkable.
func sfValue(prefix string, i int) []byte {
	v := fmt.Appendf(nil, "%s-%06d-", prefix, i)
	for len(v) < 1024 {
		v = append(v, byte('a'+len(v)%26))
	}
	return v
}

// produceSF produces n values (sfValue) to topic partition 0, uncompressed, and returns them by offset.
func produceSF(t *testing.T, cl *kgo.Client, topic, prefix string, n int) map[int64]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Value: sfValue(prefix, i)}
	}
	res := cl.ProduceSync(ctx, recs...)
	if err := res.FirstErr(); err != nil {
		t.Fatal(err)
	}
	out := make(map[int64]string, n)
	for _, r := range res {
		out[r.Record.Offset] = string(r.Record.Value)
	}
	return out
}

// consumeSF reads topic partition 0 from the start with opts until it has want records (kgo checks every
// batch's CRC) and returns them by offset.
func consumeSF(t *testing.T, k *kawatest.Broker, topic string, want int, opts ...kgo.Opt) map[int64]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := k.Client(append([]kgo.Opt{kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxPartitionBytes(256 << 10)}, opts...)...)
	got := map[int64]string{}
	for len(got) < want {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("%s: %d of %d records: %v", topic, len(got), want, err)
		}
		if errs := fs.Errors(); len(errs) > 0 {
			t.Fatalf("%s: fetch: %v", topic, errs[0].Err)
		}
		fs.EachRecord(func(r *kgo.Record) { got[r.Offset] = string(r.Value) })
	}
	return got
}

func sameSF(t *testing.T, got, want map[int64]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d", len(got), len(want))
	}
	for off, v := range want {
		if got[off] != v {
			t.Fatalf("offset %d: %.20q, want %.20q", off, got[off], v)
		}
	}
}

// TestFetchSendfile: on a plaintext listener a catch-up read is answered from the segment files (sendfile), over
// several segments, and kgo reads every record back with its CRC checked; read_committed gets the same bytes
// and drops exactly the aborted transaction's records from them (the aborted list is computed as on the copy
// path).
func TestFetchSendfile(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	k.CreateTopic("sf", 1, map[string]*string{"internal.segment.bytes": ptr("262144")})
	cl := k.Client(kgo.ProducerBatchCompression(kgo.NoCompression()))
	want := produceSF(t, cl, "sf", "plain", 2000)
	before := k.B.FetchedFromFiles()
	sameSF(t, consumeSF(t, k, "sf", len(want)), want)
	if n := k.B.FetchedFromFiles() - before; n < 1<<20 {
		t.Fatalf("%d bytes sent from files for a 2 MB catch-up read, want most of it", n)
	}

	// Transactions: committed, aborted, committed.
	k.CreateTopic("sftx", 1, nil)
	tx := k.Client(kgo.TransactionalID("sf-tx"), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.DefaultProduceTopic("sftx"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	committed := map[int64]string{}
	for round, commit := range []kgo.TransactionEndTry{kgo.TryCommit, kgo.TryAbort, kgo.TryCommit} {
		if err := tx.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		recs := make([]*kgo.Record, 300)
		for i := range recs {
			recs[i] = &kgo.Record{Value: sfValue(fmt.Sprintf("tx%d", round), i)}
		}
		res := tx.ProduceSync(ctx, recs...)
		if err := res.FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := tx.EndTransaction(ctx, commit); err != nil {
			t.Fatal(err)
		}
		if commit == kgo.TryCommit {
			for _, r := range res {
				committed[r.Record.Offset] = string(r.Record.Value)
			}
		}
	}
	before = k.B.FetchedFromFiles()
	sameSF(t, consumeSF(t, k, "sftx", len(committed), kgo.FetchIsolationLevel(kgo.ReadCommitted())), committed)
	if k.B.FetchedFromFiles() == before {
		t.Fatal("read_committed catch-up read sent nothing from files")
	}
}

// TestFetchSendfileNotOnTLS: on a TLS listener the records are copied into the response (sendfile would bypass
// the encryption), and read back whole.
func TestFetchSendfileNotOnTLS(t *testing.T) {
	t.Parallel()
	s := startSecure(t, server.SSL, tls.NoClientCert)
	if _, err := kadm.NewClient(s.b.Client(s.tlsOpt())).CreateTopic(context.Background(), 1, 1, nil, "sftls"); err != nil {
		t.Fatal(err)
	}
	want := produceSF(t, s.b.Client(s.tlsOpt(), kgo.ProducerBatchCompression(kgo.NoCompression())), "sftls", "tls", 500)
	sameSF(t, consumeSF(t, s.b, "sftls", len(want), s.tlsOpt()), want)
	if n := s.b.B.FetchedFromFiles(); n != 0 {
		t.Fatalf("%d bytes sent from files on a TLS listener", n)
	}
}

// checkSF checks a raw Fetch answer for partition 0 of a topic whose record at each offset is want[offset]:
// every batch whole with a valid CRC and every record the one produced at its offset. It returns the answer's
// error code, or an error for bytes other than those produced.
func checkSF(resp *kmsg.FetchResponse, want map[int64]string) (int16, error) {
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return 0, fmt.Errorf("answer of %d topics", len(resp.Topics))
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		if len(p.RecordBatches) != 0 {
			return 0, fmt.Errorf("error %d with %d record bytes", p.ErrorCode, len(p.RecordBatches))
		}
		return p.ErrorCode, nil
	}
	var bad error
	n, err := batch.Iterate(p.RecordBatches, func(h batch.Header, b []byte) bool {
		recs, err := batch.Records(b)
		if err != nil {
			bad = fmt.Errorf("batch at %d: %w", h.BaseOffset, err)
			return false
		}
		for _, r := range recs {
			off := h.BaseOffset + int64(r.OffsetDelta)
			if w, ok := want[off]; !ok || string(r.Value) != w {
				bad = fmt.Errorf("offset %d: %.20q, produced %.20q", off, r.Value, w)
				return false
			}
		}
		return true
	})
	if bad != nil {
		return 0, bad
	}
	if err != nil || n != len(p.RecordBatches) {
		return 0, fmt.Errorf("%d of %d record bytes are whole valid batches: %v", n, len(p.RecordBatches), err)
	}
	return 0, nil
}

// fetchV12 fetches partition 0 of topic from offset with one Fetch v12 request.
func fetchV12(ctx context.Context, cl *kgo.Client, topic string, offset int64, maxBytes int32) (*kmsg.FetchResponse, error) {
	req := kmsg.NewPtrFetchRequest()
	req.Version = 12
	req.MaxBytes = maxBytes
	req.SessionEpoch = -1 // sessionless: full answers
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset = offset
	rp.PartitionMaxBytes = maxBytes
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req.RequestWith(ctx, cl)
}

// TestFetchRacesRetention: fetches from files racing with DeleteRecords and retention deleting the segments they
// read (file.delete.delay.ms=0: closed at once, but pinned ones only after their send; 16 open files for 150
// segments, so descriptors are evicted and reopened all along) return the produced bytes or an error
// (OFFSET_OUT_OF_RANGE, KAFKA_STORAGE_ERROR), never other bytes.
func TestFetchRacesRetention(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t, func(c *config.Broker) { c.MaxOpenLogFiles = 16 })
	k.CreateTopic("sfret", 1, map[string]*string{"internal.segment.bytes": ptr("32768"), "file.delete.delay.ms": ptr("0")})
	const n = 4000
	want := produceSF(t, k.Client(kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(16<<10)), "sfret", "ret", n)
	before := k.B.FetchedFromFiles()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var start atomic.Int64 // the log start offset the deleter has set
	var ok, failed atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for f := range 3 {
		cl := k.Client()
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(f), 1))
			for {
				select {
				case <-stop:
					return
				default:
				}
				from := start.Load() + rng.Int64N(n/4)
				resp, err := fetchV12(ctx, cl, "sfret", min(from, n-1), 64<<10)
				if err != nil {
					failed.Add(1) // a connection error is an error too; kgo reconnects
					continue
				}
				code, err := checkSF(resp, want)
				if err != nil {
					t.Errorf("fetch from %d: %v", from, err)
					return
				}
				switch code {
				case 0:
					ok.Add(1)
				case kerr.OffsetOutOfRange.Code, kerr.KafkaStorageError.Code:
					failed.Add(1)
				default:
					t.Errorf("fetch from %d: error %v", from, kerr.ErrorForCode(code))
					return
				}
			}
		})
	}
	adm := kadm.NewClient(k.Client())
	for s := int64(0); s < n-500; s += 50 {
		var offs kadm.Offsets
		offs.Add(kadm.Offset{Topic: "sfret", Partition: 0, At: s})
		res, err := adm.DeleteRecords(ctx, offs)
		if err == nil {
			err = res.Error()
		}
		if err != nil {
			t.Fatal(err)
		}
		start.Store(s)
		k.B.EnforceRetention(time.Now())
	}
	close(stop)
	wg.Wait()
	t.Logf("%d fetches answered with records, %d with an error; %d bytes sent from files", ok.Load(), failed.Load(), k.B.FetchedFromFiles()-before)
	if ok.Load() == 0 || k.B.FetchedFromFiles() == before {
		t.Fatal("no fetch was answered from the files during the race")
	}
}

// TestFetchDuringCompactionSwap: a fetch of a segment the cleaner is swapping, issued after the cleaned file was
// renamed over it and after every idle segment descriptor was closed (16 open files, 30 segments of another
// topic read meanwhile), gets the old segment's bytes from its still-open descriptor, never the cleaned file
// read at the old positions (its name now holds the cleaned file, so a reopen would read that). Before the cleaner
// kept the old file open across the rename, this fetch got KAFKA_STORAGE_ERROR (the old positions' batch headers
// did not parse in the cleaned file) in 3 runs of 3.
func TestFetchDuringCompactionSwap(t *testing.T) {
	t.Parallel()
	var k *kawatest.Broker
	var hooked atomic.Bool
	hookErr := make(chan error, 1)
	var want map[int64]string
	k = kawatest.NewBroker(t, func(c *config.Broker) {
		c.MaxOpenLogFiles = 16
		c.OnSegmentSwap = func(step string) {
			if step != "renamed" || !hooked.CompareAndSwap(false, true) {
				return
			}
			hookErr <- func() error {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				cl := k.Client()
				defer cl.Close()
				for off := int64(0); off < 3000; off += 100 { // another topic's 30 segments: the cache evicts idle files
					if _, err := fetchV12(ctx, cl, "sfother", off, 32<<10); err != nil {
						return err
					}
				}
				resp, err := fetchV12(ctx, cl, "sfswap", 0, 64<<10)
				if err != nil {
					return err
				}
				if code, err := checkSF(resp, want); err != nil || code != 0 {
					return errors.Join(err, kerr.ErrorForCode(code))
				}
				if len(resp.Topics[0].Partitions[0].RecordBatches) < 16<<10 {
					return errors.New("fetch of the old segment is too small to be sent from the file")
				}
				return nil
			}()
		}
	})
	compactedTopic(k, "sfswap", map[string]*string{"internal.segment.bytes": ptr("65536")})
	k.CreateTopic("sfother", 1, map[string]*string{"internal.segment.bytes": ptr("102400")})
	cl := k.Client(kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(16<<10))
	produceSF(t, cl, "sfother", "other", 3000)
	// Every key twice: the cleaner rewrites the first segments; the fetch must see their first versions.
	var recs []*kgo.Record
	for v := range 2 {
		for key := range 150 {
			recs = append(recs, &kgo.Record{Topic: "sfswap", Key: fmt.Appendf(nil, "k%d", key), Value: sfValue(fmt.Sprintf("v%d-k%d", v, key), 0)})
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res := cl.ProduceSync(ctx, recs...)
	if err := res.FirstErr(); err != nil {
		t.Fatal(err)
	}
	want = map[int64]string{}
	for _, r := range res {
		want[r.Record.Offset] = string(r.Record.Value)
	}
	rollPast(t, cl, "sfswap", "roll", 70)
	if err := k.B.CleanNow(); err != nil {
		t.Fatal(err)
	}
	if !hooked.Load() {
		t.Fatal("the cleaner swapped no segment")
	}
	if err := <-hookErr; err != nil {
		t.Fatalf("fetch during the swap: %v", err)
	}
}
