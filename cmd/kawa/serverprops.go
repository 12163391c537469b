package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kawa-broker/kawa/cmd/internal/cli"
	"github.com/kawa-broker/kawa/internal/config"
)

// brokerProperty is one Kafka broker property that `kawa serve --config`
// reads (https://kafka.apache.org/documentation/#brokerconfigs). Exactly one
// of flag, set and noEffect says what it does:
//   - flag: it sets that `kawa serve` flag, its value first converted by conv
//     (nil: as is); the flag's own parsing validates it, and the flag given on
//     the command line wins over the file.
//   - set: it sets a field of config.Broker that has no flag.
//   - noEffect: it is accepted (after check, if any) and logged, because a
//     single Kawa node has nothing it would change; the text says why.
type brokerProperty struct {
	name     string
	flag     string
	conv     func(string) (string, error)
	set      func(cfg *config.Broker, v string) error
	noEffect string
	check    func(string) error
}

// brokerProperties lists every property `--config` accepts, in the order it
// applies them: where Kafka gives one setting several names, the name Kafka
// prefers comes later and so wins (log.retention.ms over .minutes over
// .hours, log.roll.ms over .hours, log.dirs over log.dir).
var brokerProperties = []brokerProperty{
	// Identity and roles.
	{name: "broker.id", flag: "node-id", conv: intAtLeast(0)},
	{name: "node.id", flag: "node-id", conv: intAtLeast(0)},
	{name: "process.roles", noEffect: "a Kawa node is always a combined broker and controller of itself", check: checkRoles},

	// Listeners and sockets.
	{name: "listeners", flag: "listeners"},
	{name: "advertised.listeners", flag: "advertised-listeners"},
	{name: "listener.security.protocol.map", flag: "listener-security-protocol-map"},
	{name: "controller.listener.names", set: func(c *config.Broker, v string) error {
		c.ControllerListenerNames = splitList(v)
		return nil
	}},
	{name: "socket.request.max.bytes", flag: "max-request-bytes", conv: intAtLeast(1)},
	{name: "queued.max.request.bytes", flag: "queued-max-request-bytes", conv: intAtLeast(-1)},
	{name: "max.connections", flag: "max-connections", conv: intAtLeast(1)},
	{name: "max.connections.per.ip", flag: "max-connections-per-ip", conv: intAtLeast(1)},
	{name: "connections.max.idle.ms", flag: "connections-max-idle", conv: msDuration(1)},
	{name: "connections.max.reauth.ms", flag: "connections-max-reauth", conv: msDuration(0)},
	{name: "connection.failed.authentication.delay.ms", flag: "connection-failed-authentication-delay", conv: msDuration(0)},
	{name: "max.incremental.fetch.session.cache.slots", flag: "max-incremental-fetch-session-cache-slots", conv: intAtLeast(0)},
	{name: "num.network.threads", noEffect: "Kawa runs a reader and a writer goroutine per connection", check: intCheck(1)},
	{name: "num.io.threads", noEffect: "requests run on their connection's goroutines", check: intCheck(1)},
	{name: "socket.send.buffer.bytes", noEffect: "the kernel's socket buffer sizes are used", check: intCheck(-1)},
	{name: "socket.receive.buffer.bytes", noEffect: "the kernel's socket buffer sizes are used", check: intCheck(-1)},
	{name: "inter.broker.listener.name", noEffect: "a single node has no inter-broker traffic"},
	{name: "controller.quorum.voters", noEffect: "a single node is its own controller; there is no quorum"},
	{name: "controller.quorum.bootstrap.servers", noEffect: "a single node is its own controller; there is no quorum"},

	// Security.
	{name: "ssl.keystore.location", flag: "ssl-keystore-location"},
	{name: "ssl.keystore.type", noEffect: "PEM is the only keystore type", check: pemOnly},
	{name: "ssl.truststore.location", flag: "ssl-truststore-location"},
	{name: "ssl.truststore.type", noEffect: "PEM is the only truststore type", check: pemOnly},
	{name: "ssl.client.auth", flag: "ssl-client-auth"},
	{name: "ssl.enabled.protocols", flag: "ssl-enabled-protocols"},
	{name: "sasl.enabled.mechanisms", flag: "sasl-enabled-mechanisms"},
	{name: "sasl.mechanism.inter.broker.protocol", noEffect: "a single node has no inter-broker traffic"},
	{name: "authorizer.class.name", flag: "authorizer-class-name"},
	{name: "super.users", flag: "super-users"},
	{name: "allow.everyone.if.no.acl.found", flag: "allow-everyone-if-no-acl-found", conv: boolean},

	// Logs.
	{name: "log.dir", flag: "data-dir", conv: oneDir},
	{name: "log.dirs", flag: "data-dir", conv: oneDir},
	{name: "num.partitions", flag: "num-partitions", conv: intAtLeast(1)},
	{name: "default.replication.factor", noEffect: "one node keeps one replica", check: onlyOne},
	{name: "offsets.topic.replication.factor", noEffect: "one node keeps one replica", check: onlyOne},
	{name: "transaction.state.log.replication.factor", noEffect: "one node keeps one replica", check: onlyOne},
	{name: "transaction.state.log.min.isr", noEffect: "one node keeps one replica", check: onlyOne},
	{name: "share.coordinator.state.topic.replication.factor", noEffect: "one node keeps one replica", check: onlyOne},
	{name: "share.coordinator.state.topic.min.isr", noEffect: "one node keeps one replica", check: onlyOne},
	{name: "num.recovery.threads.per.data.dir", noEffect: "partitions are recovered as they open", check: intCheck(1)},
	{name: "auto.create.topics.enable", flag: "auto-create-topics", conv: boolean},
	{name: "log.retention.check.interval.ms", flag: "retention-check-interval", conv: msDuration(1)},
	// Kafka's other names of two topic defaults; the log.retention.ms and log.roll.ms rows that
	// topicDefaultProperties adds come later and so win.
	{name: "log.retention.hours", flag: topicDefaultFlag("log.retention.ms"), conv: retentionIn(time.Hour)},
	{name: "log.retention.minutes", flag: topicDefaultFlag("log.retention.ms"), conv: retentionIn(time.Minute)},
	{name: "log.roll.hours", flag: topicDefaultFlag("log.roll.ms"), conv: rollHours},
	{name: "log.cleaner.backoff.ms", set: durationField(func(c *config.Broker) *time.Duration { return &c.CleanerBackoff }, time.Millisecond, 1)},

	// Groups, producers and transactions.
	{name: "group.initial.rebalance.delay.ms", set: durationField(func(c *config.Broker) *time.Duration { return &c.GroupInitialRebalanceDelay }, time.Millisecond, 0)},
	{name: "group.consumer.session.timeout.ms", flag: "group-consumer-session-timeout", conv: msDuration(1)},
	{name: "group.consumer.max.size", flag: "group-consumer-max-size", conv: intAtLeast(1)},
	{name: "group.consumer.heartbeat.interval.ms", flag: "group-consumer-heartbeat-interval", conv: msDuration(1)},
	{name: "group.share.partition.max.record.locks", flag: "group-share-partition-max-record-locks", conv: intAtLeast(1)},
	{name: "group.share.max.share.sessions", flag: "group-share-max-share-sessions", conv: intAtLeast(1)},
	{name: "share.coordinator.snapshot.update.records.per.snapshot", flag: "share-coordinator-snapshot-update-records-per-snapshot", conv: intAtLeast(1)},
	{name: "share.coordinator.state.topic.prune.interval.ms", flag: "share-coordinator-state-topic-prune-interval", conv: msDuration(1)},
	{name: "offsets.retention.minutes", set: durationField(func(c *config.Broker) *time.Duration { return &c.OffsetsRetention }, time.Minute, 1)},
	{name: "transaction.max.timeout.ms", set: durationField(func(c *config.Broker) *time.Duration { return &c.TxnMaxTimeout }, time.Millisecond, 1)},
	{name: "transactional.id.expiration.ms", set: durationField(func(c *config.Broker) *time.Duration { return &c.TransactionalIDExpiration }, time.Millisecond, 1)},
	{name: "producer.id.expiration.ms", set: durationField(func(c *config.Broker) *time.Duration { return &c.ProducerIDExpiration }, time.Millisecond, 1)},
}

