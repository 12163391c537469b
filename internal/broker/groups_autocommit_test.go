package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/kawatest"
	"github.com/kawa-broker/kawa/internal/kawatest/wait"
)

// TestGroupAutoCommitCrash (BL-19 part 4, Jepsen's corrected Bufstream
// claim): an auto-commit consumer polls three batches and crashes. What it
// committed is the position of the previous poll (the start of batch 3),
// never past what the application received, and it survives a broker
// restart; a successor resumes there, so nothing received-but-unprocessed
// is skipped.
func TestGroupAutoCommitCrash(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	const topic, group = "ac", "g"
	k.CreateTopic(topic, 1, nil)
	produceValues(t, k, topic, 0, 30)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const interval = 100 * time.Millisecond
	ticks := make(chan struct{}, 1024) // one per autocommit tick, once it is over
	c := newCrashable(t, k.Addr, append(memberOpts(group, topic), kgo.AutoCommitInterval(interval),
		kgo.AutoCommitCallback(func(*kgo.Client, *kmsg.OffsetCommitRequest, *kmsg.OffsetCommitResponse, error) { tick(ticks) }),
		kgo.WithLogger(autocommitSkips{ticks}))...)
	var batches [][]*kgo.Record
	for len(batches) < 3 {
		recs := c.PollRecords(ctx, 10).Records()
		if ctx.Err() != nil {
			t.Fatal("timed out polling")
		}
		if len(recs) > 0 {
			batches = append(batches, recs)
		}
	}
	third := batches[2]
	prevPoll := third[0].Offset // everything before batch 3 was returned by earlier polls
	received := third[len(third)-1].Offset + 1
	wait.Until(t, 5*time.Second, "an autocommit of the previous poll", func() bool {
		return fetchCommitted(t, k.Client(), group, topic, 0)[0] == prevPoll
	})
	// Several more autocommits, each either committed (the callback) or
	// skipped for having nothing new: none may move past prevPoll without a poll.
	for len(ticks) > 0 {
		<-ticks
	}
	for range 4 {
		select {
		case <-ticks:
		case <-ctx.Done():
			t.Fatal("timed out waiting for autocommits")
		}
	}
	if got := fetchCommitted(t, k.Client(), group, topic, 0)[0]; got != prevPoll {
		t.Fatalf("autocommitted %d after three polls, want %d (the previous poll's position; received up to %d)", got, prevPoll, received)
	}
	c.Crash()

	k = k.Restart()
	if got := fetchCommitted(t, k.Client(), group, topic, 0)[0]; got != prevPoll {
		t.Fatalf("after restart committed %d, want %d", got, prevPoll)
	}
	succ := k.Client(append(memberOpts(group, topic), kgo.DisableAutoCommit())...)
	recs := succ.PollRecords(ctx, 1).Records()
	if len(recs) != 1 || recs[0].Offset != prevPoll {
		t.Errorf("successor's first record %v, want offset %d", recs, prevPoll)
	}
}

// autocommitSkips is a kgo logger that reports the autocommit ticks kgo skips
// because nothing changed (they have no commit callback) on ticks.
type autocommitSkips struct{ ticks chan<- struct{} }

func (autocommitSkips) Level() kgo.LogLevel { return kgo.LogLevelDebug }

func (l autocommitSkips) Log(_ kgo.LogLevel, msg string, _ ...any) {
	if msg == "skipping autocommit due to no offsets to commit" {
		tick(l.ticks)
	}
}

// tick records one tick without ever blocking kgo (ticks past the buffer,
// after the test stopped counting, are dropped).
func tick(ticks chan<- struct{}) {
	select {
	case ticks <- struct{}{}:
	default:
	}
}
