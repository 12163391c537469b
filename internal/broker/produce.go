package broker

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/batch"
	"github.com/kawa-broker/kawa/internal/config"
	"github.com/kawa-broker/kawa/internal/partition"
	"github.com/kawa-broker/kawa/internal/wire"
)

// Produce (key 0), versions 3-12.
//
// Behaviour: record batch v2 only (v3+). Each partition's records must be
// exactly one batch; it is validated (length, magic, CRC-32C, record framing
// and count; compressed batches are decompressed to check) and stored as
// received with offsets assigned. A transactional batch is verified first
// (KIP-890 part 1, txn.go verifyTxnWrite): its partition must be in the
// producer's Ongoing transaction, else INVALID_TXN_STATE (v3-v10) or
// TRANSACTION_ABORTABLE (v11), so a delayed write can never land after its
// transaction's marker. From v12 (KIP-890 part 2, transaction.version 2) the
// broker adds the partition to the producer's transaction itself
// (txn.go addTxnWrite) instead of requiring AddPartitionsToTxn first. Errors per partition: CORRUPT_MESSAGE,
// INVALID_RECORD, UNSUPPORTED_FOR_MESSAGE_FORMAT, MESSAGE_TOO_LARGE, UNSUPPORTED_COMPRESSION_TYPE (zstd below v7, KIP-110)
// (max.message.bytes), UNKNOWN_TOPIC_OR_PARTITION, and the idempotence codes
// (OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH; a duplicate is
// answered as success with the original offsets, KIP-98). Acks: 0 sends no
// response (a partition error closes the connection instead, as Kafka does), 1 answers after the append, -1 after the append is durable
// (fsynced under --fsync=always, group-committed); other values are
// INVALID_REQUIRED_ACKS. Topics with message.timestamp.type=LogAppendTime
// get the append time written into the batch and returned (v2+); on
// CreateTime topics a record outside message.timestamp.before.max.ms /
// after.max.ms of the broker's clock fails the batch with INVALID_TIMESTAMP
// (KIP-937). acks=-1 to a topic whose min.insync.replicas exceeds the ISR
// (1: one node) is NOT_ENOUGH_REPLICAS, nothing written. A topic whose
// compression.type names a codec stores each batch recompressed to it at
// its compression.*.level (KIP-390; LogValidator's rebuild: producer fields,
// sequences, timestamps and offsets kept), max.message.bytes checked again
// on the result. Control batches from clients are INVALID_RECORD. v8+
// carries ErrorMessage.
//
// Authorization (with an authorizer): WRITE on each topic, else
// TOPIC_AUTHORIZATION_FAILED for its partitions; a transactional produce
// also needs WRITE on its transactional ID, else every partition is
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED (KafkaApis.handleProduceRequest).
//
// Version notes: v13 (topic IDs) is not advertised.
func (b *Broker) handleProduce(ctx context.Context, info wire.RequestInfo, req kmsg.Request) reply {
	r := req.(*kmsg.ProduceRequest)
	if b.authz == nil {
		return b.produce(ctx, r)
	}
	txnDenied := r.TransactionID != nil && !b.authorized(info, kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTransactionalId, *r.TransactionID)
	var denied []kmsg.ProduceResponseTopic
	allowed := r.Topics[:0:0]
	for _, rt := range r.Topics {
		code := int16(0)
		switch {
		case txnDenied:
			code = kerr.TransactionalIDAuthorizationFailed.Code
		case !b.authorized(info, kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTopic, rt.Topic):
			code = kerr.TopicAuthorizationFailed.Code
		default:
			allowed = append(allowed, rt)
			continue
		}
		st := kmsg.NewProduceResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition, sp.ErrorCode = rp.Partition, code
			sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = -1, -1, -1
			st.Partitions = append(st.Partitions, sp)
		}
		denied = append(denied, st)
	}
	if len(denied) == 0 {
		return b.produce(ctx, r)
	}
	r.Topics = allowed
	next := b.produce(ctx, r)
	return func() (kmsg.Response, error) {
		resp, err := next()
		if err != nil {
			return nil, err
		}
		if resp == nil { // acks=0: a refused partition is reported by closing the connection, as other errors are
			return nil, fmt.Errorf("acks=0 produce to %s refused: %w", denied[0].Topic, kerr.ErrorForCode(denied[0].Partitions[0].ErrorCode))
		}
		pr := resp.(*kmsg.ProduceResponse)
		pr.Topics = append(pr.Topics, denied...)
		return pr, nil
	}
}

