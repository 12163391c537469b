package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kawa-broker/kawa/cmd/internal/cli"
	"github.com/kawa-broker/kawa/internal/kawatest"
	"github.com/kawa-broker/kawa/internal/kawatest/wait"
)

// groupFixture is a Kawa broker holding topic "t" (3 partitions, 10 records
// each, record i of every partition stamped base+i seconds) and group "g"
// with admin-committed offsets p0=3 and p2=10.
type groupFixture struct {
	k    *kawatest.Broker
	b    string // --brokers flag
	base time.Time
}

func newGroupFixture(t *testing.T) *groupFixture {
	t.Helper()
	k := kawatest.NewBroker(t)
	k.CreateTopic("t", 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	base := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	prod := k.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic("t"))
	// One record per batch. NB: Kawa's by-time ListOffsets answers the base
	// offset of the first batch whose max timestamp reaches the time, where
	// Kafka answers the exact record; with one record per batch they agree.
	for i := 0; i < 10; i++ {
		var recs []*kgo.Record
		for p := int32(0); p < 3; p++ {
			recs = append(recs, &kgo.Record{Partition: p, Value: []byte("v"), Timestamp: base.Add(time.Duration(i) * time.Second)})
		}
		if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: "t", Partition: 0, At: 3, LeaderEpoch: -1})
	os.Add(kadm.Offset{Topic: "t", Partition: 2, At: 10, LeaderEpoch: -1})
	if err := k.Admin().CommitAllOffsets(ctx, "g", os); err != nil {
		t.Fatal(err)
	}
	return &groupFixture{k: k, b: "--brokers=" + k.Addr, base: base}
}

// committed returns g's committed offsets of t by partition.
func (f *groupFixture) committed(t *testing.T) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := f.k.Admin().FetchOffsets(ctx, "g")
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	resp.Each(func(o kadm.OffsetResponse) { out[o.Partition] = o.At })
	return out
}

func sameCommitted(got, want map[int32]int64) bool {
	if len(got) != len(want) {
		return false
	}
	for p, o := range want {
		if g, ok := got[p]; !ok || g != o {
			return false
		}
	}
	return true
}

// TestGroupListDescribeDelete: list, describe (Stable with a member, then
// Empty) and delete, with exact tables.
func TestGroupListDescribeDelete(t *testing.T) {
	t.Parallel()
	f := newGroupFixture(t)
	if out := mustRun(t, runGroup, "", "list", f.b); out != "GROUP  STATE  PROTOCOL-TYPE\ng      Empty  -\n" {
		t.Errorf("list with a simple group:\n%q", out)
	}

	assigned := make(chan struct{}, 1)
	cons := f.k.Client(kgo.ConsumerGroup("g"), kgo.ConsumeTopics("t"), kgo.ClientID("cli-test"),
		kgo.Balancers(kgo.RangeBalancer()), kgo.DisableAutoCommit(), kgo.FetchMaxWait(100*time.Millisecond),
		kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) { assigned <- struct{}{} }))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	go cons.PollFetches(ctx) // joins the group
	select {
	case <-assigned:
	case <-ctx.Done():
		t.Fatal("consumer never got an assignment")
	}
	out := mustRun(t, runGroup, "", "describe", "g", f.b)
	checkStableDescribe(t, out)
	if _, err := runCmd(t, runGroup, "", "delete", "g", f.b); !errors.Is(err, kerr.NonEmptyGroup) {
		t.Errorf("delete of a Stable group: %v, want NON_EMPTY_GROUP", err)
	}

	cons.Close() // LeaveGroup: the group is Empty at once
	out = mustRun(t, runGroup, "", "describe", "g", f.b)
	want := "group: g\nstate: Empty\nprotocol-type: consumer\nprotocol: -\nmembers: 0\n\n" +
		"TOPIC  PARTITION  COMMITTED  END  LAG  MEMBER-ID\n" +
		"t      0          3          10   7    -\n" +
		"t      1          -          10   10   -\n" + // kadm lists every partition of a committed topic
		"t      2          10         10   0    -\n"
	if out != want {
		t.Errorf("describe Empty:\n%s\nwant\n%s", out, want)
	}

	if out := mustRun(t, runGroup, "", "delete", "g", f.b); out != "deleted group g\n" {
		t.Errorf("delete: %q", out)
	}
	if out := mustRun(t, runGroup, "", "list", f.b); out != "GROUP  STATE  PROTOCOL-TYPE\n" {
		t.Errorf("list after delete:\n%q", out)
	}
	for _, cmd := range []string{"describe", "delete"} {
		if _, err := runCmd(t, runGroup, "", cmd, "g", f.b); !errors.Is(err, kerr.GroupIDNotFound) {
			t.Errorf("%s of a deleted group: %v, want GROUP_ID_NOT_FOUND", cmd, err)
		}
	}
	if got := f.committed(t); len(got) != 0 {
		t.Errorf("offsets after delete: %v, want none", got)
	}
}

