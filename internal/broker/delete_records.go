package broker

import (
	"context"

	"github.com/kawa-broker/kawa/internal/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteRecords (key 21), versions 0-2.
//
// Behaviour: raises each partition's log start offset to the given offset
// (-1 = high watermark), persisted before the answer; whole segments below it
// are deleted. An offset above the high watermark is OFFSET_OUT_OF_RANGE.
// Producer state is kept (BL-03).
//
// Authorization (with an authorizer): DELETE on the topic, else its
// partitions are TOPIC_AUTHORIZATION_FAILED.
func (b *Broker) handleDeleteRecords(ctx context.Context, info wire.RequestInfo, req kmsg.Request) reply {
	r := req.(*kmsg.DeleteRecordsRequest)
	resp := r.ResponseKind().(*kmsg.DeleteRecordsResponse)
	for _, rt := range r.Topics {
		st := kmsg.NewDeleteRecordsResponseTopic()
		st.Topic = rt.Topic
		topicOK := b.authorized(info, kmsg.ACLOperationDelete, kmsg.ACLResourceTypeTopic, rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewDeleteRecordsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LowWatermark = -1
			if !topicOK {
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			} else if p, err := b.lookup(rt.Topic, rp.Partition); err != nil {
				sp.ErrorCode = errCode(err)
			} else {
				lw, err := p.DeleteRecords(rp.Offset)
				sp.LowWatermark, sp.ErrorCode = lw, errCode(err)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return now(resp)
}
