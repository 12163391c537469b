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
// Behaviour: topic resources list every topic config of Kafka 4.x (the
// registry in internal/config) with its effective value and source:
// DYNAMIC_TOPIC_CONFIG for the topic's override, STATIC_BROKER_CONFIG for a
// broker-level default set at start (kawa serve's --log-retention-ms, ...),
// else DEFAULT_CONFIG (is_default); synonyms in that order when asked (v1+,
// broker-level ones under Kafka's broker names, KIP-226), config_type and
// documentation (v3+). Topic configs are never read_only or sensitive.
// Broker resources list the broker-level settings Kawa has, the topic
// defaults (log.retention.ms, compression.type, ...) among them, read-only.
// GROUP resources list the share-group configs (KIP-932) of internal/share.
//
// Authorization (with an authorizer): DESCRIBE_CONFIGS on the topic
// (TOPIC_AUTHORIZATION_FAILED), on the cluster for broker resources
// (CLUSTER_AUTHORIZATION_FAILED) or on the group (GROUP_AUTHORIZATION_FAILED).
func (b *Broker) handleDescribeConfigs(ctx context.Context, info wire.RequestInfo, req kmsg.Request) reply {
	r := req.(*kmsg.DescribeConfigsRequest)
	resp := r.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, rr := range r.Resources {
		if code := b.configAuthorized(info, kmsg.ACLOperationDescribeConfigs, rr.ResourceType, rr.ResourceName); code != 0 {
			sr := kmsg.NewDescribeConfigsResponseResource()
			sr.ResourceType, sr.ResourceName, sr.ErrorCode = rr.ResourceType, rr.ResourceName, code
			resp.Resources = append(resp.Resources, sr)
			continue
		}
		resp.Resources = append(resp.Resources, b.describeConfigs(r, rr))
	}
	return now(resp)
}

// configAuthorized checks op (DESCRIBE_CONFIGS or ALTER_CONFIGS) on a config
// resource and returns Kafka's refusal code, 0 when allowed: a topic's
// TOPIC_AUTHORIZATION_FAILED, a group's GROUP_AUTHORIZATION_FAILED, and for
// broker, broker-logger and other resources the cluster's
// CLUSTER_AUTHORIZATION_FAILED.
func (b *Broker) configAuthorized(info wire.RequestInfo, op kmsg.ACLOperation, rt kmsg.ConfigResourceType, name string) int16 {
	switch rt {
	case kmsg.ConfigResourceTypeTopic:
		if !b.authorized(info, op, kmsg.ACLResourceTypeTopic, name) {
			return kerr.TopicAuthorizationFailed.Code
		}
	case kmsg.ConfigResourceTypeGroupConfig:
		if !b.authorized(info, op, kmsg.ACLResourceTypeGroup, name) {
			return kerr.GroupAuthorizationFailed.Code
		}
	default:
		if !b.authorizedCluster(info, op) {
			return kerr.ClusterAuthorizationFailed.Code
		}
	}
	return 0
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
	add := func(name, value string, src kmsg.ConfigSource, typ, doc string, ro bool, syns ...configSynonym) {
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
			if len(syns) == 0 {
				syns = []configSynonym{{name, value, src}}
			}
			for _, s := range syns {
				sv := s.value
				c.ConfigSynonyms = append(c.ConfigSynonyms, kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{Name: s.name, Value: &sv, Source: s.source})
			}
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
			if _, set := t.Configs[d.Name]; d.Internal && !set {
				continue
			}
			syns := b.topicConfigSynonyms(d, t, tc)
			add(d.Name, d.Get(tc), syns[0].source, d.Type, d.Doc, false, syns...)
		}
	case resourceBroker:
		if rr.ResourceName != "" && rr.ResourceName != strconv.Itoa(int(b.cfg.NodeID)) {
			res.ErrorCode = kerr.InvalidRequest.Code
			msg := fmt.Sprintf("broker %q does not exist", rr.ResourceName)
			res.ErrorMessage = &msg
			return res
		}
		add("broker.id", strconv.Itoa(int(b.cfg.NodeID)), sourceStaticBroker, "INT", "this node's ID", true)
		add("node.id", strconv.Itoa(int(b.cfg.NodeID)), sourceStaticBroker, "INT", "this node's ID", true)
		add("auto.create.topics.enable", strconv.FormatBool(b.cfg.AutoCreateTopics), sourceStaticBroker, "BOOLEAN", "create unknown topics on metadata requests", true)
		add("num.partitions", strconv.Itoa(int(b.cfg.DefaultPartitions)), sourceStaticBroker, "INT", "partitions of auto-created topics", true)
		add("socket.request.max.bytes", strconv.Itoa(int(b.cfg.MaxRequestBytes)), sourceStaticBroker, "INT", "largest request accepted", true)
		add("log.flush.policy", string(b.cfg.Fsync), sourceStaticBroker, "STRING", "Kawa: fsync always|interval|never", true)
		// The broker-level defaults of topic configs (read-only: set at start with kawa serve's flags).
		for _, d := range config.Defs {
			if d.Broker == "" {
				continue
			}
			src := sourceDefault
			if _, set := b.cfg.TopicDefaults[d.Name]; set {
				src = sourceStaticBroker
			}
			add(d.Broker, d.Get(b.defaults), src, d.Type, d.Doc, true)
		}
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
