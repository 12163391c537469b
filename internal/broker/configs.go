package broker

import (
	"fmt"

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
	sourceDynamicGroup kmsg.ConfigSource = 8 // DYNAMIC_GROUP_CONFIG (KIP-848/932 group configs)
)

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
		ms, bytes := tc.RetentionLimits()
		p.SetConfig(ms, bytes, tc.SegmentSize())
	}
}