// checkStableDescribe checks the header, the one member (client id, host,
// the whole topic by range) and the lag rows with the member as owner.
func checkStableDescribe(t *testing.T, out string) {
	t.Helper()
	head := "group: g\nstate: Stable\nprotocol-type: consumer\nprotocol: range\nmembers: 1\n\n"
	if !strings.HasPrefix(out, head) {
		t.Fatalf("describe Stable header:\n%s", out)
	}
	lines := strings.Split(strings.TrimPrefix(out, head), "\n")
	if strings.Join(strings.Fields(lines[0]), " ") != "MEMBER-ID INSTANCE-ID CLIENT-ID HOST ASSIGNMENT" {
		t.Fatalf("member header %q", lines[0])
	}
	m := strings.Fields(lines[1])
	if len(m) != 5 || !strings.HasPrefix(m[0], "cli-test-") || m[1] != "-" || m[2] != "cli-test" ||
		!strings.Contains(m[3], "127.0.0.1") || m[4] != "t:0,1,2" {
		t.Fatalf("member row %q", lines[1])
	}
	member := m[0]
	rows := []string{
		"TOPIC PARTITION COMMITTED END LAG MEMBER-ID",
		"t 0 3 10 7 " + member,
		"t 1 - 10 10 " + member,
		"t 2 10 10 0 " + member,
	}
	for i, want := range rows {
		if got := strings.Join(strings.Fields(lines[3+i]), " "); got != want {
			t.Errorf("lag row %d: %q, want %q\n%s", i, got, want, out)
		}
	}
}

// TestGroupResetOffsets: each reset mode's plan, dry run by default,
// --execute commits, and a non-Empty group is refused.
func TestGroupResetOffsets(t *testing.T) {
	t.Parallel()
	f := newGroupFixture(t)
	initial := map[int32]int64{0: 3, 2: 10}

	out := mustRun(t, runGroup, "", "reset-offsets", "g", "--topic", "t", "--to-earliest", f.b)
	want := "TOPIC  PARTITION  CURRENT  NEW\n" +
		"t      0          3        0\n" +
		"t      1          -        0\n" +
		"t      2          10       0\n" +
		"dry run: nothing committed; add --execute to commit these offsets\n"
	if out != want {
		t.Errorf("dry run:\n%s\nwant\n%s", out, want)
	}
	if got := f.committed(t); !sameCommitted(got, initial) {
		t.Fatalf("dry run changed offsets: %v", got)
	}

	steps := []struct {
		args []string
		want map[int32]int64
	}{
		{[]string{"--topic", "t:0,1", "--to-offset", "5"}, map[int32]int64{0: 5, 1: 5, 2: 10}},
		{[]string{"--topic", "t:1", "--to-offset", "100"}, map[int32]int64{0: 5, 1: 10, 2: 10}}, // clamped to the end
		{[]string{"--topic", "t", "--to-earliest"}, map[int32]int64{0: 0, 1: 0, 2: 0}},
		{[]string{"--topic", "t:2", "--to-latest"}, map[int32]int64{0: 0, 1: 0, 2: 10}},
		{[]string{"--topic", "t", "--to-datetime", f.base.Add(4500 * time.Millisecond).Format(time.RFC3339Nano)}, map[int32]int64{0: 5, 1: 5, 2: 5}},
		{[]string{"--topic", "t:0", "--to-datetime", f.base.Add(time.Hour).Format(time.RFC3339)}, map[int32]int64{0: 10, 1: 5, 2: 5}},
	}
	for _, s := range steps {
		args := append([]string{"reset-offsets", "g", "--execute", f.b}, s.args...)
		out := mustRun(t, runGroup, "", args...)
		if !strings.HasSuffix(out, " offsets for group g\n") {
			t.Errorf("%v: output %q", s.args, out)
		}
		if got := f.committed(t); !sameCommitted(got, s.want) {
			t.Errorf("%v: committed %v, want %v", s.args, got, s.want)
		}
	}

	assigned := make(chan struct{}, 1)
	cons := f.k.Client(kgo.ConsumerGroup("g"), kgo.ConsumeTopics("t"), kgo.DisableAutoCommit(), kgo.FetchMaxWait(100*time.Millisecond),
		kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) { assigned <- struct{}{} }))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	go cons.PollFetches(ctx)
	<-assigned
	_, err := runCmd(t, runGroup, "", "reset-offsets", "g", "--topic", "t", "--to-earliest", "--execute", f.b)
	if err == nil || !strings.Contains(err.Error(), "only be reset while the group is Empty, but it is Stable") {
		t.Errorf("reset of a Stable group: %v", err)
	}
}

