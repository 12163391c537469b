package broker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kawa-broker/kawa/internal/kawatest"
)

// TestGroupOffsetDelete (OffsetDelete, KIP-496): while a member subscribes
// to the topic the delete is refused per partition with
// GROUP_SUBSCRIBED_TO_TOPIC; once the group is Empty it deletes exactly the
// named partition, durably across a restart.
func TestGroupOffsetDelete(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	const topic, group = "t", "g"
	k.CreateTopic(topic, 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	adm := k.Admin()
	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: topic, Partition: 0, At: 5, LeaderEpoch: -1})
	os.Add(kadm.Offset{Topic: topic, Partition: 1, At: 7, LeaderEpoch: -1})
	if err := adm.CommitAllOffsets(ctx, group, os); err != nil {
		t.Fatal(err)
	}

	assigned := make(chan struct{}, 1)
	m := k.Client(append(memberOpts(group, topic), kgo.DisableAutoCommit(),
		kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) {
			select {
			case assigned <- struct{}{}:
			default:
			}
		}))...)
	pollCtx, stopPoll := context.WithCancel(ctx)
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for pollCtx.Err() == nil {
			m.PollFetches(pollCtx)
		}
	}()
	<-assigned
	resp, err := adm.DeleteOffsets(ctx, group, kadm.TopicsSet{topic: {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	if perr, _ := resp.Lookup(topic, 0); !errors.Is(perr, kerr.GroupSubscribedToTopic) {
		t.Errorf("OffsetDelete while subscribed: %v, want GROUP_SUBSCRIBED_TO_TOPIC", perr)
	}
	stopPoll()
	<-polled
	m.Close() // LeaveGroup: Empty

	resp, err = adm.DeleteOffsets(ctx, group, kadm.TopicsSet{topic: {0: {}}})
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("OffsetDelete of an Empty group: %v", err)
	}
	k = k.Restart()
	want := map[int32]int64{0: -1, 1: 7}
	if got := fetchCommitted(t, k.Client(), group, topic, 0, 1); !equalOffsets(got, want) {
		t.Errorf("after OffsetDelete and restart: %v, want %v", got, want)
	}
}
