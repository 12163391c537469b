package broker

import (
	"context"

	"github.com/kawa-broker/kawa/internal/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeProducers (key 61), version 0 (KIP-664).
//
// Behaviour: for each partition, the producers with state there: producer
// ID, epoch, last sequence, last timestamp, the coordinator epoch of the
// last marker and the first offset of the open transaction (-1 if none), so
// an operator can find a hanging transaction and abort it with
// WriteTxnMarkers (`kawa txn abort`). Unknown partitions get
// UNKNOWN_TOPIC_OR_PARTITION, offline ones KAFKA_STORAGE_ERROR. With an
// authorizer a topic without READ is TOPIC_AUTHORIZATION_FAILED.
func (b *Broker) handleDescribeProducers(ctx context.Context, info wire.RequestInfo, req kmsg.Request) reply {
	r := req.(*kmsg.DescribeProducersRequest)
	resp := r.ResponseKind().(*kmsg.DescribeProducersResponse)
	for _, t := range r.Topics {
		rt := kmsg.NewDescribeProducersResponseTopic()
		rt.Topic = t.Topic
		topicOK := b.authorized(info, kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, t.Topic)
		for _, idx := range t.Partitions {
			rp := kmsg.NewDescribeProducersResponseTopicPartition()
			rp.Partition = idx
			if !topicOK {
				rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			p, err := b.lookup(t.Topic, idx)
			if err != nil {
				rp.ErrorCode, rp.ErrorMessage = errCode(err), errMsg(err)
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			for _, pi := range p.Producers() {
				ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
				ap.ProducerID, ap.ProducerEpoch, ap.LastSequence = pi.ProducerID, int32(pi.Epoch), pi.LastSequence
				ap.LastTimestamp, ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = pi.LastTimestamp, pi.CoordinatorEpoch, pi.CurrentTxnStartOffset
				rp.ActiveProducers = append(rp.ActiveProducers, ap)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return now(resp)
}
