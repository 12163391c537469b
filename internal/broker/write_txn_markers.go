package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/producer"
	"github.com/kawa-broker/kawa/internal/wire"
)

// WriteTxnMarkers (key 27), versions 0-2.
//
// Behaviour: writes each requested COMMIT/ABORT marker to each partition and
// answers once it is durable. Kawa's own coordinator writes markers
// in-process; this API serves operators' tools (kafka-transactions.sh abort,
// `kawa txn abort`, KIP-664) that close a hanging transaction by hand. The
// partition's producer state validates the marker: an epoch older than the
// producer's is INVALID_PRODUCER_EPOCH, a coordinator epoch older than the
// last one seen is TRANSACTION_COORDINATOR_FENCED, an unknown partition is
// UNKNOWN_TOPIC_OR_PARTITION. Markers for __consumer_offsets partitions are
// refused with INVALID_REQUEST: Kawa applies group offsets through the group
// coordinator, not through markers.
//
// Version notes: v1 is flexible; v2 carries the transaction version (KIP-890
// part 2), which decides how strictly the marker epoch is checked.
//
// Authorization (with an authorizer): CLUSTER_ACTION on the cluster, else
// every partition is CLUSTER_AUTHORIZATION_FAILED (`kawa txn abort` needs it
// granted, or a super user).
func (b *Broker) handleWriteTxnMarkers(ctx context.Context, info wire.RequestInfo, req kmsg.Request) reply {
	r := req.(*kmsg.WriteTxnMarkersRequest)
	if !b.authorizedCluster(info, kmsg.ACLOperationClusterAction) {
		resp := r.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
		for _, m := range r.Markers {
			rm := kmsg.NewWriteTxnMarkersResponseMarker()
			rm.ProducerID = m.ProducerID
			for _, t := range m.Topics {
				rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
					rp.Partition, rp.ErrorCode = p, kerr.ClusterAuthorizationFailed.Code
					rt.Partitions = append(rt.Partitions, rp)
				}
				rm.Topics = append(rm.Topics, rt)
			}
			resp.Markers = append(resp.Markers, rm)
		}
		return now(resp)
	}
	return func() (kmsg.Response, error) {
		resp := r.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
		for _, m := range r.Markers {
			resp.Markers = append(resp.Markers, b.writeTxnMarker(ctx, r.Version, m))
		}
		return resp, nil
	}
}

func (b *Broker) writeTxnMarker(ctx context.Context, version int16, m kmsg.WriteTxnMarkersRequestMarker) kmsg.WriteTxnMarkersResponseMarker {
	info := producer.MarkerInfo{
		ProducerID: m.ProducerID, Epoch: m.ProducerEpoch, CoordinatorEpoch: m.CoordinatorEpoch,
		Commit: m.Committed, TxnVersion: 1,
	}
	if version >= 2 {
		info.TxnVersion = int16(m.TransactionVersion)
	}
	out := kmsg.NewWriteTxnMarkersResponseMarker()
	out.ProducerID = m.ProducerID
	for _, t := range m.Topics {
		rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
		rt.Topic = t.Topic
		for _, idx := range t.Partitions {
			rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
			rp.Partition = idx
			rp.ErrorCode = errCode(b.writeOneMarker(ctx, t.Topic, idx, info))
			rt.Partitions = append(rt.Partitions, rp)
		}
		out.Topics = append(out.Topics, rt)
	}
	return out
}

// errInternalMarker refuses markers for internal topics.
var errInternalMarker = fmt.Errorf("%w: markers for internal topics are written by the coordinators", kerr.InvalidRequest)

func (b *Broker) writeOneMarker(ctx context.Context, topic string, idx int32, info producer.MarkerInfo) error {
	if topic == consumerOffsetsTopic || topic == txnStateTopic {
		return errInternalMarker
	}
	return b.writeMarker(ctx, topic, idx, info)
}

// writeMarker appends a control batch to one of this broker's partitions (the
// partition's producer state validates it) and waits until it is durable: the
// one marker path of the transaction coordinator and of WriteTxnMarkers.
func (b *Broker) writeMarker(ctx context.Context, topic string, idx int32, info producer.MarkerInfo) error {
	p, err := b.lookup(topic, idx)
	if err != nil {
		return err
	}
	off, err := p.WriteMarker(info, time.Now())
	if err != nil {
		return err
	}
	return p.WaitDurable(ctx, off+1)
}
