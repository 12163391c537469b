package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/kawatest"
)

// Wire-level corners that some client relies on, checked with raw kmsg
// requests so the exact encoding is pinned.

// TestDescribeConfigsEmptyNamesMeansAll is a regression test: Kafka treats
// an empty (not null) config-name list like null, all configs, and clients
// whose codec defaults to an empty list rely on it; Kawa answered no configs
// at all.
func TestDescribeConfigsEmptyNamesMeansAll(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	k.CreateTopic("quirk-cfg", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl := k.Client()
	count := func(names []string) int {
		t.Helper()
		req := kmsg.NewPtrDescribeConfigsRequest()
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName, rr.ConfigNames = kmsg.ConfigResourceTypeTopic, "quirk-cfg", names
		req.Resources = append(req.Resources, rr)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != 0 {
			t.Fatalf("DescribeConfigs(%v): %v %+v", names, err, resp)
		}
		return len(resp.Resources[0].Configs)
	}
	all := count(nil)
	if all < 5 || count([]string{}) != all || count([]string{"retention.ms"}) != 1 {
		t.Fatalf("null %d, empty %d, one %d", all, count([]string{}), count([]string{"retention.ms"}))
	}
}

// TestReplicaAdminEdges: ElectLeaders with null topics (all partitions)
// lists nothing, as Kafka leaves out partitions needing no election;
// cancelling a reassignment that is not running is
// NO_REASSIGNMENT_IN_PROGRESS; ListPartitionReassignments of all topics is
// empty.
func TestReplicaAdminEdges(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	k.CreateTopic("quirk-replicas", 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl := k.Client()

	el := kmsg.NewPtrElectLeadersRequest()
	elResp, err := el.RequestWith(ctx, cl)
	if err != nil || elResp.ErrorCode != 0 || len(elResp.Topics) != 0 {
		t.Fatalf("ElectLeaders(all): %v %+v", err, elResp)
	}
	el.ElectionType = 5
	el.Topics = []kmsg.ElectLeadersRequestTopic{{Topic: "quirk-replicas", Partitions: []int32{0}}}
	if elResp, err = el.RequestWith(ctx, cl); err != nil || elResp.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("ElectLeaders(type 5): %v %+v", err, elResp)
	}

	ar := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	at := kmsg.NewAlterPartitionAssignmentsRequestTopic()
	at.Topic = "quirk-replicas"
	at.Partitions = []kmsg.AlterPartitionAssignmentsRequestTopicPartition{
		{Partition: 0, Replicas: nil},
		{Partition: 1, Replicas: []int32{k.Config.NodeID}},
		{Partition: 2, Replicas: []int32{k.Config.NodeID}},
	}
	ar.Topics = append(ar.Topics, at)
	arResp, err := ar.RequestWith(ctx, cl)
	if err != nil || arResp.ErrorCode != 0 || len(arResp.Topics) != 1 || len(arResp.Topics[0].Partitions) != 3 {
		t.Fatalf("AlterPartitionAssignments: %v %+v", err, arResp)
	}
	want := []int16{kerr.NoReassignmentInProgress.Code, 0, kerr.UnknownTopicOrPartition.Code}
	for i, p := range arResp.Topics[0].Partitions {
		if p.Partition != int32(i) || p.ErrorCode != want[i] {
			t.Fatalf("partition %d: error %d, want %d", p.Partition, p.ErrorCode, want[i])
		}
	}

	lr, err := kmsg.NewPtrListPartitionReassignmentsRequest().RequestWith(ctx, cl)
	if err != nil || lr.ErrorCode != 0 || len(lr.Topics) != 0 {
		t.Fatalf("ListPartitionReassignments(all): %v %+v", err, lr)
	}
}
