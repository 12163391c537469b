package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kawa-broker/kawa/internal/kawatest"
)

// TestShutdownEndsLongPolls: a graceful shutdown does not wait out the
// max_wait of fetches parked on an idle partition.
func TestShutdownEndsLongPolls(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	k.CreateTopic("idle", 1, nil)
	cl := k.Client(kgo.ConsumeTopics("idle"), kgo.FetchMaxWait(30*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	cl.PollFetches(ctx) // parks a fetch on the broker
	cancel()
	start := time.Now()
	k.Close()
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("shutdown took %v with a 30 s fetch parked; long polls must end at shutdown", d)
	}
}
