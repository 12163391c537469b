package broker_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kawa-broker/kawa/internal/kawatest"
)

// TestCreateTopicRollsBackWhenPartitionsFail: a CreateTopics whose partitions
// cannot open (here a file sits where partition 1's directory goes; in the
// field, running out of file descriptors) leaves no catalog entry behind, so
// the broker still restarts and the name can be created later.
func TestCreateTopicRollsBackWhenPartitionsFail(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	blocker := filepath.Join(k.Dir, "rb-1")
	if err := os.WriteFile(blocker, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, _ := k.Admin().CreateTopic(ctx, 3, 1, nil, "rb")
	if !errors.Is(r.Err, kerr.KafkaStorageError) {
		t.Fatalf("create with an unopenable partition: %v, want KAFKA_STORAGE_ERROR", r.Err)
	}
	if td, _ := k.Admin().ListTopics(ctx); td.Has("rb") {
		t.Fatal("failed topic is still listed")
	}
	os.Remove(blocker)
	k2 := k.Restart()
	if _, err := k2.Admin().CreateTopic(ctx, 3, 1, nil, "rb"); err != nil {
		t.Fatalf("create after the failure was cleared: %v", err)
	}
}
