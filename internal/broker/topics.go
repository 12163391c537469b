package broker

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kawa-broker/kawa/internal/config"
	"github.com/kawa-broker/kawa/internal/meta"
	"github.com/kawa-broker/kawa/internal/vfs"
)

// Internal topic names (Kafka's).
const (
	consumerOffsetsTopic = "__consumer_offsets"
	txnStateTopic        = "__transaction_state"
	shareStateTopic      = "__share_group_state" // internal/share's state log (share_groups.go)
)

// validTopicName follows Kafka's Topic.validate: 1-249 chars of
// [a-zA-Z0-9._-], not "." or "..".
func validTopicName(name string) error {
	if name == "" || name == "." || name == ".." {
		return fmt.Errorf("%w: topic name %q is not allowed", kerr.InvalidTopicException, name)
	}
	if len(name) > 249 {
		return fmt.Errorf("%w: topic name longer than 249 characters", kerr.InvalidTopicException)
	}
	for _, c := range name {
		ok := c == '.' || c == '_' || c == '-' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
		if !ok {
			return fmt.Errorf("%w: topic name %q has illegal character %q", kerr.InvalidTopicException, name, c)
		}
	}
	return nil
}

// collidingTopic returns an existing topic whose name equals name once '.'
// and '_' are taken as the same character. Kafka refuses such a topic
// (INVALID_TOPIC_EXCEPTION, "collides with existing topic"): metric names
// replace '.' with '_', so the two topics' metrics would be one.
func (b *Broker) collidingTopic(name string) (string, bool) {
	if !strings.ContainsAny(name, "._") {
		return "", false
	}
	norm := strings.ReplaceAll(name, ".", "_")
	for _, t := range b.catalog.List() {
		if t.Name != name && strings.ReplaceAll(t.Name, ".", "_") == norm {
			return t.Name, true
		}
	}
	return "", false
}

// newTopic validates a topic creation and returns the topic to store.
// partitions -1 means the broker default. replication must be -1 or 1: Kawa
// is a single node.
func (b *Broker) newTopic(name string, partitions int32, replication int16, configs map[string]string) (meta.Topic, error) {
	if err := validTopicName(name); err != nil {
		return meta.Topic{}, err
	}
	if partitions == -1 {
		partitions = b.cfg.DefaultPartitions
	}
	if partitions <= 0 || partitions > 100000 {
		return meta.Topic{}, fmt.Errorf("%w: partitions must be between 1 and 100000, got %d", kerr.InvalidPartitions, partitions)
	}
	if replication != -1 && replication != 1 {
		return meta.Topic{}, fmt.Errorf("%w: replication factor %d is larger than the 1 available broker", kerr.InvalidReplicationFactor, replication)
	}
	if _, err := config.Apply(b.defaults, configs); err != nil {
		return meta.Topic{}, fmt.Errorf("%w: %v", kerr.InvalidConfig, err)
	}
	if _, ok := b.catalog.Get(name); ok {
		return meta.Topic{}, fmt.Errorf("%w: topic %q already exists", kerr.TopicAlreadyExists, name)
	}
	if other, ok := b.collidingTopic(name); ok {
		return meta.Topic{}, fmt.Errorf("%w: topic %q collides with existing topic %q", kerr.InvalidTopicException, name, other)
	}
	return meta.Topic{Name: name, Partitions: partitions, Configs: configs, Internal: name == consumerOffsetsTopic || name == txnStateTopic || name == shareStateTopic}, nil
}

// createTopic stores t and opens its partitions.
func (b *Broker) createTopic(t meta.Topic) (meta.Topic, error) {
	t, err := b.catalog.Create(t)
	if errors.Is(err, meta.ErrExists) {
		return meta.Topic{}, fmt.Errorf("%w: topic %q already exists", kerr.TopicAlreadyExists, t.Name)
	}
	if err != nil {
		return meta.Topic{}, fmt.Errorf("%w: %v", kerr.KafkaStorageError, err)
	}
	// A new topic has no data: directories under its partitions' names are
	// left from a deletion cut short by a crash (the catalog entry goes
	// first), and opening them would bring the old records back.
	for i := int32(0); i < t.Partitions; i++ {
		dir := b.partitionDir(t.Name, i)
		if st, err := b.fs.Stat(dir); err != nil || !st.IsDir() {
			continue // the usual case: nothing left over, no fsync needed; a non-directory is not Kawa's, and fails the open
		}
		b.lg.Warn("removing a partition directory left by an interrupted topic deletion", "topic", t.Name, "partition", i)
		if err := vfs.RemoveAllDurable(b.fs, dir); err != nil {
			return meta.Topic{}, b.rollBackCreate(t, err)
		}
	}
	if err := b.openTopic(t); err != nil {
		return meta.Topic{}, b.rollBackCreate(t, err)
	}
	b.lg.Info("topic created", "topic", t.Name, "partitions", t.Partitions)
	return t, nil
}

