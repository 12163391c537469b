package broker

import (
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/config"
	"github.com/kawa-broker/kawa/internal/meta"
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
	sourceDynamicGroup kmsg.ConfigSource = 8 // DYNAMIC_GROUP_CONFIG (KIP-848/932 group configs)
)

// configSynonym is one source of a config's value, most specific first (DescribeConfigs v1+ synonyms).
type configSynonym struct {
	name, value string
	source      kmsg.ConfigSource
}

// topicConfigSynonyms returns where topic t's value of d comes from, as Kafka's ConfigHelper lists it: the
// topic's override (DYNAMIC_TOPIC_CONFIG), the broker-level default set at start under its broker name
// (STATIC_BROKER_CONFIG), then Kafka's default (DEFAULT_CONFIG). The first entry is the effective one; its
// value is what tc (t's effective configs) holds.
func (b *Broker) topicConfigSynonyms(d config.Def, t meta.Topic, tc config.Topic) []configSynonym {
	var out []configSynonym
	if _, ok := t.Configs[d.Name]; ok {
		out = append(out, configSynonym{d.Name, d.Get(tc), sourceDynamicTopic})
	}
	broker := d.Broker
	if broker == "" {
		broker = d.Name
	}
	if _, ok := b.cfg.TopicDefaults[d.Name]; ok {
		out = append(out, configSynonym{broker, d.Get(b.defaults), sourceStaticBroker})
	}
	return append(out, configSynonym{broker, d.Default(), sourceDefault})
}

// setTopicConfigs computes, validates and (unless validateOnly) stores and
// applies a topic's new overrides.
func (b *Broker) setTopicConfigs(rtype kmsg.ConfigResourceType, name string, next func(cur map[string]string, effective config.Topic) (map[string]string, error), validateOnly bool) error {
	if rtype == resourceBroker {
		return fmt.Errorf("%w: broker configs are read-only in Kawa (set them at start: kawa serve flags)", kerr.InvalidRequest)
	}
	if rtype != resourceTopic {
		return fmt.Errorf("%w: resource type %d is not supported", kerr.InvalidRequest, rtype)
	}
	t, ok := b.catalog.Get(name)
	if !ok {
		return kerr.UnknownTopicOrPartition
	}
	kv, err := next(t.Configs, b.topicConfig(t))
	if err != nil {
		return err
	}
	tc, err := config.Apply(b.defaults, kv)
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
		ms, bytes := tc.RetentionLimits()
		p.SetConfig(ms, bytes, tc.SegmentSize())
	}
}

// editList applies IncrementalAlterConfigs' APPEND (add the items not yet there) or SUBTRACT (remove
// them) to the LIST value cur, as Kafka's ConfigAdminManager does.
func editList(cur, items string, appendOp bool) string {
	out := config.ListItems(cur)
	for _, it := range config.ListItems(items) {
		i := slices.Index(out, it)
		switch {
		case appendOp && i < 0:
			out = append(out, it)
		case !appendOp && i >= 0:
			out = slices.Delete(out, i, i+1)
		}
	}
	return strings.Join(out, ",")
}
