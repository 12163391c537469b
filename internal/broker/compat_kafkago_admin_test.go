package broker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	kafka "github.com/segmentio/kafka-go"

	"github.com/kawa-broker/kawa/internal/kawatest"
)

// kafkagoClient returns a kafka-go Client with its own Transport: the
// default one caches metadata per address for 6 s across the process.
func kafkagoClient(addr string) *kafka.Client {
	return &kafka.Client{Addr: kafka.TCP(addr), Transport: &kafka.Transport{}, Timeout: 10 * time.Second}
}

// TestKafkaGoClientTopics drives kafka-go's Client admin APIs at the
// versions it negotiates (its max, capped by Kawa's): ApiVersions v2,
// CreateTopics v5, Metadata v8, CreatePartitions v1, ListOffsets v5 (one
// request per partition and timestamp), DeleteTopics v3.
func TestKafkaGoClientTopics(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl := kafkagoClient(k.Addr)

	av, err := cl.ApiVersions(ctx, &kafka.ApiVersionsRequest{})
	if err != nil || av.Error != nil {
		t.Fatalf("ApiVersions: %v %v", err, av.Error)
	}
	for _, a := range av.ApiKeys {
		if a.ApiKey == 0 && (a.MinVersion != 3 || a.MaxVersion != 12 || a.ApiName != "Produce") {
			t.Fatalf("Produce advertised as %+v", a)
		}
	}

	ct, err := cl.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{
		{Topic: "kgo-admin", NumPartitions: 2, ReplicationFactor: 1,
			ConfigEntries: []kafka.ConfigEntry{{ConfigName: "retention.bytes", ConfigValue: "1048576"}}},
		{Topic: "kgo-admin-rf3", NumPartitions: 1, ReplicationFactor: 3},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if ct.Errors["kgo-admin"] != nil || !errors.Is(ct.Errors["kgo-admin-rf3"], kafka.InvalidReplicationFactor) {
		t.Fatalf("CreateTopics errors: %v", ct.Errors)
	}
	ct, err = cl.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{Topic: "kgo-admin", NumPartitions: 2, ReplicationFactor: 1}}})
	if err != nil || !errors.Is(ct.Errors["kgo-admin"], kafka.TopicAlreadyExists) {
		t.Fatalf("second CreateTopics: %v %v", err, ct.Errors)
	}

	cp, err := cl.CreatePartitions(ctx, &kafka.CreatePartitionsRequest{Topics: []kafka.TopicPartitionsConfig{{Name: "kgo-admin", Count: 3}}})
	if err != nil || cp.Errors["kgo-admin"] != nil {
		t.Fatalf("CreatePartitions: %v %v", err, cp.Errors)
	}
	cp, err = cl.CreatePartitions(ctx, &kafka.CreatePartitionsRequest{Topics: []kafka.TopicPartitionsConfig{{Name: "kgo-admin", Count: 2}}})
	if err != nil || !errors.Is(cp.Errors["kgo-admin"], kafka.InvalidPartitionNumber) {
		t.Fatalf("shrinking CreatePartitions: %v %v", err, cp.Errors)
	}

	// NB: Client.Metadata answers from the Transport's cache, which
	// CreatePartitions does not refresh; a new Client asks the broker.
	md, err := kafkagoClient(k.Addr).Metadata(ctx, &kafka.MetadataRequest{Topics: []string{"kgo-admin"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(md.Brokers) != 1 || md.Controller.ID != md.Brokers[0].ID || md.ClusterID == "" ||
		len(md.Topics) != 1 || md.Topics[0].Name != "kgo-admin" || len(md.Topics[0].Partitions) != 3 || md.Topics[0].Error != nil {
		t.Fatalf("Metadata: %+v", md)
	}

	kafkagoListOffsets(t, ctx, k.Addr, cl)

	dt, err := cl.DeleteTopics(ctx, &kafka.DeleteTopicsRequest{Topics: []string{"kgo-admin", "kgo-missing"}})
	if err != nil || dt.Errors["kgo-admin"] != nil || !errors.Is(dt.Errors["kgo-missing"], kafka.UnknownTopicOrPartition) {
		t.Fatalf("DeleteTopics: %v %v", err, dt.Errors)
	}
}

// kafkagoListOffsets writes 5 records at known times to partition 0 and
// checks Client.ListOffsets first, last and by time.
func kafkagoListOffsets(t *testing.T, ctx context.Context, addr string, cl *kafka.Client) {
	t.Helper()
	conn, err := kafka.DialLeader(ctx, "tcp", addr, "kgo-admin", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	base := time.UnixMilli(1_600_000_000_000)
	msgs := make([]kafka.Message, 5)
	for i := range msgs {
		msgs[i] = kafka.Message{Value: []byte{byte(i)}, Time: base.Add(time.Duration(i) * time.Minute)}
	}
	if _, err := conn.WriteCompressedMessages(kafka.Gzip.Codec(), msgs...); err != nil {
		t.Fatal(err)
	}
	lo, err := cl.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{
		"kgo-admin": {kafka.FirstOffsetOf(0), kafka.LastOffsetOf(0), kafka.TimeOffsetOf(0, base.Add(90*time.Second)), kafka.LastOffsetOf(2)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[int]kafka.PartitionOffsets{}
	for _, po := range lo.Topics["kgo-admin"] {
		got[po.Partition] = po
	}
	p0, p2 := got[0], got[2]
	// The first record at or after t+90s is offset 2 (inside one gzip
	// batch). kafka-go reports the requested time, not the record's.
	if p0.Error != nil || p0.FirstOffset != 0 || p0.LastOffset != 5 || len(p0.Offsets) != 1 ||
		!p0.Offsets[2].Equal(base.Add(90*time.Second)) {
		t.Fatalf("partition 0 offsets: %+v (want first 0, last 5, offset 2 by time)", p0)
	}
	if p2.Error != nil || p2.LastOffset != 0 {
		t.Fatalf("new partition 2 offsets: %+v", p2)
	}
}

// TestKafkaGoClientConfigs drives DescribeConfigs v3, AlterConfigs v1 and
// IncrementalAlterConfigs v0 on a topic, and DescribeConfigs of the broker.
func TestKafkaGoClientConfigs(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	k.CreateTopic("kgo-cfg", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl := kafkagoClient(k.Addr)

	describe := func(names ...string) map[string]kafka.DescribeConfigResponseConfigEntry {
		t.Helper()
		resp, err := cl.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{
			Resources: []kafka.DescribeConfigRequestResource{{ResourceType: kafka.ResourceTypeTopic, ResourceName: "kgo-cfg", ConfigNames: names}},
		})
		if err != nil || len(resp.Resources) != 1 || resp.Resources[0].Error != nil {
			t.Fatalf("DescribeConfigs: %v %+v", err, resp)
		}
		out := map[string]kafka.DescribeConfigResponseConfigEntry{}
		for _, e := range resp.Resources[0].ConfigEntries {
			out[e.ConfigName] = e
		}
		return out
	}
	c := describe("retention.ms", "cleanup.policy")
	// IsDefault is a v0 field (v1+ has ConfigSource); kafka-go's Split
	// drops IncludeSynonyms/IncludeDocumentation for topic resources.
	if len(c) != 2 || c["retention.ms"].ConfigValue != "604800000" || c["retention.ms"].ReadOnly ||
		c["retention.ms"].ConfigSource != 5 || c["cleanup.policy"].ConfigValue != "delete" || c["retention.ms"].ConfigType != 5 {
		t.Fatalf("default configs: %+v", c)
	}

	ac, err := cl.AlterConfigs(ctx, &kafka.AlterConfigsRequest{Resources: []kafka.AlterConfigRequestResource{{
		ResourceType: kafka.ResourceTypeTopic, ResourceName: "kgo-cfg",
		Configs: []kafka.AlterConfigRequestConfig{{Name: "retention.ms", Value: "1000"}, {Name: "segment.bytes", Value: "1048576"}},
	}}})
	if err != nil || len(ac.Errors) != 1 {
		t.Fatalf("AlterConfigs: %v %v", err, ac.Errors)
	}
	for r, e := range ac.Errors {
		if e != nil || r.Name != "kgo-cfg" {
			t.Fatalf("AlterConfigs %+v: %v", r, e)
		}
	}
	c = describe()
	if c["retention.ms"].ConfigValue != "1000" || c["retention.ms"].ConfigSource != 1 || c["segment.bytes"].ConfigValue != "1048576" {
		t.Fatalf("after AlterConfigs: %+v %+v", c["retention.ms"], c["segment.bytes"])
	}

	ia, err := cl.IncrementalAlterConfigs(ctx, &kafka.IncrementalAlterConfigsRequest{Resources: []kafka.IncrementalAlterConfigsRequestResource{{
		ResourceType: kafka.ResourceTypeTopic, ResourceName: "kgo-cfg",
		Configs: []kafka.IncrementalAlterConfigsRequestConfig{
			{Name: "retention.ms", ConfigOperation: kafka.ConfigOperationDelete},
			{Name: "max.message.bytes", Value: "2000000", ConfigOperation: kafka.ConfigOperationSet},
		},
	}}})
	if err != nil || len(ia.Resources) != 1 || ia.Resources[0].Error != nil {
		t.Fatalf("IncrementalAlterConfigs: %v %+v", err, ia)
	}
	c = describe()
	if c["retention.ms"].ConfigValue != "604800000" || c["max.message.bytes"].ConfigValue != "2000000" || c["segment.bytes"].ConfigValue != "1048576" {
		t.Fatalf("after IncrementalAlterConfigs: %+v %+v %+v", c["retention.ms"], c["max.message.bytes"], c["segment.bytes"])
	}

	ia, err = cl.IncrementalAlterConfigs(ctx, &kafka.IncrementalAlterConfigsRequest{Resources: []kafka.IncrementalAlterConfigsRequestResource{{
		ResourceType: kafka.ResourceTypeTopic, ResourceName: "kgo-cfg",
		Configs: []kafka.IncrementalAlterConfigsRequestConfig{{Name: "retention.ms", Value: "soon", ConfigOperation: kafka.ConfigOperationSet}},
	}}})
	if err != nil || !errors.Is(ia.Resources[0].Error, kafka.InvalidConfiguration) {
		t.Fatalf("bad value: %v %+v", err, ia)
	}

	br, err := cl.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{
		{ResourceType: kafka.ResourceTypeBroker, ResourceName: "0", ConfigNames: []string{"auto.create.topics.enable"}},
	}})
	if err != nil || len(br.Resources) != 1 || br.Resources[0].Error != nil || len(br.Resources[0].ConfigEntries) != 1 ||
		br.Resources[0].ConfigEntries[0].ConfigValue != "true" {
		t.Fatalf("broker DescribeConfigs: %v %+v", err, br)
	}
}

// TestKafkaGoClientGroups drives the group admin APIs after a group Reader
// committed: ListGroups v2, DescribeGroups v5, OffsetFetch v5 (also through
// ConsumerOffsets), OffsetDelete v0 and DeleteGroups v2.
func TestKafkaGoClientGroups(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	k.CreateTopic("kgo-groups", 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := kafkagoClient(k.Addr)
	w := &kafka.Writer{Addr: kafka.TCP(k.Addr), Topic: "kgo-groups", RequiredAcks: kafka.RequireAll,
		Balancer: &kafka.RoundRobin{}, BatchTimeout: time.Millisecond, Transport: &kafka.Transport{}}
	defer w.Close()
	if err := w.WriteMessages(ctx, kafkagoMessages(10)...); err != nil {
		t.Fatal(err)
	}
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{k.Addr}, GroupID: "kgo-admin-g", Topic: "kgo-groups",
		MaxWait: 100 * time.Millisecond, HeartbeatInterval: 200 * time.Millisecond, JoinGroupBackoff: 100 * time.Millisecond})
	kafkagoRead(t, ctx, r, 10)

	lg, err := cl.ListGroups(ctx, &kafka.ListGroupsRequest{})
	if err != nil || lg.Error != nil || len(lg.Groups) != 1 || lg.Groups[0].GroupID != "kgo-admin-g" || lg.Groups[0].ProtocolType != "consumer" {
		t.Fatalf("ListGroups: %v %+v", err, lg)
	}
	dg, err := cl.DescribeGroups(ctx, &kafka.DescribeGroupsRequest{GroupIDs: []string{"kgo-admin-g"}})
	if err != nil || len(dg.Groups) != 1 {
		t.Fatalf("DescribeGroups: %v %+v", err, dg)
	}
	g := dg.Groups[0]
	if g.Error != nil || g.GroupState != "Stable" || len(g.Members) != 1 || len(g.Members[0].MemberAssignments.Topics) != 1 ||
		len(g.Members[0].MemberAssignments.Topics[0].Partitions) != 2 || g.Members[0].MemberMetadata.Topics[0] != "kgo-groups" {
		t.Fatalf("DescribeGroups group: %+v", g)
	}
	of, err := cl.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: "kgo-admin-g", Topics: map[string][]int{"kgo-groups": {0, 1}}})
	if err != nil || of.Error != nil || len(of.Topics["kgo-groups"]) != 2 {
		t.Fatalf("OffsetFetch: %v %+v", err, of)
	}
	for _, p := range of.Topics["kgo-groups"] {
		if p.Error != nil || p.CommittedOffset != 5 {
			t.Fatalf("committed %+v, want 5 on each partition", p)
		}
	}
	// Offsets of a subscribed topic cannot be deleted while the group is
	// active (GROUP_SUBSCRIBED_TO_TOPIC); DeleteGroups of a non-empty
	// group is NON_EMPTY_GROUP.
	od, err := cl.OffsetDelete(ctx, &kafka.OffsetDeleteRequest{GroupID: "kgo-admin-g", Topics: map[string][]int{"kgo-groups": {0}}})
	if err != nil || od.Error != nil || !errors.Is(od.Topics["kgo-groups"][0].Error, kafka.GroupSubscribedToTopic) {
		t.Fatalf("OffsetDelete of an active group: %v %+v", err, od)
	}
	del, err := cl.DeleteGroups(ctx, &kafka.DeleteGroupsRequest{GroupIDs: []string{"kgo-admin-g"}})
	if err != nil || !errors.Is(del.Errors["kgo-admin-g"], kafka.NonEmptyGroup) {
		t.Fatalf("DeleteGroups of an active group: %v %+v", err, del)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	od, err = cl.OffsetDelete(ctx, &kafka.OffsetDeleteRequest{GroupID: "kgo-admin-g", Topics: map[string][]int{"kgo-groups": {0}}})
	if err != nil || od.Error != nil || od.Topics["kgo-groups"][0].Error != nil {
		t.Fatalf("OffsetDelete of an empty group: %v %+v", err, od)
	}
	offs, err := cl.ConsumerOffsets(ctx, kafka.TopicAndGroup{Topic: "kgo-groups", GroupId: "kgo-admin-g"})
	if err != nil || offs[0] != -1 || offs[1] != 5 {
		t.Fatalf("ConsumerOffsets after OffsetDelete(0): %v %v", offs, err)
	}
	del, err = cl.DeleteGroups(ctx, &kafka.DeleteGroupsRequest{GroupIDs: []string{"kgo-admin-g", "kgo-none"}})
	if err != nil || del.Errors["kgo-admin-g"] != nil || !errors.Is(del.Errors["kgo-none"], kafka.GroupIdNotFound) {
		t.Fatalf("DeleteGroups: %v %+v", err, del)
	}
}

// TestKafkaGoClientReplicaAdmin: on one node, ElectLeaders v1 answers
// ELECTION_NOT_NEEDED, AlterPartitionReassignments v0 to this node is a
// no-op and elsewhere INVALID_REPLICA_ASSIGNMENT, and
// ListPartitionReassignments v0 lists nothing. Before, the broker closed the
// connection on these keys (kafka-go's own suite calls them).
func TestKafkaGoClientReplicaAdmin(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	k.CreateTopic("kgo-replicas", 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl := kafkagoClient(k.Addr)
	node := int(k.Config.NodeID)

	el, err := cl.ElectLeaders(ctx, &kafka.ElectLeadersRequest{Topic: "kgo-replicas", Partitions: []int{0, 1, 7}})
	if err != nil || el.Error != nil || len(el.PartitionResults) != 3 {
		t.Fatalf("ElectLeaders: %v %+v", err, el)
	}
	for _, p := range el.PartitionResults {
		want := kafka.ElectionNotNeeded
		if p.Partition == 7 {
			want = kafka.UnknownTopicOrPartition
		}
		if !errors.Is(p.Error, want) {
			t.Fatalf("ElectLeaders partition %d: %v, want %v", p.Partition, p.Error, want)
		}
	}

	ar, err := cl.AlterPartitionReassignments(ctx, &kafka.AlterPartitionReassignmentsRequest{Topic: "kgo-replicas",
		Assignments: []kafka.AlterPartitionReassignmentsRequestAssignment{
			{PartitionID: 0, BrokerIDs: []int{node}},
			{PartitionID: 1, BrokerIDs: []int{node, node + 1}},
		}})
	if err != nil || ar.Error != nil || len(ar.PartitionResults) != 2 {
		t.Fatalf("AlterPartitionReassignments: %v %+v", err, ar)
	}
	for _, p := range ar.PartitionResults {
		if (p.PartitionID == 0 && p.Error != nil) || (p.PartitionID == 1 && !errors.Is(p.Error, kafka.InvalidReplicaAssignment)) {
			t.Fatalf("AlterPartitionReassignments partition %d: %v", p.PartitionID, p.Error)
		}
	}

	lr, err := cl.ListPartitionReassignments(ctx, &kafka.ListPartitionReassignmentsRequest{
		Topics: map[string]kafka.ListPartitionReassignmentsRequestTopic{"kgo-replicas": {PartitionIndexes: []int{0, 1}}}})
	if err != nil || lr.Error != nil || len(lr.Topics) != 0 {
		t.Fatalf("ListPartitionReassignments: %v %+v", err, lr)
	}
}