// rollBackCreate undoes a topic creation that failed with err after its
// catalog entry was stored: a catalog entry whose partitions cannot open
// (e.g. out of file descriptors) would make every later start fail. It
// returns err as KAFKA_STORAGE_ERROR.
func (b *Broker) rollBackCreate(t meta.Topic, err error) error {
	b.lg.Error("topic creation failed; rolled back", "topic", t.Name, "partitions", t.Partitions, "err", err)
	if derr := b.catalog.Delete(t.Name); derr != nil {
		b.lg.Error("rolling back topic creation failed", "topic", t.Name, "err", derr)
	}
	for i := int32(0); i < t.Partitions; i++ {
		_ = vfs.RemoveAllDurable(b.fs, b.partitionDir(t.Name, i))
	}
	return fmt.Errorf("%w: %v", kerr.KafkaStorageError, err)
}

// ensureTopic returns the topic, creating it with defaults when absent
// (auto.create.topics.enable, internal topics).
func (b *Broker) ensureTopic(name string, partitions int32) (meta.Topic, error) {
	if t, ok := b.catalog.Get(name); ok {
		return t, nil
	}
	t, err := b.newTopic(name, partitions, -1, nil)
	if errors.Is(err, kerr.TopicAlreadyExists) {
		t, _ = b.catalog.Get(name)
		return t, nil
	}
	if err != nil {
		return meta.Topic{}, err
	}
	t, err = b.createTopic(t)
	if errors.Is(err, kerr.TopicAlreadyExists) {
		t, _ = b.catalog.Get(name)
		return t, nil
	}
	return t, err
}

// deleteTopic closes and removes a topic's partitions and catalog entry, then
// the groups' offsets for it. A failure of that last step is logged, not
// returned: the topic is gone, and the next start removes what is left
// (openGroups).
func (b *Broker) deleteTopic(ctx context.Context, name string) error {
	t, ok := b.catalog.Get(name)
	if !ok {
		return kerr.UnknownTopicOrPartition
	}
	if t.Internal {
		return fmt.Errorf("%w: internal topic %q cannot be deleted", kerr.InvalidTopicException, name)
	}
	if err := b.catalog.Delete(name); err != nil {
		return fmt.Errorf("%w: %v", kerr.KafkaStorageError, err)
	}
	b.mu.Lock()
	ps := b.parts[name]
	delete(b.parts, name)
	b.mu.Unlock()
	for _, p := range ps {
		if p == nil {
			continue
		}
		if err := p.Delete(); err != nil {
			b.lg.Warn("removing partition files failed", "topic", name, "partition", p.Index, "err", err)
		}
	}
	if err := b.groups.DeleteTopicOffsets(ctx, func(topic string) bool { return topic == name }); err != nil {
		b.lg.Warn("deleting committed offsets of a deleted topic failed; the next start retries", "topic", name, "err", err)
	}
	b.lg.Info("topic deleted", "topic", name)
	return nil
}

// errCode extracts the Kafka error code of err (0 for nil; unknown errors
// become UNKNOWN_SERVER_ERROR).
func errCode(err error) int16 {
	if err == nil {
		return 0
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	return kerr.UnknownServerError.Code
}

// errMsg returns the detail of err for response ErrorMessage fields: the
// text after the Kafka error's own name and description, which the client
// already derives from the code.
func errMsg(err error) *string {
	if err == nil {
		return nil
	}
	s := err.Error()
	var ke *kerr.Error
	if errors.As(err, &ke) {
		s = strings.TrimPrefix(s, ke.Error()+": ")
	}
	return &s
}