// ReleasesFrame implements server.FrameReleaser: a Produce request's frame
// may be reused once Handle returns. handleProduce appends every batch before
// it returns (log.Append writes it to the segment file; recompression builds
// new bytes; duplicates, producer state and errors keep only header values),
// and its Reply waits on offsets and fills the response it built, never
// touching the records. Frames were 99.5 % of the broker's allocated bytes
// under produce load (issue 10). Other APIs keep request bytes (JoinGroup
// metadata, SyncGroup assignments, ...) or use them in their Reply.
func (b *Broker) ReleasesFrame(key int16) bool { return key == kmsg.Produce.Int16() }

// produced is one partition's outcome awaiting durability.
type produced struct {
	p      *partition.Partition
	ti, pi int   // index of the partition's entry in the response
	end    int64 // wait until offsets below end are durable
}

func (b *Broker) produce(ctx context.Context, r *kmsg.ProduceRequest) reply {
	resp := r.ResponseKind().(*kmsg.ProduceResponse)
	acksOK := r.Acks == 0 || r.Acks == 1 || r.Acks == -1
	var waits []produced
	now := time.Now()
	for _, rt := range r.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = -1, -1, -1
			st.Partitions = append(st.Partitions, sp)
			spp := &st.Partitions[len(st.Partitions)-1]
			if !acksOK {
				spp.ErrorCode = kerr.InvalidRequiredAcks.Code
				continue
			}
			p, res, err := b.appendPartition(ctx, r, rt.Topic, rp.Partition, rp.Records, now)
			if err != nil {
				b.metrics.ProduceErrors.WithLabelValues(kerr.ErrorForCode(errCode(err)).Error()).Inc()
				spp.ErrorCode = errCode(err)
				if r.Version >= 8 {
					spp.ErrorMessage = errMsg(err)
				}
				continue
			}
			spp.BaseOffset = res.BaseOffset
			spp.LogAppendTime = res.AppendTime
			spp.LogStartOffset = p.LogStart()
			if r.Acks == -1 {
				waits = append(waits, produced{p: p, ti: len(resp.Topics), pi: len(st.Partitions) - 1, end: res.LastOffset + 1})
			}
		}
		resp.Topics = append(resp.Topics, st)
	}
	if r.Acks == 0 {
		// No response is expected, so a failed partition can only be reported by
		// closing the connection: the producer then notices and refreshes its
		// metadata (KafkaApis.handleProduceRequest, acks=0 with errorInResponse).
		if err := firstProduceError(resp); err != nil {
			return func() (kmsg.Response, error) { return nil, err }
		}
		return func() (kmsg.Response, error) { return nil, nil }
	}
	timeout := time.Duration(r.TimeoutMillis) * time.Millisecond
	return func() (kmsg.Response, error) {
		if len(waits) == 0 {
			return resp, nil
		}
		wctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		for _, w := range waits {
			if err := w.p.WaitDurable(wctx, w.end); err != nil {
				code := kerr.KafkaStorageError.Code
				if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
					code = kerr.RequestTimedOut.Code
				}
				sp := &resp.Topics[w.ti].Partitions[w.pi]
				// Kafka answers a failed partition with offsets -1 (PartitionResponse(error)).
				sp.ErrorCode, sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = code, -1, -1, -1
			}
		}
		return resp, nil
	}
}

