package broker

import (
	"context"

	"github.com/kawa-broker/kawa/internal/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListOffsets (key 2), versions 1-8.
//
// Behaviour: timestamp -1 latest (the high watermark; the last stable offset
// for read_committed, v2+), -2 earliest (log start), -3 max timestamp
// (KIP-734, v7+), -4 earliest local (KIP-405, v8+; equal to earliest, no
// tiered storage), otherwise the first offset whose record timestamp is at
// least the given one (offset -1 if none). Leader epoch is 0. With an
// authorizer, a topic without DESCRIBE is TOPIC_AUTHORIZATION_FAILED.
func (b *Broker) handleListOffsets(ctx context.Context, info wire.RequestInfo, req kmsg.Request) reply {
	r := req.(*kmsg.ListOffsetsRequest)
	resp := r.ResponseKind().(*kmsg.ListOffsetsResponse)
	for _, rt := range r.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		topicOK := b.authorized(info, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.Timestamp, sp.Offset, sp.LeaderEpoch = -1, -1, -1
			p, err := b.lookup(rt.Topic, rp.Partition)
			switch {
			case !topicOK:
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case err != nil:
				sp.ErrorCode = errCode(err)
			case rp.CurrentLeaderEpoch > 0:
				sp.ErrorCode = kerr.UnknownLeaderEpoch.Code
			default:
				sp.Offset, sp.Timestamp = p.ListOffset(rp.Timestamp, r.IsolationLevel)
				sp.LeaderEpoch = 0
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return now(resp)
}
