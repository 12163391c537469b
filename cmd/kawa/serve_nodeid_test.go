package main

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestServeNodeID: `kawa serve` is node 1 by default, as Kafka's quickstart
// broker is (kafka-go's own test suite asserts broker ID 1 and treats a
// coordinator node 0 as missing); --node-id overrides it.
func TestServeNodeID(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		flags []string
		want  int32
	}{{nil, 1}, {[]string{"--node-id", "7"}, 7}} {
		p := startKawa(t, t.TempDir(), c.flags...)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		cl := newClient(t, p.Addr)
		md, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		fc := kmsg.NewPtrFindCoordinatorRequest()
		fc.CoordinatorKey = "g"
		co, err := fc.RequestWith(ctx, cl)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if len(md.Brokers) != 1 || md.Brokers[0].NodeID != c.want || md.ControllerID != c.want || co.NodeID != c.want {
			t.Errorf("flags %v: brokers %+v controller %d coordinator %d, want node %d", c.flags, md.Brokers, md.ControllerID, co.NodeID, c.want)
		}
	}
}