// firstProduceError returns the first partition error of resp, naming the
// partition, or nil when every partition succeeded.
func firstProduceError(resp *kmsg.ProduceResponse) error {
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				return fmt.Errorf("acks=0 produce to %s/%d failed: %w", t.Topic, p.Partition, kerr.ErrorForCode(p.ErrorCode))
			}
		}
	}
	return nil
}

// appendPartition validates one partition's records and appends them. A
// transactional batch is first verified with the transaction coordinator
// (verifyTxnWrite; from v12 addTxnWrite enrols it first), which holds its
// markers until the append is done.
func (b *Broker) appendPartition(ctx context.Context, r *kmsg.ProduceRequest, topic string, idx int32, records []byte, now time.Time) (*partition.Partition, partition.AppendResult, error) {
	t, ok := b.catalog.Get(topic)
	if !ok {
		return nil, partition.AppendResult{}, kerr.UnknownTopicOrPartition
	}
	p, err := b.lookup(topic, idx)
	if err != nil {
		return nil, partition.AppendResult{}, err
	}
	tc := b.topicConfig(t)
	if len(records) > int(tc.MaxMessageBytes) {
		return nil, partition.AppendResult{}, fmt.Errorf("%w: batch of %d bytes exceeds max.message.bytes %d", kerr.MessageTooLarge, len(records), tc.MaxMessageBytes)
	}
	if err := singleV2Batch(records); err != nil {
		return nil, partition.AppendResult{}, err
	}
	if h, err := batch.ParseHeader(records); err == nil && h.Codec() == batch.CodecZstd && r.Version < 7 {
		// KIP-110: zstd needs Produce v7+, so old clients cannot write data
		// that old consumers could not read (ProduceRequest.validateRecords).
		return nil, partition.AppendResult{}, fmt.Errorf("%w: zstd batches need produce v7+, got v%d", kerr.UnsupportedCompressionType, r.Version)
	}
	if r.Acks == -1 && tc.MinInsyncReplicas > 1 {
		// Partition.appendRecordsToLeader: acks=all needs min.insync.replicas in the ISR, which on one
		// node is this broker alone. Checked before the append, so nothing is written.
		return nil, partition.AppendResult{}, fmt.Errorf("%w: the size of the current ISR 1 is insufficient to satisfy the min.isr requirement of %d for partition %s-%d",
			kerr.NotEnoughReplicas, tc.MinInsyncReplicas, topic, idx)
	}
	h, recs, err := batch.ValidateRecords(records)
	if err != nil {
		return nil, partition.AppendResult{}, err
	}
	if h.Control() {
		return nil, partition.AppendResult{}, fmt.Errorf("%w: clients may not produce control batches", kerr.InvalidRecord)
	}
	logAppendTime := tc.TimestampType == "LogAppendTime"
	if !logAppendTime {
		if err := checkTimestamps(h, recs, now, tc); err != nil {
			return nil, partition.AppendResult{}, err
		}
	}
	if codec, level, ok := targetCodec(tc); ok && codec != h.Codec() {
		// compression.type names a codec: store the batch in it, as Kafka's LogValidator does. The
		// producer fields, sequences, timestamps and offsets deltas stay; a fetch returns this batch.
		if records, err = batch.Recompress(h, recs, codec, level); err != nil {
			return nil, partition.AppendResult{}, fmt.Errorf("%w: recompressing to %s: %v", kerr.UnknownServerError, tc.CompressionType, err)
		}
		if h, err = batch.ParseHeader(records); err != nil {
			return nil, partition.AppendResult{}, err
		}
		if len(records) > int(tc.MaxMessageBytes) {
			return nil, partition.AppendResult{}, fmt.Errorf("%w: batch of %d bytes after recompression to %s exceeds max.message.bytes %d", kerr.MessageTooLarge, len(records), tc.CompressionType, tc.MaxMessageBytes)
		}
	}
	if tc.Compact() {
		if err := requireKeys(records, topic, idx); err != nil {
			return nil, partition.AppendResult{}, err
		}
	}
	if h.Transactional() {
		release, err := b.txnWrite(ctx, r.TransactionID, r.Version, h.ProducerID, h.ProducerEpoch, topic, idx)
		if err != nil {
			return nil, partition.AppendResult{}, err
		}
		defer release()
	}
	res, err := p.Append(records, h, logAppendTime, now)
	if err != nil {
		return nil, partition.AppendResult{}, err
	}
	b.metrics.ProducedBytes.Add(float64(len(records)))
	return p, res, nil
}

