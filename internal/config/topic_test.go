package config

import (
	"math"
	"strings"
	"testing"
)

// TestTopicConfigRules checks each topic config against Kafka 4.x's LogConfig definition: its type's
// parsing, its range or set of values, and the checks across configs. Each bad value is refused with an
// error naming the config, and leaves the input unchanged.
func TestTopicConfigRules(t *testing.T) {
	d := DefaultTopic()
	for _, c := range []struct {
		name string
		good []string
		bad  []string
	}{
		{"cleanup.policy", []string{"delete", "compact", "compact,delete", "delete, compact"}, []string{"", "nope", "compact,nope", "Compact"}},
		{"compression.type", []string{"producer", "uncompressed", "gzip", "snappy", "lz4", "zstd", " zstd "}, []string{"none", "ZSTD", "brotli", ""}},
		{"compression.gzip.level", []string{"-1", "1", "9"}, []string{"0", "10", "-2", "x"}},
		{"compression.lz4.level", []string{"1", "9", "17"}, []string{"0", "18"}},
		{"compression.zstd.level", []string{"-131072", "0", "3", "22"}, []string{"-131073", "23"}},
		{"delete.retention.ms", []string{"0", "86400000"}, []string{"-1", "1.5"}},
		{"file.delete.delay.ms", []string{"0", "60000"}, []string{"-1"}},
		{"flush.messages", []string{"1", "9223372036854775807"}, []string{"0", "9223372036854775808"}},
		{"flush.ms", []string{"0", "1000"}, []string{"-1"}},
		{"follower.replication.throttled.replicas", []string{"", "*", "0:1", "0:1,1:1", " 0:1 , 2:3 "}, []string{"0", "a:1", "0:1,x", "*,0:1"}},
		{"leader.replication.throttled.replicas", []string{"", "*", "3:1"}, []string{"1:"}},
		{"index.interval.bytes", []string{"0", "4096", "2147483647"}, []string{"-1", "2147483648"}},
		{"local.retention.bytes", []string{"-2", "-1", "0"}, []string{"-3"}},
		{"local.retention.ms", []string{"-2", "1000"}, []string{"-3"}},
		{"max.compaction.lag.ms", []string{"1", "9223372036854775807"}, []string{"0"}},
		{"max.message.bytes", []string{"0", "1048588", "2147483647"}, []string{"-1", "2147483648"}},
		{"message.timestamp.after.max.ms", []string{"0", "3600000"}, []string{"-1"}},
		{"message.timestamp.before.max.ms", []string{"0", "9223372036854775807"}, []string{"-1"}},
		{"message.timestamp.type", []string{"CreateTime", "LogAppendTime"}, []string{"createtime", "NoTimestampType", ""}},
		{"min.cleanable.dirty.ratio", []string{"0", "0.5", "1"}, []string{"1.5", "-0.1", "NaN", "-Inf", "x"}},
		{"min.compaction.lag.ms", []string{"0", "1000"}, []string{"-1"}},
		{"min.insync.replicas", []string{"1", "2", "2147483647"}, []string{"0", "-1", "2147483648"}},
		{"preallocate", []string{"true", "false", "TRUE", " False "}, []string{"yes", "1", ""}},
		{"remote.log.copy.disable", []string{"true", "false"}, []string{"x"}},
		{"remote.log.delete.on.disable", []string{"false"}, []string{"x"}},
		{"remote.storage.enable", []string{"false"}, []string{"true", "x"}},
		{"retention.bytes", []string{"-1", "0", "1073741824", "-5"}, []string{"1k"}},
		{"retention.ms", []string{"-1", "0", "604800000"}, []string{"-2", "x"}},
		{"segment.bytes", []string{"1048576", "2147483647"}, []string{"1048575", "2147483648", "14"}},
		{"segment.index.bytes", []string{"4", "10485760"}, []string{"3"}},
		{"segment.jitter.ms", []string{"0", "1000"}, []string{"-1"}},
		{"segment.ms", []string{"1", "604800000"}, []string{"0"}},
		{"unclean.leader.election.enable", []string{"true", "false"}, []string{"maybe"}},
		{"internal.segment.bytes", []string{"14", "4096"}, []string{"13"}},
	} {
		if _, ok := Lookup(c.name); !ok {
			t.Errorf("%s: not in the registry", c.name)
			continue
		}
		for _, v := range c.good {
			if _, err := Apply(d, map[string]string{c.name: v}); err != nil {
				t.Errorf("%s=%q refused: %v", c.name, v, err)
			}
		}
		for _, v := range c.bad {
			out, err := Apply(d, map[string]string{c.name: v})
			if err == nil || out != d {
				t.Errorf("%s=%q: %v; want an error and the input unchanged", c.name, v, err)
			} else if !strings.Contains(err.Error(), c.name) {
				t.Errorf("%s=%q: error %q does not name the config", c.name, v, err)
			}
		}
	}
	if _, err := Apply(d, map[string]string{"message.format.version": "3.0"}); err == nil || !strings.Contains(err.Error(), "unknown topic config name: message.format.version") {
		t.Errorf("removed in Kafka 4.0 (KIP-724): message.format.version: %v, want unknown", err)
	}
	// LogConfig.validateValues: min.compaction.lag.ms may not exceed max.compaction.lag.ms, with the
	// other one taken from the base (the broker's defaults or the topic's other overrides).
	if _, err := Apply(d, map[string]string{"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}); err == nil || !strings.Contains(err.Error(), "min.compaction.lag.ms (10) > max.compaction.lag.ms (5)") {
		t.Errorf("min > max compaction lag: %v", err)
	}
	lagged, _ := Apply(d, map[string]string{"max.compaction.lag.ms": "5"})
	if _, err := Apply(lagged, map[string]string{"min.compaction.lag.ms": "6"}); err == nil {
		t.Error("min.compaction.lag.ms above the base's max.compaction.lag.ms accepted")
	}
}

// TestTopicDefaultsAreKafkas: the defaults DescribeConfigs reports (Def.Default) are Kafka 4.x's, but for
// preallocate.
func TestTopicDefaultsAreKafkas(t *testing.T) {
	want := map[string]string{
		"cleanup.policy": "delete", "compression.type": "producer", "compression.gzip.level": "-1",
		"compression.lz4.level": "9", "compression.zstd.level": "3", "delete.retention.ms": "86400000",
		"file.delete.delay.ms": "60000", "flush.messages": "9223372036854775807", "flush.ms": "9223372036854775807",
		"follower.replication.throttled.replicas": "", "index.interval.bytes": "4096",
		"leader.replication.throttled.replicas": "", "local.retention.bytes": "-2", "local.retention.ms": "-2",
		"max.compaction.lag.ms": "9223372036854775807", "max.message.bytes": "1048588",
		"message.timestamp.after.max.ms": "3600000", "message.timestamp.before.max.ms": "9223372036854775807",
		"message.timestamp.type": "CreateTime", "min.cleanable.dirty.ratio": "0.5", "min.compaction.lag.ms": "0",
		"min.insync.replicas": "1", "preallocate": "true" /* Kawa's default; Kafka's is false */, "remote.log.copy.disable": "false",
		"remote.log.delete.on.disable": "false", "remote.storage.enable": "false", "retention.bytes": "-1",
		"retention.ms": "604800000", "segment.bytes": "1073741824", "segment.index.bytes": "10485760",
		"segment.jitter.ms": "0", "segment.ms": "604800000", "unclean.leader.election.enable": "false",
	}
	seen := map[string]bool{}
	for _, d := range Defs {
		if d.Internal {
			continue
		}
		seen[d.Name] = true
		if w, ok := want[d.Name]; !ok {
			t.Errorf("%s: not a Kafka 4.x topic config", d.Name)
		} else if got := d.Default(); got != w {
			t.Errorf("%s default %q, want %q", d.Name, got, w)
		}
		if d.Type == "" || d.Doc == "" {
			t.Errorf("%s: no type or documentation", d.Name)
		}
		if b, ok := LookupBroker(d.Broker); d.Broker != "" && (!ok || b.Name != d.Name) {
			t.Errorf("%s: broker synonym %s does not lead back", d.Name, d.Broker)
		}
	}
	for n := range want {
		if !seen[n] {
			t.Errorf("%s: missing from the registry", n)
		}
	}
	if DefaultTopic().FlushMessages != math.MaxInt64 {
		t.Error("flush.messages default")
	}
}

// TestBrokerTopicDefaults: broker-level defaults are validated by the topic config's rules and become
// the base of every topic.
func TestBrokerTopicDefaults(t *testing.T) {
	tc, err := Broker{TopicDefaults: map[string]string{"compression.type": "zstd", "retention.ms": "1000"}}.TopicDefaultsConfig()
	if err != nil || tc.CompressionType != "zstd" || tc.RetentionMs != 1000 || tc.SegmentBytes != 1<<30 {
		t.Fatalf("TopicDefaultsConfig = %+v, %v", tc, err)
	}
	if _, err := (Broker{TopicDefaults: map[string]string{"min.insync.replicas": "0"}}).TopicDefaultsConfig(); err == nil {
		t.Fatal("min.insync.replicas=0 accepted as a broker default")
	}
}
