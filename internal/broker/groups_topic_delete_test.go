package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/kawatest"
	"github.com/kawa-broker/kawa/internal/meta"
	"github.com/kawa-broker/kawa/internal/vfs"
)

func deleteTopic(t *testing.T, k *kawatest.Broker, topic string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := k.Admin().DeleteTopic(ctx, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("delete topic %s: %v", topic, err)
	}
}

// TestDeleteTopicDeletesCommittedOffsets: Kafka's onPartitionsDeleted removes
// every group's offsets of a deleted topic, so a consumer of a topic created
// again under the same name starts from its reset policy instead of silently
// skipping offsets 0-6. Checked for an Empty group and a Stable one, and
// after a restart (the tombstones are durable; replay does not bring 7
// back). Offsets of other topics stay.
func TestDeleteTopicDeletesCommittedOffsets(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	k.CreateTopic("del-x", 1, nil)
	k.CreateTopic("del-keep", 1, nil)

	// Empty: a simple (admin) commit.
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: "del-x", Partition: 0, At: 7, LeaderEpoch: -1})
	os.Add(kadm.Offset{Topic: "del-keep", Partition: 0, At: 3, LeaderEpoch: -1})
	if resp, err := k.Admin().CommitOffsets(ctx, "g-empty", os); err != nil || resp.Error() != nil {
		t.Fatalf("commit: %v %v", err, resp.Error())
	}

	// Stable: a live member commits, then stays in the group while the
	// topic is deleted.
	produceValues(t, k, "del-x", 0, 10)
	m := k.Client(append(memberOpts("g-stable", "del-x"), kgo.DisableAutoCommit())...)
	for got := 0; got < 10; {
		fs := m.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		got += fs.NumRecords()
	}
	var commitErr error
	m.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{"del-x": {0: {Epoch: -1, Offset: 7}}},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, _ *kmsg.OffsetCommitResponse, err error) {
			commitErr = err
		})
	if commitErr != nil {
		t.Fatal(commitErr)
	}
	if d := describeGroup(t, k.Admin(), "g-stable"); d.State != "Stable" {
		t.Fatalf("g-stable is %s, want Stable", d.State)
	}
	probe := k.Client()
	for _, g := range []string{"g-empty", "g-stable"} {
		if got := fetchCommitted(t, probe, g, "del-x", 0)[0]; got != 7 {
			t.Fatalf("%s: committed %d before the delete, want 7", g, got)
		}
	}

	deleteTopic(t, k, "del-x")
	k.CreateTopic("del-x", 1, nil)
	check := func(when string, probe *kgo.Client) {
		t.Helper()
		for _, g := range []string{"g-empty", "g-stable"} {
			if got := fetchCommitted(t, probe, g, "del-x", 0)[0]; got != -1 {
				t.Fatalf("%s: %s: committed offset %d for the re-created topic, want -1", when, g, got)
			}
		}
		if got := fetchCommitted(t, probe, "g-empty", "del-keep", 0)[0]; got != 3 {
			t.Fatalf("%s: offset of an untouched topic is %d, want 3", when, got)
		}
	}
	check("after delete", k.Client()) // a new client: probe caches the old topic ID (OffsetFetch v10)
	m.Close()
	k = k.Restart()
	check("after restart", k.Client())
}

// TestStartDeletesOffsetsOfMissingTopics: a crash between DeleteTopics'
// catalog write and the groups' tombstones leaves offsets of a topic that no
// longer exists; the next start deletes them, so re-creating the topic
// still starts from no committed offset.
func TestStartDeletesOffsetsOfMissingTopics(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	k.CreateTopic("crash-x", 1, nil)
	k.CreateTopic("crash-keep", 1, nil)
	produceValues(t, k, "crash-x", 0, 4)
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: "crash-x", Partition: 0, At: 7, LeaderEpoch: -1})
	os.Add(kadm.Offset{Topic: "crash-keep", Partition: 0, At: 3, LeaderEpoch: -1})
	if resp, err := k.Admin().CommitOffsets(ctx, "g-crash", os); err != nil || resp.Error() != nil {
		t.Fatalf("commit: %v %v", err, resp.Error())
	}
	k.Close()
	// The crash: the catalog no longer has the topic, the offsets log still
	// holds its commit.
	cat, err := meta.Open(vfs.OS, k.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := cat.Delete("crash-x"); err != nil {
		t.Fatal(err)
	}
	cfg := k.Config
	cfg.Listen = "127.0.0.1:0"
	k = kawatest.Start(t, cfg)
	k.CreateTopic("crash-x", 1, nil)
	probe := k.Client()
	if got := fetchCommitted(t, probe, "g-crash", "crash-x", 0)[0]; got != -1 {
		t.Fatalf("re-created topic: committed %d, want -1", got)
	}
	if got := fetchCommitted(t, probe, "g-crash", "crash-keep", 0)[0]; got != 3 {
		t.Fatalf("other topic: committed %d, want 3", got)
	}
	// Nor does the re-created topic get the old topic's records back.
	ends, err := kadm.NewClient(probe).ListEndOffsets(ctx, "crash-x")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ends.Lookup("crash-x", 0); o.Err != nil || o.Offset != 0 {
		t.Fatalf("re-created topic: end offset %d (%v), want 0", o.Offset, o.Err)
	}
}
