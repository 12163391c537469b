package broker

import (
	"context"
	"fmt"

	"github.com/kawa-broker/kawa/internal/config"
	"github.com/kawa-broker/kawa/internal/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// IncrementalAlterConfigs (key 44), versions 0-1 (KIP-339).
//
// Behaviour: per config SET (0) or DELETE (1) of a topic override; APPEND
// (2) and SUBTRACT (3) apply only to LIST configs (cleanup.policy, the
// throttled-replica lists; INVALID_CONFIG for others) and edit the topic's
// current value, override or default. Values are validated as in
// CreateTopics (internal/config: Kafka's types, ranges and cross-config
// rules; INVALID_CONFIG naming the config and the problem). All changes of
// a resource apply together or not at all. GROUP
// resources (type 32) set share-group configs (KIP-932, internal/share's
// ConfigDefs) with SET and DELETE.
//
// Authorization (with an authorizer): ALTER_CONFIGS on the resource, with
// DescribeConfigs' codes (configAuthorized).
func (b *Broker) handleIncrementalAlterConfigs(ctx context.Context, info wire.RequestInfo, req kmsg.Request) reply {
	r := req.(*kmsg.IncrementalAlterConfigsRequest)
	resp := r.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	for _, rr := range r.Resources {
		sr := kmsg.NewIncrementalAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		var err error
		if code := b.configAuthorized(info, kmsg.ACLOperationAlterConfigs, rr.ResourceType, rr.ResourceName); code != 0 {
			err = kerr.ErrorForCode(code)
		} else if rr.ResourceType == kmsg.ConfigResourceTypeGroupConfig {
			err = b.setShareGroupConfigs(ctx, rr, r.ValidateOnly)
		} else {
			err = b.setTopicConfigs(rr.ResourceType, rr.ResourceName, func(cur map[string]string, eff config.Topic) (map[string]string, error) {
				return incremental(cur, eff, rr.Configs)
			}, r.ValidateOnly)
		}
		sr.ErrorCode, sr.ErrorMessage = errCode(err), errMsg(err)
		resp.Resources = append(resp.Resources, sr)
	}
	return now(resp)
}

func incremental(cur map[string]string, eff config.Topic, ops []kmsg.IncrementalAlterConfigsRequestResourceConfig) (map[string]string, error) {
	out := map[string]string{}
	for k, v := range cur {
		out[k] = v
	}
	for _, c := range ops {
		d, ok := config.Lookup(c.Name)
		if !ok {
			return nil, fmt.Errorf("%w: unknown topic config name: %s", kerr.InvalidConfig, c.Name)
		}
		switch c.Op {
		case 0:
			if c.Value == nil {
				return nil, fmt.Errorf("%w: SET of %q needs a value", kerr.InvalidConfig, c.Name)
			}
			out[c.Name] = *c.Value
		case 1:
			delete(out, c.Name)
		case 2, 3:
			if d.Type != "LIST" {
				return nil, fmt.Errorf("%w: APPEND/SUBTRACT only apply to LIST configs, %q is %s", kerr.InvalidConfig, c.Name, d.Type)
			}
			if c.Value == nil {
				return nil, fmt.Errorf("%w: APPEND/SUBTRACT of %q needs a value", kerr.InvalidConfig, c.Name)
			}
			v, ok := out[c.Name]
			if !ok {
				v = d.Get(eff)
			}
			out[c.Name] = editList(v, *c.Value, c.Op == 2)
		default:
			return nil, fmt.Errorf("%w: unknown operation %d", kerr.InvalidRequest, c.Op)
		}
	}
	return out, nil
}