func init() { brokerProperties = append(brokerProperties, topicDefaultProperties()...) }

// topicDefaultProperties are the broker-level defaults of topic configs (log.retention.ms,
// compression.type, min.insync.replicas, ...): each sets its `kawa serve` flag, whose parsing is the
// topic config's validation (internal/config is their one list).
func topicDefaultProperties() []brokerProperty {
	var out []brokerProperty
	for _, d := range config.Defs {
		if d.Broker != "" {
			out = append(out, brokerProperty{name: d.Broker, flag: topicDefaultFlag(d.Broker)})
		}
	}
	return out
}

// lookupBrokerProperty returns the row of property name.
func lookupBrokerProperty(name string) (brokerProperty, bool) {
	i := slices.IndexFunc(brokerProperties, func(p brokerProperty) bool { return p.name == name })
	if i < 0 {
		return brokerProperty{}, false
	}
	return brokerProperties[i], true
}

// applyServerProperties reads the Kafka broker properties file path onto
// fs's flags and cfg (brokerProperties says how each name applies). Flags
// already set on the command line are left as they are. It returns the
// properties accepted without effect ("name=value (why)") for the log. An
// unknown property, a bad value, or one this build does not support yet is
// an error naming the property and its line.
func applyServerProperties(fs *flag.FlagSet, cfg *config.Broker, path string) (noEffect []string, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--config: %w", err)
	}
	props, err := cli.ParseProperties(b)
	if err != nil {
		return nil, fmt.Errorf("--config %s: %w", path, err)
	}
	onCommandLine := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { onCommandLine[f.Name] = true })
	byName := map[string]cli.Property{}
	for _, p := range props {
		if _, ok := lookupBrokerProperty(p.Key); !ok {
			return nil, fmt.Errorf("--config %s: line %d: unknown or unsupported property %s", path, p.Line, p.Key)
		}
		byName[p.Key] = p
	}
	if err := sameValue(byName, "broker.id", "node.id"); err != nil {
		return nil, fmt.Errorf("--config %s: %w", path, err)
	}
	for _, row := range brokerProperties {
		p, ok := byName[row.name]
		if !ok {
			continue
		}
		if err := row.apply(fs, cfg, p.Value, onCommandLine, &noEffect); err != nil {
			return nil, fmt.Errorf("--config %s: line %d: %s=%s: %w", path, p.Line, p.Key, p.Value, err)
		}
	}
	return noEffect, nil
}

