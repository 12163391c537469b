package broker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kawa-broker/kawa/internal/kawatest"
	"github.com/kawa-broker/kawa/internal/meta"
	"github.com/kawa-broker/kawa/internal/vfs"
)

// TestSegmentBytesRange: segment.bytes is an INT with Kafka 4.0's minimum of
// 1 MiB (KIP-1030), checked on CreateTopics, AlterConfigs and
// IncrementalAlterConfigs (INVALID_CONFIG, nothing changed);
// internal.segment.bytes overrides it without the floor and is described
// only for a topic that sets it.
func TestSegmentBytesRange(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	adm := k.Admin()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, bad := range []string{"16384", "1048575", "2147483648", "-1"} {
		resp, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"segment.bytes": ptr(bad)}, "s-bad")
		if err == nil {
			err = resp.Err
		}
		if !errors.Is(err, kerr.InvalidConfig) {
			t.Fatalf("create with segment.bytes=%s: %v, want INVALID_CONFIG", bad, err)
		}
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"segment.bytes": ptr("1048576")}, "s"); err != nil {
		t.Fatal(err)
	}
	alter, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "segment.bytes", Value: ptr("4096")}}, "s")
	if err == nil {
		err = alterErr(alter, "s")
	}
	if !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("incremental alter to segment.bytes=4096: %v, want INVALID_CONFIG", err)
	}
	alter, err = adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "segment.bytes", Value: ptr("100")}}, "s")
	if err == nil {
		err = alterErr(alter, "s")
	}
	if !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("alter to segment.bytes=100: %v, want INVALID_CONFIG", err)
	}
	rc, err := adm.DescribeTopicConfigs(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	c := map[string]kadm.Config{}
	for _, cfg := range rc[0].Configs {
		c[cfg.Key] = cfg
	}
	if v := c["segment.bytes"]; v.MaybeValue() != "1048576" {
		t.Fatalf("segment.bytes after refused alters = %q", v.MaybeValue())
	}
	if _, ok := c["internal.segment.bytes"]; ok {
		t.Fatal("internal.segment.bytes described for a topic that does not set it")
	}

	k.CreateTopic("small", 1, map[string]*string{"internal.segment.bytes": ptr("4096")})
	rc, err = adm.DescribeTopicConfigs(ctx, "small")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, cfg := range rc[0].Configs {
		found = found || cfg.Key == "internal.segment.bytes" && cfg.MaybeValue() == "4096"
	}
	if !found {
		t.Fatalf("internal.segment.bytes=4096 not described for the topic that sets it: %+v", rc[0].Configs)
	}
}

// alterErr is the error kadm reports for topic's alter.
func alterErr(rs kadm.AlterConfigsResponses, topic string) error {
	r, err := rs.On(topic, nil)
	if err != nil {
		return err
	}
	return r.Err
}

// TestStoredSmallSegmentBytesStarts: a topic stored by an older Kawa with a
// segment.bytes below today's minimum does not stop the broker from
// starting; that value alone is ignored and the topic keeps its other
// configs and serves.
func TestStoredSmallSegmentBytesStarts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cat, err := meta.Open(vfs.OS, dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cat.Create(meta.Topic{Name: "old", Partitions: 1, Configs: map[string]string{"segment.bytes": "16384", "retention.ms": "60000"}}); err != nil {
		t.Fatal(err)
	}
	k := kawatest.NewBroker(t, kawatest.WithDir(dir))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rc, err := k.Admin().DescribeTopicConfigs(ctx, "old")
	if err != nil {
		t.Fatal(err)
	}
	c := map[string]string{}
	for _, cfg := range rc[0].Configs {
		c[cfg.Key] = cfg.MaybeValue()
	}
	if c["retention.ms"] != "60000" || c["segment.bytes"] != "1073741824" {
		t.Fatalf("stored configs after start: retention.ms %q, segment.bytes %q; want 60000 kept and the refused value replaced by the default", c["retention.ms"], c["segment.bytes"])
	}
	produceN(t, k, "old", 3)
}
