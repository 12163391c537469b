package broker

import (
	"context"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/share"
	"github.com/kawa-broker/kawa/internal/wire"
)

// DescribeShareGroupOffsets (key 90), versions 0-1 (KIP-932).
//
// Behaviour: per group, the share-partition start offset of each asked
// partition, or of every initialised share-partition when topics is null
// or empty. A partition not yet initialised answers start_offset -1.
// leader_epoch is 0 (Kawa has one broker). lag (v1, KIP-1226) is the
// records from the start offset to the high watermark not yet acknowledged
// or archived (-1 for a partition not initialised).
// Errors per group: GROUP_ID_NOT_FOUND; per partition
// UNKNOWN_TOPIC_OR_PARTITION. With an authorizer (Kafka's KafkaApis): a
// group without DESCRIBE is GROUP_AUTHORIZATION_FAILED; a named topic
// without DESCRIBE answers TOPIC_AUTHORIZATION_FAILED for its partitions,
// and when every topic is asked for, such topics are left out.
func (b *Broker) handleDescribeShareGroupOffsets(_ context.Context, info wire.RequestInfo, req kmsg.Request) reply {
	r := req.(*kmsg.DescribeShareGroupOffsetsRequest)
	resp := r.ResponseKind().(*kmsg.DescribeShareGroupOffsetsResponse)
	for _, rg := range r.Groups {
		sg := kmsg.DescribeShareGroupOffsetsResponseGroup{GroupID: rg.GroupID}
		if !b.authorized(info, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeGroup, rg.GroupID) {
			sg.ErrorCode = kerr.GroupAuthorizationFailed.Code
			resp.Groups = append(resp.Groups, sg)
			continue
		}
		all, ok := b.shares.StartOffsets(rg.GroupID)
		if !ok {
			sg.ErrorCode = kerr.GroupIDNotFound.Code
			resp.Groups = append(resp.Groups, sg)
			continue
		}
		asked := map[string][]int32{}
		if len(rg.Topics) == 0 {
			for tp := range all {
				asked[tp.Topic] = append(asked[tp.Topic], tp.Partition)
			}
		}
		for _, rt := range rg.Topics {
			asked[rt.Topic] = append(asked[rt.Topic], rt.Partitions...)
		}
		names := make([]string, 0, len(asked))
		for n := range asked {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, name := range names {
			deniedTopic := false
			if len(rg.Topics) == 0 {
				if !b.authorizedQuiet(info, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, name) {
					continue
				}
			} else {
				deniedTopic = !b.authorized(info, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, name)
			}
			t, known := b.catalog.Get(name)
			st := kmsg.DescribeShareGroupOffsetsResponseGroupTopic{Topic: name, TopicID: t.ID}
			ps := asked[name]
			sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
			for _, p := range ps {
				sp := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
				sp.Partition, sp.StartOffset, sp.Lag = p, -1, -1
				if deniedTopic {
					sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				} else if !known || p < 0 || p >= t.Partitions {
					sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				} else if off, ok := all[share.TP{Topic: name, Partition: p}]; ok {
					sp.StartOffset = off
					if part := b.partition(name, p); part != nil {
						if lag, ok := b.shares.Lag(rg.GroupID, share.TP{Topic: name, Partition: p}, part.HighWatermark()); ok {
							sp.Lag = lag
						}
					}
				}
				st.Partitions = append(st.Partitions, sp)
			}
			sg.Topics = append(sg.Topics, st)
		}
		resp.Groups = append(resp.Groups, sg)
	}
	return now(resp)
}