// apply applies value of row (see brokerProperty).
func (row brokerProperty) apply(fs *flag.FlagSet, cfg *config.Broker, value string, onCommandLine map[string]bool, noEffect *[]string) error {
	value = strings.TrimSpace(value)
	switch {
	case row.flag != "":
		if fs.Lookup(row.flag) == nil {
			return fmt.Errorf("kawa serve has no flag --%s", row.flag) // TestREADMEListsServerProperties checks there is
		}
		if onCommandLine[row.flag] {
			return nil // the command line overrides the file
		}
		v := value
		if row.conv != nil {
			var err error
			if v, err = row.conv(value); err != nil {
				return err
			}
		}
		return fs.Set(row.flag, v)
	case row.set != nil:
		return row.set(cfg, value)
	default:
		if row.check != nil {
			if err := row.check(value); err != nil {
				return err
			}
		}
		*noEffect = append(*noEffect, fmt.Sprintf("%s=%s (%s)", row.name, value, row.noEffect))
		return nil
	}
}

// sameValue refuses two names of one setting given different values (Kafka
// refuses broker.id != node.id).
func sameValue(props map[string]cli.Property, a, b string) error {
	pa, okA := props[a]
	pb, okB := props[b]
	if okA && okB && strings.TrimSpace(pa.Value) != strings.TrimSpace(pb.Value) {
		return fmt.Errorf("line %d: %s=%s differs from %s=%s on line %d", pb.Line, b, pb.Value, a, pa.Value, pa.Line)
	}
	return nil
}

