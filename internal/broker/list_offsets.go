package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListOffsets (key 2), versions 1-8.
//
// Behaviour: timestamp -1 latest (the high watermark; the last stable offset
// for read_committed, v2+), -2 earliest (log start), -3 max timestamp
// (KIP-734, v7+), -4 earliest local (KIP-405, v8+; equal to earliest, no
// tiered storage), otherwise the first offset whose record timestamp is at
// least the given one (offset -1 if none). Leader epoch is 0.
func init() {
	register(2, 1, 8, func(b *Broker, ctx context.Context, req kmsg.Request) reply {
		r := req.(*kmsg.ListOffsetsRequest)
		resp := r.ResponseKind().(*kmsg.ListOffsetsResponse)
		for _, rt := range r.Topics {
			st := kmsg.NewListOffsetsResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewListOffsetsResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.Timestamp, sp.Offset, sp.LeaderEpoch = -1, -1, -1
				p, err := b.lookup(rt.Topic, rp.Partition)
				switch {
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
	})
}

// DeleteRecords (key 21), versions 0-2.
//
// Behaviour: raises each partition's log start offset to the given offset
// (-1 = high watermark), persisted before the answer; whole segments below it
// are deleted. An offset above the high watermark is OFFSET_OUT_OF_RANGE.
// Producer state is kept (BL-03).
func init() {
	register(21, 0, 2, func(b *Broker, ctx context.Context, req kmsg.Request) reply {
		r := req.(*kmsg.DeleteRecordsRequest)
		resp := r.ResponseKind().(*kmsg.DeleteRecordsResponse)
		for _, rt := range r.Topics {
			st := kmsg.NewDeleteRecordsResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewDeleteRecordsResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.LowWatermark = -1
				if p, err := b.lookup(rt.Topic, rp.Partition); err != nil {
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
	})
}

// DescribeCluster (key 60), versions 0-1 (KIP-700).
func init() {
	register(60, 0, 1, func(b *Broker, ctx context.Context, req kmsg.Request) reply {
		r := req.(*kmsg.DescribeClusterRequest)
		resp := r.ResponseKind().(*kmsg.DescribeClusterResponse)
		if r.Version >= 1 && r.EndpointType != 1 {
			resp.ErrorCode = kerr.UnsupportedEndpointType.Code
			return now(resp)
		}
		resp.EndpointType = 1
		resp.ClusterID = b.clusterID
		resp.ControllerID = b.cfg.NodeID
		resp.Brokers = []kmsg.DescribeClusterResponseBroker{{NodeID: b.cfg.NodeID, Host: b.host, Port: b.port}}
		return now(resp)
	})
}