// singleV2Batch applies Kafka's ProduceRequest.validateRecords for v3+: the
// records must be exactly one batch of magic 2, else INVALID_RECORD. Damage
// inside that batch (length, CRC) is left to batch.Validate
// (CORRUPT_MESSAGE).
func singleV2Batch(records []byte) error {
	if len(records) == 0 {
		return fmt.Errorf("%w: produce v3+ needs exactly one record batch", kerr.InvalidRecord)
	}
	if m, ok := batch.Magic(records); ok && m != 2 {
		return fmt.Errorf("%w: produce v3+ accepts only magic 2 record batches, got magic %d", kerr.InvalidRecord, m)
	}
	first, err := batch.ParseHeader(records)
	if err != nil {
		return nil // too short to judge: batch.Validate reports it as corrupt
	}
	if n := first.Size(); n > 0 && n < len(records) {
		if h, err := batch.ParseHeader(records[n:]); err == nil && h.Magic == 2 {
			return fmt.Errorf("%w: produce v3+ allows exactly one record batch per partition", kerr.InvalidRecord)
		}
	}
	return nil
}

// requireKeys is Kafka's LogValidator rule for compacted topics: every record has a key (the cleaner keeps the
// latest record per key), else INVALID_RECORD. records has passed batch.Validate.
func requireKeys(records []byte, topic string, idx int32) error {
	recs, err := batch.Records(records)
	if err != nil {
		return err
	}
	for _, r := range recs {
		if r.Key == nil {
			return fmt.Errorf("%w: compacted topic cannot accept message without key in topic partition %s-%d", kerr.InvalidRecord, topic, idx)
		}
	}
	return nil
}

// targetCodec returns the codec and level (KIP-390) batches of a topic are stored in, ok false when
// compression.type=producer keeps the producer's.
func targetCodec(tc config.Topic) (codec int8, level int, ok bool) {
	switch tc.CompressionType {
	case config.CompressionUncompressed:
		return batch.CodecNone, 0, true
	case "gzip":
		return batch.CodecGzip, int(tc.CompressionGzipLevel), true
	case "snappy":
		return batch.CodecSnappy, 0, true
	case "lz4":
		return batch.CodecLz4, int(tc.CompressionLz4Level), true
	case "zstd":
		return batch.CodecZstd, int(tc.CompressionZstdLevel), true
	}
	return 0, 0, false
}

// checkTimestamps is KIP-937's check of a CreateTime topic (LogValidator.validateTimestamp): every
// record's timestamp must lie in [now - message.timestamp.before.max.ms, now +
// message.timestamp.after.max.ms], else the batch is refused with INVALID_TIMESTAMP. Records without a
// timestamp (-1) are not checked.
func checkTimestamps(h batch.Header, recs []byte, now time.Time, tc config.Topic) error {
	ms := max(now.UnixMilli(), 0)
	// Both limits are >= 0 and the clock is past 1970, so lo cannot overflow; hi saturates.
	lo, hi := ms-tc.TimestampBeforeMaxMs, int64(math.MaxInt64)
	if tc.TimestampAfterMaxMs <= math.MaxInt64-ms {
		hi = ms + tc.TimestampAfterMaxMs
	}
	var err error
	batch.EachTimestamp(h, recs, func(ts int64, delta int32) bool {
		if ts != -1 && (ts < lo || ts > hi) {
			err = fmt.Errorf("%w: timestamp %d of the message at offset delta %d is out of range: it should be within [%d, %d]", kerr.InvalidTimestamp, ts, delta, lo, hi)
			return false
		}
		return true
	})
	return err
}
