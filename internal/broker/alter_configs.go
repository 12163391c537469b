package broker

import (
	"context"

	"github.com/kawa-broker/kawa/internal/config"
	"github.com/kawa-broker/kawa/internal/wire"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AlterConfigs (key 33), versions 0-2.
//
// Behaviour: replaces the whole set of a topic's overrides with the given
// configs (Kafka's non-incremental semantics), validated first
// (INVALID_CONFIG); ValidateOnly checks without applying. Broker resources
// are read-only here (INVALID_REQUEST).
//
// Authorization (with an authorizer): ALTER_CONFIGS on the resource, with
// DescribeConfigs' codes (configAuthorized).
func (b *Broker) handleAlterConfigs(ctx context.Context, info wire.RequestInfo, req kmsg.Request) reply {
	r := req.(*kmsg.AlterConfigsRequest)
	resp := r.ResponseKind().(*kmsg.AlterConfigsResponse)
	for _, rr := range r.Resources {
		sr := kmsg.NewAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		if code := b.configAuthorized(info, kmsg.ACLOperationAlterConfigs, rr.ResourceType, rr.ResourceName); code != 0 {
			sr.ErrorCode = code
			resp.Resources = append(resp.Resources, sr)
			continue
		}
		kv := map[string]string{}
		for _, c := range rr.Configs {
			if c.Value != nil {
				kv[c.Name] = *c.Value
			}
		}
		err := b.setTopicConfigs(rr.ResourceType, rr.ResourceName, func(map[string]string, config.Topic) (map[string]string, error) { return kv, nil }, r.ValidateOnly)
		sr.ErrorCode, sr.ErrorMessage = errCode(err), errMsg(err)
		resp.Resources = append(resp.Resources, sr)
	}
	return now(resp)
}
