package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/batch"
	"github.com/kawa-broker/kawa/internal/group"
	"github.com/kawa-broker/kawa/internal/partition"
)

// offsetsStore is the group coordinator's log: partition 0 of the internal
// topic __consumer_offsets. Entries are appended as ordinary uncompressed
// batches and are durable (fsynced under --fsync=always) before Append
// returns, so an acknowledged OffsetCommit or DeleteGroups survives SIGKILL.
type offsetsStore struct {
	p *partition.Partition
}

// Append implements group.Store.
func (s offsetsStore) Append(ctx context.Context, recs []group.Record) error {
	if len(recs) == 0 {
		return nil
	}
	next, err := s.appendBatch(recs)
	if err != nil {
		return err
	}
	return s.p.WaitDurable(ctx, next)
}

// appendBatch appends recs as one batch and returns the offset after it,
// without waiting for it to be durable.
func (s offsetsStore) appendBatch(recs []group.Record) (int64, error) {
	ts := time.Now().UnixMilli()
	krs := make([]kmsg.Record, len(recs))
	for i, r := range recs {
		krs[i] = kmsg.Record{Key: r.Key, Value: r.Value}
	}
	b := batch.Encode(batch.Header{FirstTimestamp: ts, MaxTimestamp: ts, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, krs)
	h, err := batch.ParseHeader(b)
	if err != nil {
		return 0, err
	}
	res, err := s.p.Append(b, h, false, time.Now())
	if err != nil {
		return 0, err
	}
	return res.LastOffset + 1, nil
}

// readAll returns every record of the partition in offset order (replay at
// start). Control batches are skipped.
func readAll(p *partition.Partition) ([]group.Record, error) {
	var out []group.Record
	err := scanRecords(p, func(_ int64, key, value []byte) {
		out = append(out, group.Record{Key: key, Value: value})
	})
	return out, err
}

// scanRecords calls each with every record of the partition from its log
// start, in offset order, with its offset. Control batches are skipped.
func scanRecords(p *partition.Partition, each func(offset int64, key, value []byte)) error {
	off := p.LogStart()
	for {
		res, err := p.Read(off, 4<<20, partition.ReadUncommitted)
		if err != nil {
			return err
		}
		if len(res.Records) == 0 {
			return nil
		}
		var ierr error
		_, err = batch.Iterate(res.Records, func(h batch.Header, raw []byte) bool {
			off = h.LastOffset() + 1
			if h.Control() {
				return true
			}
			recs, err := batch.Records(raw)
			if err != nil {
				ierr = err
				return false
			}
			for _, r := range recs {
				each(h.BaseOffset+int64(r.OffsetDelta), r.Key, r.Value)
			}
			return true
		})
		if ierr != nil {
			return ierr
		}
		if err != nil {
			return fmt.Errorf("%w: %v", kerr.CorruptMessage, err)
		}
	}
}

// openGroups creates __consumer_offsets if needed, replays it and starts the
// group coordinator.
func (b *Broker) openGroups() error {
	p, err := b.internalPartition(consumerOffsetsTopic)
	if err != nil {
		return err
	}
	recs, err := readAll(p)
	if err != nil {
		return fmt.Errorf("broker: replay %s: %w", consumerOffsetsTopic, err)
	}
	b.groups = group.New(group.Config{
		OffsetsRetention:      b.cfg.OffsetsRetention,
		InitialRebalanceDelay: b.cfg.GroupInitialRebalanceDelay,
		TopicExists:           func(topic string, part int32) bool { return b.partition(topic, part) != nil },
		TopicName: func(id [16]byte) (string, bool) {
			t, ok := b.catalog.ByID(id)
			return t.Name, ok
		},
		TopicID: func(name string) ([16]byte, bool) {
			t, ok := b.catalog.Get(name)
			return t.ID, ok
		},
		Topics: func() []group.TopicInfo {
			var out []group.TopicInfo
			for _, t := range b.catalog.List() {
				if !t.Internal {
					out = append(out, group.TopicInfo{Name: t.Name, ID: t.ID, Partitions: t.Partitions})
				}
			}
			return out
		},
		ConsumerHeartbeatInterval: b.cfg.ConsumerHeartbeatInterval,
		ConsumerSessionTimeout:    b.cfg.ConsumerSessionTimeout,
		ConsumerMaxSize:           b.cfg.ConsumerMaxSize,
		Logger:                    b.lg,
	}, offsetsStore{p: p})
	if err := b.groups.Load(recs); err != nil {
		return fmt.Errorf("broker: load groups: %w", err)
	}
	// Offsets of topics the catalog no longer has are left over from a
	// DeleteTopics cut short by a crash; Kafka would have deleted them.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := b.groups.DeleteTopicOffsets(ctx, func(topic string) bool { _, ok := b.catalog.Get(topic); return !ok }); err != nil {
		return fmt.Errorf("broker: delete offsets of deleted topics: %w", err)
	}
	b.lg.Info("group coordinator loaded", "records", len(recs))
	return nil
}
