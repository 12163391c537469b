package verify

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestFinalScanBoundedByProgress: the final scan reads a topic to its fences
// with no total deadline, and gives up (errScanStalled) only when it reads
// nothing for its stall time, here on a partition whose fence never comes.
// A total deadline failed a 30-minute soak: its 3M records took longer than
// the 20 s drain timeout to read back, and every unread record was reported
// lost.
func TestFinalScanBoundedByProgress(t *testing.T) {
	t.Parallel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "scan-a", "scan-b"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	brokers := c.ListenAddrs()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const n = 500
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: "scan-a", Partition: 0, Value: []byte("w0:" + strconv.Itoa(i))})
	}
	recs = append(recs, &kgo.Record{Topic: "scan-a", Partition: 0, Value: []byte(fenceID)},
		&kgo.Record{Topic: "scan-b", Partition: 0, Value: []byte("w0:1")}) // scan-b gets no fence
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	var scanned, drained int
	count := func(evs ...Event) {
		for _, e := range evs {
			switch e.Kind {
			case KindScan:
				scanned++
			case KindDrained:
				drained++
			}
		}
	}
	if err := scanUntilFence(ctx, 5*time.Second, brokers, []string{"scan-a"}, 1, ReadUncommitted, count); err != nil {
		t.Fatalf("scan to the fence: %v", err)
	}
	if scanned != n || drained != 1 {
		t.Fatalf("scanned %d records and drained %d times, want %d and 1", scanned, drained, n)
	}
	start := time.Now()
	err = scanUntilFence(ctx, 300*time.Millisecond, brokers, []string{"scan-b"}, 1, ReadUncommitted, func(...Event) {})
	if !errors.Is(err, errScanStalled) {
		t.Fatalf("scan without a fence: err %v, want %v", err, errScanStalled)
	}
	if ctx.Err() != nil {
		t.Fatalf("the stalled scan ran until the test's own deadline (%v)", time.Since(start))
	}
}
