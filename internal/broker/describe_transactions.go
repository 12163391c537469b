package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/txn"
	"github.com/kawa-broker/kawa/internal/wire"
)

// DescribeTransactions (key 65), version 0 (KIP-664).
//
// Behaviour: for each transactional.id: its state (Kafka's names: Empty,
// Ongoing, PrepareCommit, ...), producer ID and epoch, transaction.timeout.ms,
// the start time of the open transaction (-1 if none) and its partitions;
// a transaction that added a group lists __consumer_offsets partition 0, as
// Kafka lists the group's offsets partition. Unknown ids get
// TRANSACTIONAL_ID_NOT_FOUND, an empty id INVALID_REQUEST. With an
// authorizer an id without DESCRIBE is TRANSACTIONAL_ID_AUTHORIZATION_FAILED
// and the partitions listed are those of topics the principal may DESCRIBE
// (KafkaApis.handleDescribeTransactionsRequest).
func (b *Broker) handleDescribeTransactions(ctx context.Context, info wire.RequestInfo, req kmsg.Request) reply {
	r := req.(*kmsg.DescribeTransactionsRequest)
	resp := r.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	for _, id := range r.TransactionalIDs {
		if !b.authorized(info, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTransactionalId, id) {
			st := kmsg.NewDescribeTransactionsResponseTransactionState()
			st.TransactionalID, st.ErrorCode = id, kerr.TransactionalIDAuthorizationFailed.Code
			st.ProducerID, st.ProducerEpoch, st.StartTimestamp = -1, -1, -1
			resp.TransactionStates = append(resp.TransactionStates, st)
			continue
		}
		st := b.describeTxn(id)
		kept := st.Topics[:0]
		for _, t := range st.Topics {
			if b.authorizedQuiet(info, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, t.Topic) {
				kept = append(kept, t)
			}
		}
		st.Topics = kept
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return now(resp)
}

func (b *Broker) describeTxn(id string) kmsg.DescribeTransactionsResponseTransactionState {
	st := kmsg.NewDescribeTransactionsResponseTransactionState()
	st.TransactionalID = id
	st.ProducerID, st.ProducerEpoch, st.StartTimestamp = -1, -1, -1
	if id == "" {
		st.ErrorCode = kerr.InvalidRequest.Code
		return st
	}
	d, err := b.txn.Describe(id)
	if err != nil {
		st.ErrorCode = errCode(err)
		return st
	}
	st.State = d.State.String()
	st.TimeoutMillis, st.StartTimestamp = d.TimeoutMs, d.StartMs
	st.ProducerID, st.ProducerEpoch = d.ProducerID, d.Epoch
	tps := d.SortedPartitions()
	if len(d.Groups) > 0 {
		tps = append(tps, txn.TopicPartition{Topic: consumerOffsetsTopic, Partition: 0})
	}
	for _, tp := range tps {
		if n := len(st.Topics); n > 0 && st.Topics[n-1].Topic == tp.Topic {
			st.Topics[n-1].Partitions = append(st.Topics[n-1].Partitions, tp.Partition)
			continue
		}
		t := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
		t.Topic, t.Partitions = tp.Topic, []int32{tp.Partition}
		st.Topics = append(st.Topics, t)
	}
	return st
}
