package broker

import (
	"context"
	"fmt"
	"strconv"

	"github.com/kawa-broker/kawa/internal/config"
	"github.com/kawa-broker/kawa/internal/share"
	"github.com/kawa-broker/kawa/internal/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeConfigs (key 32), versions 1-4.
//
// Behaviour: topic resources list every topic config in the registry
// (internal/config) with its effective value and source (override or
// default), synonyms when asked (v1+), type and documentation (v3+). Broker
// resources list the broker-level settings Kawa has, read-only. GROUP
// resources list the share-group configs (KIP-932) of internal/share.
func (b *Broker) handleDescribeConfigs(ctx context.Context, _ wire.RequestInfo, req kmsg.Request) reply {
	r := req.(*kmsg.DescribeConfigsRequest)
	resp := r.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, rr := range r.Resources {
		resp.Resources = append(resp.Resources, b.describeConfigs(r, rr))
	}
	return now(resp)
}

func (b *Broker) describeConfigs(r *kmsg.DescribeConfigsRequest, rr kmsg.DescribeConfigsRequestResource) kmsg.DescribeConfigsResponseResource {
	res := kmsg.NewDescribeConfigsResponseResource()
	res.ResourceType, res.ResourceName = rr.ResourceType, rr.ResourceName
	want := func(name string) bool {
		// NB: an empty list also means all, as in Kafka's ConfigHelper;
		// codecs whose default is an empty list (not null) send it.
		if len(rr.ConfigNames) == 0 {
			return true
		}
		for _, n := range rr.ConfigNames {
			if n == name {
				return true
			}
		}
		return false
	}
	add := func(name, value string, src kmsg.ConfigSource, typ, doc string, ro bool) {
		if !want(name) {
			return
		}
		c := kmsg.NewDescribeConfigsResponseResourceConfig()
		c.Name = name
		v := value
		c.Value = &v
		c.ReadOnly = ro
		c.Source = src
		c.IsDefault = src == sourceDefault
		c.ConfigType = configType(typ)
		if r.IncludeDocumentation {
			d := doc
			c.Documentation = &d
		}
		if r.IncludeSynonyms {
			c.ConfigSynonyms = []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{{Name: name, Value: &v, Source: src}}
		}
		res.Configs = append(res.Configs, c)
	}
	switch rr.ResourceType {
	case resourceTopic:
		t, ok := b.catalog.Get(rr.ResourceName)
		if !ok {
			res.ErrorCode = kerr.UnknownTopicOrPartition.Code
			return res
		}
		tc := b.topicConfig(t)
		for _, d := range config.Defs {
			src := sourceDefault
			_, set := t.Configs[d.Name]
			if set {
				src = sourceDynamicTopic
			} else if d.Internal {
				continue
			}
			add(d.Name, d.Get(tc), src, d.Type, d.Doc, false)
		}
	case resourceBroker:
		if rr.ResourceName != "" && rr.ResourceName != strconv.Itoa(int(b.cfg.NodeID)) {
			res.ErrorCode = kerr.InvalidRequest.Code
			msg := fmt.Sprintf("broker %q does not exist", rr.ResourceName)
			res.ErrorMessage = &msg
			return res
		}
		add("broker.id", strconv.Itoa(int(b.cfg.NodeID)), sourceStaticBroker, "INT", "this node's ID", true)
		add("auto.create.topics.enable", strconv.FormatBool(b.cfg.AutoCreateTopics), sourceStaticBroker, "BOOLEAN", "create unknown topics on metadata requests", true)
		add("num.partitions", strconv.Itoa(int(b.cfg.DefaultPartitions)), sourceStaticBroker, "INT", "partitions of auto-created topics", true)
		add("socket.request.max.bytes", strconv.Itoa(int(b.cfg.MaxRequestBytes)), sourceStaticBroker, "INT", "largest request accepted", true)
		add("log.flush.policy", string(b.cfg.Fsync), sourceStaticBroker, "STRING", "Kawa: fsync always|interval|never", true)
	case kmsg.ConfigResourceTypeGroupConfig:
		set := b.shares.Configs(rr.ResourceName)
		for _, d := range share.ConfigDefs {
			v, ok := set[d.Name]
			src := sourceDefault
			if ok {
				src = sourceDynamicGroup
			} else {
				v = d.Default
			}
			add(d.Name, v, src, d.Type, d.Doc, false)
		}
	default:
		res.ErrorCode = kerr.InvalidRequest.Code
		msg := fmt.Sprintf("resource type %d is not supported", rr.ResourceType)
		res.ErrorMessage = &msg
	}
	return res
}

// configType maps a registry type name to DescribeConfigs v3+ ConfigType.
func configType(t string) kmsg.ConfigType {
	switch t {
	case "BOOLEAN":
		return 1
	case "STRING":
		return 2
	case "INT":
		return 3
	case "LONG":
		return 5
	case "DOUBLE":
		return 6
	case "LIST":
		return 7
	}
	return 0
}
