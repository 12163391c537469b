package broker

import (
	"context"
	"fmt"

	"github.com/kawa-broker/kawa/internal/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ElectLeaders (key 43), versions 0-2 (KIP-183, KIP-460).
//
// Behaviour: a named partition that exists is ELECTION_NOT_NEEDED (its only
// replica already leads); an offline one (log corruption) is
// ELIGIBLE_LEADERS_NOT_AVAILABLE; an unknown one UNKNOWN_TOPIC_OR_PARTITION.
// A null topic list means every partition, and, as in Kafka, partitions
// that need no election are then left out, so the answer is empty.
// Preferred (0) and unclean (1) elections are answered alike; another
// election type is INVALID_REQUEST (v1+ top-level error).
//
// Authorization (with an authorizer): ALTER on the cluster, else
// CLUSTER_AUTHORIZATION_FAILED.
func (b *Broker) handleElectLeaders(ctx context.Context, info wire.RequestInfo, req kmsg.Request) reply {
	r := req.(*kmsg.ElectLeadersRequest)
	resp := r.ResponseKind().(*kmsg.ElectLeadersResponse)
	if !b.authorizedCluster(info, kmsg.ACLOperationAlter) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return now(resp)
	}
	if r.Version >= 1 && r.ElectionType != 0 && r.ElectionType != 1 {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return now(resp)
	}
	for _, rt := range r.Topics {
		st := kmsg.NewElectLeadersResponseTopic()
		st.Topic = rt.Topic
		for _, p := range rt.Partitions {
			sp := kmsg.NewElectLeadersResponseTopicPartition()
			sp.Partition = p
			_, err := b.lookup(rt.Topic, p)
			switch {
			case err == nil:
				err = kerr.ElectionNotNeeded
			case errCode(err) == kerr.KafkaStorageError.Code:
				err = fmt.Errorf("%w: the only replica is offline", kerr.EligibleLeadersNotAvailable)
			}
			sp.ErrorCode, sp.ErrorMessage = errCode(err), errMsg(err)
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return now(resp)
}
