package broker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/config"
	"github.com/kawa-broker/kawa/internal/group"
	"github.com/kawa-broker/kawa/internal/partition"
	"github.com/kawa-broker/kawa/internal/producer"
	"github.com/kawa-broker/kawa/internal/txn"
)

// StallTxnMarkersEnv is a test hook for process-level crash tests: when the
// variable is set (to anything), `kawa serve` records transaction decisions
// but never writes their markers, so a test can SIGKILL the broker between
// the EndTxn acknowledgement and the markers. A restart without it completes
// them (txn.Coordinator.Load).
const StallTxnMarkersEnv = "KAWA_TEST_STALL_TXN_MARKERS"

// txnStore is the transaction coordinator's log: partition 0 of
// __transaction_state, written like __consumer_offsets (offsetsStore):
// durable before Append returns.
type txnStore struct{ s offsetsStore }

// Append implements txn.Store.
func (t txnStore) Append(ctx context.Context, recs []txn.Record) error {
	out := make([]group.Record, len(recs))
	for i, r := range recs {
		out[i] = group.Record(r)
	}
	return t.s.Append(ctx, out)
}

// txnMarkers writes transaction markers to this broker's partitions.
type txnMarkers struct{ b *Broker }

// WriteMarker implements txn.Markers: append the control batch (validated by
// the partition's producer state) and wait until it is durable.
func (m txnMarkers) WriteMarker(ctx context.Context, tp txn.TopicPartition, info producer.MarkerInfo) error {
	return m.b.writeMarker(ctx, tp.Topic, tp.Partition, info)
}

// openTxn creates __transaction_state if needed, replays it and starts the
// transaction coordinator. Call after openGroups: completing a transaction
// found prepared in the log needs the group coordinator.
func (b *Broker) openTxn() error {
	p, err := b.internalPartition(txnStateTopic)
	if err != nil {
		return err
	}
	recs, err := readAll(p)
	if err != nil {
		return fmt.Errorf("broker: replay %s: %w", txnStateTopic, err)
	}
	cfg := txn.Config{MaxTimeout: b.cfg.TxnMaxTimeout, IDExpiration: b.cfg.TransactionalIDExpiration, Logger: b.lg}
	if os.Getenv(StallTxnMarkersEnv) != "" {
		b.lg.Warn("test hook: transaction markers are never written", "env", StallTxnMarkersEnv)
		cfg.StallMarkers = make(chan struct{})
	}
	b.txn = txn.New(cfg, txnStore{offsetsStore{p: p}}, txnMarkers{b}, b.groups, b.pids)
	trecs := make([]txn.Record, len(recs))
	for i, r := range recs {
		trecs[i] = txn.Record(r)
	}
	if err := b.txn.Load(trecs); err != nil {
		return fmt.Errorf("broker: load transactions: %w", err)
	}
	b.lg.Info("transaction coordinator loaded", "records", len(recs))
	return nil
}

// internalPartition returns partition 0 of an internal topic, creating the
// topic if needed with Kafka's configs for it (offsets.topic.* and
// transaction.state.log.*): cleanup.policy=compact, since the latest record
// of each key is the coordinator's state, segments of
// --offsets-topic-segment-bytes (the cleaner never touches the active one),
// no time or size retention. A topic a data dir holds from before gets those
// configs too.
func (b *Broker) internalPartition(name string) (*partition.Partition, error) {
	return b.internalPartitionWith(name, "compact")
}

// internalPartitionWith is internalPartition with cleanup.policy policy
// (__share_group_state is pruned by its coordinator, not compacted).
func (b *Broker) internalPartitionWith(name, policy string) (*partition.Partition, error) {
	seg := b.cfg.OffsetsTopicSegmentBytes
	want := map[string]string{"cleanup.policy": policy, "retention.ms": "-1", "retention.bytes": "-1",
		"segment.bytes": strconv.FormatInt(max(seg, config.MinSegmentBytes), 10)}
	if seg < config.MinSegmentBytes { // tests: smaller than a topic may ask for
		want["internal.segment.bytes"] = strconv.FormatInt(seg, 10)
	}
	t, ok := b.catalog.Get(name)
	if !ok {
		var err error
		if t, err = b.newTopic(name, 1, -1, want); err != nil {
			return nil, err
		}
		if t, err = b.createTopic(t); err != nil {
			return nil, err
		}
	} else if !maps.Equal(t.Configs, want) {
		t.Configs = want
		if err := b.catalog.Update(t); err != nil {
			return nil, fmt.Errorf("broker: configs of %s: %w", name, err)
		}
		b.applyTopicConfig(name, b.topicConfig(t))
	}
	p := b.partition(t.Name, 0)
	if p == nil {
		return nil, fmt.Errorf("broker: %s partition 0 missing", name)
	}
	return p, nil
}

// Txn returns the transaction coordinator (tests use its hooks, e.g.
// ForceEpoch).
func (b *Broker) Txn() *txn.Coordinator { return b.txn }

// initTransactional answers InitProducerId with a transactional.id through
// the transaction coordinator (see txn.Coordinator.InitProducerID). v3+
// carries the caller's producer ID and epoch (KIP-360). PRODUCER_FENCED is
// INVALID_PRODUCER_EPOCH before v4 (KIP-588).
func (b *Broker) initTransactional(ctx context.Context, r *kmsg.InitProducerIDRequest, resp *kmsg.InitProducerIDResponse) reply {
	expected := txn.ProducerIDEpoch{ProducerID: -1, Epoch: -1}
	if r.Version >= 3 {
		expected = txn.ProducerIDEpoch{ProducerID: r.ProducerID, Epoch: r.ProducerEpoch}
	}
	timeout := time.Duration(r.TransactionTimeoutMillis) * time.Millisecond
	return func() (kmsg.Response, error) {
		pe, err := b.txn.InitProducerID(ctx, *r.TransactionalID, timeout, expected)
		resp.ErrorCode = txnCode(err, r.Version, 4)
		if err == nil {
			resp.ProducerID, resp.ProducerEpoch = pe.ProducerID, pe.Epoch
		}
		return resp, nil
	}
}

