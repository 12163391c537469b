package broker_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/kawatest"
)

// TestMetadataDuringCreateTopics is a regression test: a Metadata request
// for all topics that raced a CreateTopics could list the new topic with
// zero partitions and no error (the catalog entry is written before the
// partitions open), and kafka-go's Writer, which caches that answer,
// divided by zero in its balancer. Every listed topic must carry its full
// partition count; a partition not open yet is LEADER_NOT_AVAILABLE.
func TestMetadataDuringCreateTopics(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	cl := k.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const topics, partitions = 30, 4
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range topics {
			req := kmsg.NewPtrCreateTopicsRequest()
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = fmt.Sprintf("race-%d", i), partitions, 1
			req.Topics = append(req.Topics, rt)
			if _, err := req.RequestWith(ctx, cl); err != nil {
				if ctx.Err() == nil {
					t.Errorf("create %d: %v", i, err)
				}
				return
			}
		}
	}()
	defer func() { cancel(); <-done }() // the creator stops before the test ends
	check := func() {
		req := kmsg.NewPtrMetadataRequest() // null topics: all
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		for _, mt := range resp.Topics {
			if !strings.HasPrefix(*mt.Topic, "race-") {
				continue
			}
			if len(mt.Partitions) != partitions || mt.ErrorCode != 0 {
				t.Fatalf("topic %s listed with %d partitions, error %d", *mt.Topic, len(mt.Partitions), mt.ErrorCode)
			}
			for _, p := range mt.Partitions {
				if p.ErrorCode != 0 && (p.ErrorCode != kerr.LeaderNotAvailable.Code || p.Leader != -1) {
					t.Fatalf("topic %s partition %d: error %d leader %d", *mt.Topic, p.Partition, p.ErrorCode, p.Leader)
				}
			}
		}
	}
	for {
		select {
		case <-done:
			check()
			return
		default:
			check()
		}
	}
}