// TestGroupResetOffsetsUsage: flag combinations and unknown topics.
func TestGroupResetOffsetsUsage(t *testing.T) {
	t.Parallel()
	f := newGroupFixture(t)
	var usage *cli.UsageError
	for _, args := range [][]string{
		{"reset-offsets", "g", "--to-earliest"},
		{"reset-offsets", "g", "--topic", "t"},
		{"reset-offsets", "g", "--topic", "t", "--to-earliest", "--to-latest"},
		{"reset-offsets", "g", "--topic", "t", "--to-offset", "-1"},
		{"reset-offsets", "g", "--topic", "t", "--to-datetime", "yesterday"},
		{"reset-offsets", "g", "--topic", "t:x", "--to-earliest"},
		{"reset-offsets", "--topic", "t", "--to-earliest"},
		{"frobnicate"},
	} {
		if _, err := runCmd(t, runGroup, "", append(args, f.b)...); !errors.As(err, &usage) {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
	for _, args := range [][]string{
		{"reset-offsets", "g", "--topic", "nope", "--to-earliest"},
		{"reset-offsets", "g", "--topic", "t:7", "--to-earliest"},
	} {
		if _, err := runCmd(t, runGroup, "", append(args, f.b)...); !errors.Is(err, kerr.UnknownTopicOrPartition) {
			t.Errorf("%v: %v, want UNKNOWN_TOPIC_OR_PARTITION", args, err)
		}
	}
	// A group that does not exist yet (Dead) may be given offsets.
	mustRun(t, runGroup, "", "reset-offsets", "fresh", "--topic", "t:1", "--to-offset", "4", "--execute", f.b)
	if out := mustRun(t, runGroup, "", "list", f.b); !hasRow(out, "fresh", "Empty", "-") {
		t.Errorf("list lacks the new simple group:\n%s", out)
	}
}

// TestGroupDescribeConsumerProtocol: `kawa group describe` of a KIP-848 group shows the group and
// assignment epochs, the assignor, each member's epoch with its current and target assignment,
// and the lag rows with the owner; `kawa group list` shows it beside the classic view.
func TestGroupDescribeConsumerProtocol(t *testing.T) {
	t.Parallel()
	f := newGroupFixture(t)
	cons := f.k.Client(kgo.ConsumerGroup("g"), kgo.ConsumeTopics("t"), kgo.ClientID("cli-848"),
		kgo.ServerSideBalancer(), kgo.Balancers(kgo.RangeBalancer()), kgo.DisableAutoCommit(), kgo.FetchMaxWait(100*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			cons.PollFetches(ctx)
		}
	}()
	var out string
	wait.Until(t, 20*time.Second, "the member to hold all three partitions", func() bool {
		var err error
		out, err = runCmd(t, runGroup, "", "describe", "g", f.b)
		if err != nil && strings.Contains(err.Error(), "GROUP_ID_NOT_FOUND") {
			return false // the member's first heartbeat has not created the group yet
		}
		if err != nil {
			t.Fatalf("describe g: %v (stdout %q)", err, out)
		}
		return strings.Contains(out, "state: Stable")
	})
	head := "group: g\ntype: consumer\nstate: Stable\ngroup-epoch: 1\nassignment-epoch: 1\nassignor: range\nmembers: 1\n\n"
	if !strings.HasPrefix(out, head) {
		t.Fatalf("describe header:\n%s\nwant prefix\n%s", out, head)
	}
	lines := strings.Split(strings.TrimPrefix(out, head), "\n")
	if got := strings.Join(strings.Fields(lines[0]), " "); got != "MEMBER-ID INSTANCE-ID CLIENT-ID HOST EPOCH ASSIGNMENT TARGET" {
		t.Fatalf("member header %q", got)
	}
	m := strings.Fields(lines[1])
	if len(m) != 7 || m[1] != "-" || m[2] != "cli-848" || m[4] != "1" || m[5] != "t:0,1,2" || m[6] != "t:0,1,2" {
		t.Fatalf("member row %q", lines[1])
	}
	rows := []string{
		"TOPIC PARTITION COMMITTED END LAG MEMBER-ID",
		"t 0 3 10 7 " + m[0],
		"t 1 - 10 10 " + m[0],
		"t 2 10 10 0 " + m[0],
	}
	for i, want := range rows {
		if got := strings.Join(strings.Fields(lines[3+i]), " "); got != want {
			t.Errorf("lag row %d: %q, want %q", i, got, want)
		}
	}
	if out := mustRun(t, runGroup, "", "list", f.b); out != "GROUP  STATE   PROTOCOL-TYPE\ng      Stable  consumer\n" {
		t.Errorf("list:\n%q", out)
	}
}