// txnCode is the response code for a coordinator error: PRODUCER_FENCED
// exists since KIP-588; request versions before fencedSince get
// INVALID_PRODUCER_EPOCH instead, which such clients treat the same way.
func txnCode(err error, version, fencedSince int16) int16 {
	code := errCode(err)
	if code == kerr.ProducerFenced.Code && version < fencedSince {
		return kerr.InvalidProducerEpoch.Code
	}
	return code
}

// coordinatorAvailable answers FindCoordinator's availability per key type:
// groups (0) and transactions (1) are served by this node; other types are
// INVALID_REQUEST.
func (b *Broker) coordinatorAvailable(keyType int8) int16 {
	switch keyType {
	case 0:
		return 0
	case 1:
		if b.txn == nil {
			return kerr.CoordinatorNotAvailable.Code
		}
		return 0
	}
	return kerr.InvalidRequest.Code
}

// txnWrite checks a transactional batch before its append: Produce v12+
// enrols the partition in the transaction (addTxnWrite, KIP-890 part 2),
// older versions only verify (verifyTxnWrite, part 1).
func (b *Broker) txnWrite(ctx context.Context, txnID *string, version int16, producerID int64, epoch int16, topic string, idx int32) (func(), error) {
	if version >= 12 {
		if err := b.addTxnWrite(ctx, txnID, producerID, epoch, topic, idx); err != nil {
			return nil, err
		}
	}
	return b.verifyTxnWrite(txnID, version, producerID, epoch, topic, idx)
}

// addTxnWrite is the implicit AddPartitionsToTxn of Produce v12+ (KIP-890
// part 2): the partition joins the producer's transaction, opening one if
// none is, durably before the append; the write is then verified and pinned
// as in part 1. It blocks the connection like any append does, which keeps
// the producer's in-flight batches in order. Errors are those of
// verifyTxnWrite (a wrong state is INVALID_TXN_STATE).
func (b *Broker) addTxnWrite(ctx context.Context, txnID *string, producerID int64, epoch int16, topic string, idx int32) error {
	if txnID == nil || *txnID == "" {
		return nil // verifyTxnWrite answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED
	}
	pe := txn.ProducerIDEpoch{ProducerID: producerID, Epoch: epoch}
	err := b.txn.AddPartitions(ctx, *txnID, pe, []txn.TopicPartition{{Topic: topic, Partition: idx}})
	if err != nil {
		b.lg.Debug("implicit add to transaction refused", "transactional_id", *txnID, "producer_id", producerID, "epoch", epoch, "topic", topic, "partition", idx, "err", err)
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, kerr.ProducerFenced):
		return fmt.Errorf("%w: the producer epoch is not the transaction's", kerr.InvalidProducerEpoch)
	case errors.Is(err, kerr.ConcurrentTransactions), errors.Is(err, kerr.CoordinatorNotAvailable):
		return fmt.Errorf("%w: cannot add to the transaction now: %v", kerr.NotEnoughReplicas, err)
	}
	return err
}

// verifyTxnWrite is KIP-890 part 1 for a transactional batch to topic/idx:
// the request must name its transactional.id, whose coordinator must have
// this partition in an Ongoing transaction of the batch's producer ID and
// epoch. On success the transaction is pinned (its markers wait) until
// release is called after the append. Produce errors: a missing
// transactional.id is TRANSACTIONAL_ID_AUTHORIZATION_FAILED (as Kafka); a
// partition not in the transaction is TRANSACTION_ABORTABLE from Produce
// v11 and INVALID_TXN_STATE before (KIP-890, KAFKA-16314); a fenced epoch is
// INVALID_PRODUCER_EPOCH; a transaction that is ending or a coordinator that
// is unavailable is NOT_ENOUGH_REPLICAS, which every client retries.
func (b *Broker) verifyTxnWrite(txnID *string, version int16, producerID int64, epoch int16, topic string, idx int32) (func(), error) {
	if txnID == nil || *txnID == "" {
		return nil, fmt.Errorf("%w: transactional records need the request's transactional.id", kerr.TransactionalIDAuthorizationFailed)
	}
	release, err := b.txn.Pin(*txnID, txn.ProducerIDEpoch{ProducerID: producerID, Epoch: epoch}, txn.TopicPartition{Topic: topic, Partition: idx})
	if err != nil {
		b.lg.Debug("transactional write refused", "transactional_id", *txnID, "producer_id", producerID, "epoch", epoch, "topic", topic, "partition", idx, "err", err)
	}
	switch {
	case err == nil:
		return release, nil
	case errors.Is(err, kerr.TransactionAbortable):
		if version >= 11 {
			return nil, fmt.Errorf("%w: partition was not added to the transaction", kerr.TransactionAbortable)
		}
		return nil, fmt.Errorf("%w: partition was not added to the transaction", kerr.InvalidTxnState)
	case errors.Is(err, kerr.ProducerFenced):
		return nil, fmt.Errorf("%w: the producer epoch is not the transaction's", kerr.InvalidProducerEpoch)
	case errors.Is(err, kerr.ConcurrentTransactions), errors.Is(err, kerr.CoordinatorNotAvailable):
		return nil, fmt.Errorf("%w: cannot verify the transaction now: %v", kerr.NotEnoughReplicas, err)
	}
	return nil, err
}
