package broker

import (
	"context"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/config"
)

// Resource types of the config APIs.
const (
	resourceTopic  kmsg.ConfigResourceType = 2
	resourceBroker kmsg.ConfigResourceType = 4
)

// Config sources (DescribeConfigs v1+).
const (
	sourceDynamicTopic kmsg.ConfigSource = 1
	sourceStaticBroker kmsg.ConfigSource = 4
	sourceDefault      kmsg.ConfigSource = 5
)

// DescribeConfigs (key 32), versions 1-4.
//
// Behaviour: topic resources list every topic config in the registry
// (internal/config) with its effective value and source (override or
// default), synonyms when asked (v1+), type and documentation (v3+). Broker
// resources list the broker-level settings Kawa has, read-only.
func init() {
	register(32, 1, 4, func(b *Broker, ctx context.Context, req kmsg.Request) reply {
		r := req.(*kmsg.DescribeConfigsRequest)
		resp := r.ResponseKind().(*kmsg.DescribeConfigsResponse)
		for _, rr := range r.Resources {
			resp.Resources = append(resp.Resources, b.describeConfigs(r, rr))
		}
		return now(resp)
	})
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
			if _, ok := t.Configs[d.Name]; ok {
				src = sourceDynamicTopic
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
	case "LIST":
		return 7
	}
	return 0
}

// AlterConfigs (key 33), versions 0-2.
//
// Behaviour: replaces the whole set of a topic's overrides with the given
// configs (Kafka's non-incremental semantics), validated first
// (INVALID_CONFIG); ValidateOnly checks without applying. Broker resources
// are read-only here (INVALID_REQUEST).
func init() {
	register(33, 0, 2, func(b *Broker, ctx context.Context, req kmsg.Request) reply {
		r := req.(*kmsg.AlterConfigsRequest)
		resp := r.ResponseKind().(*kmsg.AlterConfigsResponse)
		for _, rr := range r.Resources {
			sr := kmsg.NewAlterConfigsResponseResource()
			sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
			kv := map[string]string{}
			for _, c := range rr.Configs {
				if c.Value != nil {
					kv[c.Name] = *c.Value
				}
			}
			err := b.setTopicConfigs(rr.ResourceType, rr.ResourceName, func(map[string]string) (map[string]string, error) { return kv, nil }, r.ValidateOnly)
			sr.ErrorCode, sr.ErrorMessage = errCode(err), errMsg(err)
			resp.Resources = append(resp.Resources, sr)
		}
		return now(resp)
	})
}

// IncrementalAlterConfigs (key 44), versions 0-1 (KIP-339).
//
// Behaviour: per config SET (0) or DELETE (1) of a topic override; APPEND
// (2) and SUBTRACT (3) apply only to LIST configs, and cleanup.policy
// supports only "delete", so they are INVALID_CONFIG unless they leave it at
// "delete". All changes of a resource apply together or not at all.
func init() {
	register(44, 0, 1, func(b *Broker, ctx context.Context, req kmsg.Request) reply {
		r := req.(*kmsg.IncrementalAlterConfigsRequest)
		resp := r.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
		for _, rr := range r.Resources {
			sr := kmsg.NewIncrementalAlterConfigsResponseResource()
			sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
			err := b.setTopicConfigs(rr.ResourceType, rr.ResourceName, func(cur map[string]string) (map[string]string, error) {
				return incremental(cur, rr.Configs)
			}, r.ValidateOnly)
			sr.ErrorCode, sr.ErrorMessage = errCode(err), errMsg(err)
			resp.Resources = append(resp.Resources, sr)
		}
		return now(resp)
	})
}

func incremental(cur map[string]string, ops []kmsg.IncrementalAlterConfigsRequestResourceConfig) (map[string]string, error) {
	out := map[string]string{}
	for k, v := range cur {
		out[k] = v
	}
	for _, c := range ops {
		d, ok := config.Lookup(c.Name)
		if !ok {
			return nil, fmt.Errorf("%w: unknown topic config %q", kerr.InvalidConfig, c.Name)
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
			if c.Value == nil || *c.Value != "delete" || c.Op == 3 {
				return nil, fmt.Errorf("%w: %s supports only the value delete", kerr.InvalidConfig, c.Name)
			}
			out[c.Name] = "delete"
		default:
			return nil, fmt.Errorf("%w: unknown operation %d", kerr.InvalidRequest, c.Op)
		}
	}
	return out, nil
}

// setTopicConfigs computes, validates and (unless validateOnly) stores and
// applies a topic's new overrides.
func (b *Broker) setTopicConfigs(rtype kmsg.ConfigResourceType, name string, next func(map[string]string) (map[string]string, error), validateOnly bool) error {
	if rtype == resourceBroker {
		return fmt.Errorf("%w: broker configs are read-only in Kawa", kerr.InvalidRequest)
	}
	if rtype != resourceTopic {
		return fmt.Errorf("%w: resource type %d is not supported", kerr.InvalidRequest, rtype)
	}
	t, ok := b.catalog.Get(name)
	if !ok {
		return kerr.UnknownTopicOrPartition
	}
	kv, err := next(t.Configs)
	if err != nil {
		return err
	}
	tc, err := config.Apply(b.cfg.DefaultTopic, kv)
	if err != nil {
		return fmt.Errorf("%w: %v", kerr.InvalidConfig, err)
	}
	if validateOnly {
		return nil
	}
	if len(kv) == 0 {
		kv = nil
	}
	t.Configs = kv
	if err := b.catalog.Update(t); err != nil {
		return fmt.Errorf("%w: %v", kerr.KafkaStorageError, err)
	}
	b.applyTopicConfig(t.Name, tc)
	return nil
}

func (b *Broker) applyTopicConfig(name string, tc config.Topic) {
	for _, p := range b.partitions(name) {
		if p == nil {
			continue
		}
		p.SetConfig(tc.RetentionMs, tc.RetentionBytes, tc.SegmentBytes)
	}
}
