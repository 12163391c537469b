package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/txn"
	"github.com/kawa-broker/kawa/internal/wire"
)

// AddPartitionsToTxn (key 24), versions 0-5.
//
// Behaviour: adds partitions to the producer's transaction (opening it) once
// that is durable in __transaction_state (txn.Coordinator.AddPartitions).
// v0-v3 (clients): one transaction; if any partition does not exist, those
// get UNKNOWN_TOPIC_OR_PARTITION, the others OPERATION_NOT_ATTEMPTED, and
// nothing is added; otherwise every partition gets the same code.
// v4+ (KIP-890 part 1, the brokers' batched form): many transactions, each
// either added or, with VerifyOnly, checked (NONE if the partition is in the
// Ongoing transaction, else TRANSACTION_ABORTABLE); the top-level ErrorCode
// is 0.
//
// Authorization (with an authorizer; KafkaApis.handleAddPartitionsToTxnRequest):
// v0-v3 need WRITE on the transactional ID (else every partition is
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and WRITE on each topic (else its
// partitions are TOPIC_AUTHORIZATION_FAILED, the others
// OPERATION_NOT_ATTEMPTED, and nothing is added); v4+ is broker-to-broker
// and needs CLUSTER_ACTION on the cluster (else CLUSTER_AUTHORIZATION_FAILED).
//
// Version notes: PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v2
// (KIP-588). v3 is flexible.
func (b *Broker) handleAddPartitionsToTxn(ctx context.Context, info wire.RequestInfo, req kmsg.Request) reply {
	r := req.(*kmsg.AddPartitionsToTxnRequest)
	return func() (kmsg.Response, error) {
		resp := r.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
		if r.Version < 4 {
			resp.Topics = b.addPartitionsV3(ctx, info, r)
			return resp, nil
		}
		if !b.authorizedCluster(info, kmsg.ACLOperationClusterAction) {
			resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
			return resp, nil
		}
		for _, t := range r.Transactions {
			resp.Transactions = append(resp.Transactions, b.addPartitionsV4(ctx, r.Version, t))
		}
		return resp, nil
	}
}

func (b *Broker) addPartitionsV3(ctx context.Context, info wire.RequestInfo, r *kmsg.AddPartitionsToTxnRequest) []kmsg.AddPartitionsToTxnResponseTopic {
	var tps []txn.TopicPartition
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			tps = append(tps, txn.TopicPartition{Topic: t.Topic, Partition: p})
		}
	}
	if b.authz != nil {
		if out, refused := b.addPartitionsRefused(info, r); refused {
			return out
		}
	}
	unknown, anyUnknown := b.unknownPartitions(tps)
	var code int16
	if !anyUnknown {
		code = txnCode(b.txn.AddPartitions(ctx, r.TransactionalID, txn.ProducerIDEpoch{ProducerID: r.ProducerID, Epoch: r.ProducerEpoch}, tps), r.Version, 2)
	}
	var out []kmsg.AddPartitionsToTxnResponseTopic
	for _, t := range r.Topics {
		rt := kmsg.NewAddPartitionsToTxnResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p, code
			if anyUnknown {
				rp.ErrorCode = kerr.OperationNotAttempted.Code
				if unknown[txn.TopicPartition{Topic: t.Topic, Partition: p}] {
					rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				}
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		out = append(out, rt)
	}
	return out
}

func (b *Broker) addPartitionsV4(ctx context.Context, version int16, t kmsg.AddPartitionsToTxnRequestTransaction) kmsg.AddPartitionsToTxnResponseTransaction {
	pe := txn.ProducerIDEpoch{ProducerID: t.ProducerID, Epoch: t.ProducerEpoch}
	var tps []txn.TopicPartition
	for _, rt := range t.Topics {
		for _, p := range rt.Partitions {
			tps = append(tps, txn.TopicPartition{Topic: rt.Topic, Partition: p})
		}
	}
	codes := map[txn.TopicPartition]int16{}
	if t.VerifyOnly {
		res, err := b.txn.Verify(t.TransactionalID, pe, tps)
		for _, tp := range tps {
			codes[tp] = errCode(err)
			if err == nil {
				codes[tp] = errCode(res[tp])
			}
		}
	} else if unknown, anyUnknown := b.unknownPartitions(tps); anyUnknown {
		for _, tp := range tps {
			codes[tp] = kerr.OperationNotAttempted.Code
			if unknown[tp] {
				codes[tp] = kerr.UnknownTopicOrPartition.Code
			}
		}
	} else {
		code := errCode(b.txn.AddPartitions(ctx, t.TransactionalID, pe, tps))
		for _, tp := range tps {
			codes[tp] = code
		}
	}
	out := kmsg.NewAddPartitionsToTxnResponseTransaction()
	out.TransactionalID = t.TransactionalID
	for _, rt := range t.Topics {
		st := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
		st.Topic = rt.Topic
		for _, p := range rt.Partitions {
			sp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
			sp.Partition, sp.ErrorCode = p, codes[txn.TopicPartition{Topic: rt.Topic, Partition: p}]
			st.Partitions = append(st.Partitions, sp)
		}
		out.Topics = append(out.Topics, st)
	}
	return out
}

// addPartitionsRefused answers a v0-v3 request the principal may not make
// whole: every partition TRANSACTIONAL_ID_AUTHORIZATION_FAILED without WRITE
// on the transactional ID; else, if some topic lacks WRITE, its partitions
// TOPIC_AUTHORIZATION_FAILED and the rest OPERATION_NOT_ATTEMPTED. refused
// is false when everything is allowed.
func (b *Broker) addPartitionsRefused(info wire.RequestInfo, r *kmsg.AddPartitionsToTxnRequest) (out []kmsg.AddPartitionsToTxnResponseTopic, refused bool) {
	txnOK := b.authorized(info, kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTransactionalId, r.TransactionalID)
	topicOK := map[string]bool{}
	for _, t := range r.Topics {
		if _, seen := topicOK[t.Topic]; !seen {
			topicOK[t.Topic] = txnOK && b.authorized(info, kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTopic, t.Topic)
			refused = refused || !topicOK[t.Topic]
		}
	}
	refused = refused || !txnOK
	if !refused {
		return nil, false
	}
	for _, t := range r.Topics {
		rt := kmsg.NewAddPartitionsToTxnResponseTopic()
		rt.Topic = t.Topic
		code := kerr.OperationNotAttempted.Code
		switch {
		case !txnOK:
			code = kerr.TransactionalIDAuthorizationFailed.Code
		case !topicOK[t.Topic]:
			code = kerr.TopicAuthorizationFailed.Code
		}
		for _, p := range t.Partitions {
			rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		out = append(out, rt)
	}
	return out, true
}

// unknownPartitions reports which of tps do not exist here.
func (b *Broker) unknownPartitions(tps []txn.TopicPartition) (unknown map[txn.TopicPartition]bool, any bool) {
	unknown = make(map[txn.TopicPartition]bool, len(tps))
	for _, tp := range tps {
		if b.partition(tp.Topic, tp.Partition) == nil {
			unknown[tp], any = true, true
		}
	}
	return unknown, any
}