func parseInt64(v string, min int64) (int64, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not an integer", v)
	}
	if n < min {
		return 0, fmt.Errorf("%d is below the minimum %d", n, min)
	}
	return n, nil
}

// intAtLeast converts an integer property of at least min to its flag
// value (the same digits).
func intAtLeast(min int64) func(string) (string, error) {
	return func(v string) (string, error) {
		n, err := parseInt64(v, min)
		return strconv.FormatInt(n, 10), err
	}
}

func intCheck(min int64) func(string) error {
	return func(v string) error { _, err := parseInt64(v, min); return err }
}

// msDuration converts a milliseconds property of at least min to a
// duration flag value.
func msDuration(min int64) func(string) (string, error) {
	return func(v string) (string, error) {
		n, err := parseInt64(v, min)
		return (time.Duration(n) * time.Millisecond).String(), err
	}
}

// boolean accepts Java's Boolean.parseBoolean spellings Kafka's ConfigDef
// takes (true/false, any case).
func boolean(v string) (string, error) {
	switch strings.ToLower(v) {
	case "true", "false":
		return strings.ToLower(v), nil
	}
	return "", fmt.Errorf("%q is not true or false", v)
}

// oneDir is log.dirs/log.dir: Kawa keeps all data in one directory.
func oneDir(v string) (string, error) {
	dirs := splitList(v)
	if len(dirs) != 1 {
		return "", errors.New("a Kawa node keeps its data in one directory; give exactly one")
	}
	return dirs[0], nil
}

func onlyOne(v string) error {
	if n, err := parseInt64(v, -1); err != nil || (n != 1 && n != -1) {
		return errors.New("a single node can keep only 1 replica (-1: the broker default)")
	}
	return nil
}

func pemOnly(v string) error {
	if !strings.EqualFold(v, "PEM") {
		return fmt.Errorf("only PEM stores are supported, not %s", v)
	}
	return nil
}

func checkRoles(v string) error {
	roles := splitList(v)
	for _, r := range roles {
		if r != "broker" && r != "controller" {
			return fmt.Errorf("%q is not broker or controller", r)
		}
	}
	if !slices.Contains(roles, "broker") {
		return errors.New("a Kawa node serves clients: the roles must include broker")
	}
	return nil
}

// retentionIn is log.retention.hours/minutes: the log.retention.ms flag value in unit (-1 stays
// unlimited).
func retentionIn(unit time.Duration) func(string) (string, error) {
	return func(v string) (string, error) {
		n, err := parseInt64(v, -1)
		if n > 0 {
			n *= unit.Milliseconds()
		}
		return strconv.FormatInt(n, 10), err
	}
}

// rollHours is log.roll.hours: the log.roll.ms flag value.
func rollHours(v string) (string, error) {
	n, err := parseInt64(v, 1)
	return strconv.FormatInt(n*time.Hour.Milliseconds(), 10), err
}

// durationField sets a duration of cfg from a property in unit, at least
// min units (1 where the field's zero means "Kawa's default").
func durationField(field func(*config.Broker) *time.Duration, unit time.Duration, min int64) func(*config.Broker, string) error {
	return func(c *config.Broker, v string) error {
		n, err := parseInt64(v, min)
		if err != nil {
			return err
		}
		*field(c) = time.Duration(n) * unit
		return nil
	}
}
