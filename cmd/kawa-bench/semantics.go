package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/kawa-broker/kawa/cmd/internal/cli"
	"github.com/twmb/franz-go/pkg/kgo"
)

// txnLoop is produceLoop for a transactional client (W4): it opens a
// transaction, sends records as fast as the client takes them until
// txnRecords records were sent or txnEvery has passed, flushes and commits.
// A record is acknowledged when its transaction's commit returns: that is
// when a read_committed consumer may see it, so its latency runs from its
// intended send time to the commit.
func (b *produceBench) txnLoop(ctx context.Context, cl *kgo.Client, st *produceStats, payload []byte) {
	var failed atomic.Int64
	promise := func(r *kgo.Record, err error) {
		if err != nil {
			failed.Add(1)
			st.ack(r.Timestamp, err)
		}
	}
	var sent []time.Time // intended send times of the open transaction's records
	for ctx.Err() == nil && time.Now().Before(st.end) {
		if err := cl.BeginTransaction(); err != nil {
			st.ack(time.Now(), fmt.Errorf("begin transaction: %w", err))
			return
		}
		sent = sent[:0]
		deadline := time.Now().Add(b.txnEvery)
		for ctx.Err() == nil {
			intended := time.Now()
			if !intended.Before(st.end) || b.txnRecords > 0 && len(sent) == b.txnRecords ||
				b.txnEvery > 0 && !intended.Before(deadline) {
				break
			}
			cl.Produce(ctx, &kgo.Record{Value: payload, Timestamp: intended}, promise)
			sent = append(sent, intended)
		}
		// kgo's EndTransaction does not flush: a record still buffered
		// would reach the broker after EndTxn and be refused (KIP-890).
		before := failed.Load()
		if err := cl.Flush(ctx); err != nil {
			st.ack(time.Now(), fmt.Errorf("flush: %w", err))
			return
		}
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			st.ack(time.Now(), fmt.Errorf("commit: %w", err))
			return
		}
		if failed.Load() != before {
			return // the records' errors are counted; kgo aborted the transaction
		}
		for _, t := range sent {
			st.ack(t, nil)
		}
	}
}

// dupKey is a W6 record key: the producer's index (big-endian uint32) and
// the record's sequence in that producer's loop (big-endian uint64).
func dupKey(producer uint32, seq uint64) []byte {
	k := make([]byte, 12)
	binary.BigEndian.PutUint32(k, producer)
	binary.BigEndian.PutUint64(k[4:], seq)
	return k
}

// dupCount is what countDuplicates read.
type dupCount struct {
	records    int64 // read back, primed records included
	duplicates int64 // records whose dupKey was already read
}

// countDuplicates reads topic from its start to its current end and counts
// the records carrying a dupKey already seen. Each producer sends its
// sequences in order to one partition, so instead of a set of every key it
// keeps the highest sequence per (partition, producer): a key at or below it
// is a duplicate (or a reordering, which idempotence also forbids).
// Unkeyed records (prime's) are counted but not checked.
func countDuplicates(ctx context.Context, brokers, topic string) (dupCount, error) {
	var d dupCount
	type pp struct {
		partition int32
		producer  uint32
	}
	highest := map[pp]uint64{}
	fb := &fetchBench{brokers: brokers, topic: topic, idle: 10 * time.Second,
		fetchMaxBytes: 50 << 20, partitionMaxBytes: 1 << 20,
		onRecord: func(r *kgo.Record) {
			d.records++
			if len(r.Key) != 12 {
				return
			}
			k := pp{r.Partition, binary.BigEndian.Uint32(r.Key)}
			seq := binary.BigEndian.Uint64(r.Key[4:])
			if h, ok := highest[k]; ok && seq <= h {
				d.duplicates++
				return
			}
			highest[k] = seq
		}}
	fr := &fetchResult{Bench: "fetch", Topic: topic}
	err := fb.run(ctx, cli.NewFlagSet("fetch", ""), fr)
	if err == nil && !fr.Complete {
		err = fmt.Errorf("read back %d of %d records", fr.Records, fr.Expected)
	}
	return d, err
}
