package broker_test

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/kawatest"
	"github.com/kawa-broker/kawa/internal/kawatest/rawreq"
)

// logDir describes the broker's one log dir through kadm (DescribeLogDirs v4) and fails the test unless
// there is exactly one, without error.
func logDir(t *testing.T, adm *kadm.Client, s kadm.TopicsSet) kadm.DescribedLogDir {
	t.Helper()
	all, err := adm.DescribeAllLogDirs(testCtx(t), s)
	if err != nil {
		t.Fatal(err)
	}
	dirs := all.Sorted()
	if len(all) != 1 || len(dirs) != 1 {
		t.Fatalf("log dirs = %v, want one broker with one dir", all)
	}
	if dirs[0].Err != nil {
		t.Fatalf("dir %s: %v", dirs[0].Dir, dirs[0].Err)
	}
	return dirs[0]
}

func TestDescribeLogDirs(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	k.CreateTopic("a", 2, nil)
	k.CreateTopic("b", 1, nil)
	adm := k.Admin()
	cl := k.Client(kgo.DefaultProduceTopic("a"), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression())) // sizes grow by at least the bytes produced
	produce := func(n int) {
		var recs []*kgo.Record
		for i := range n {
			recs = append(recs, &kgo.Record{Partition: 0, Value: fmt.Appendf(nil, "value-%04d", i)})
		}
		produceAll(t, cl, recs)
	}
	produce(100)

	d := logDir(t, adm, nil)
	abs, _ := filepath.Abs(k.Dir)
	if d.Dir != abs {
		t.Errorf("Dir = %q, want the data dir %q", d.Dir, abs)
	}
	if d.TotalBytes <= 0 || d.UsableBytes < 0 || d.UsableBytes > d.TotalBytes {
		t.Errorf("TotalBytes %d, UsableBytes %d: want 0 <= usable <= total, total > 0", d.TotalBytes, d.UsableBytes)
	}
	a0, ok := d.Topics.Lookup("a", 0)
	if !ok || a0.Size <= 0 || a0.OffsetLag != 0 || a0.IsFuture {
		t.Fatalf("a-0 = %+v (listed %v), want Size > 0, OffsetLag 0, not future", a0, ok)
	}
	for _, tp := range []struct {
		topic string
		p     int32
	}{{"a", 1}, {"b", 0}} {
		if p, ok := d.Topics.Lookup(tp.topic, tp.p); !ok || p.Size != 0 {
			t.Errorf("%s-%d = %+v (listed %v), want listed with Size 0 (nothing produced)", tp.topic, tp.p, p, ok)
		}
	}

	produce(100)
	d = logDir(t, adm, nil)
	if grown, _ := d.Topics.Lookup("a", 0); grown.Size <= a0.Size+100*10 { // 100 more values of 10 bytes
		t.Errorf("a-0 after 100 more records: Size %d, before %d: want it grown by more than their 1000 value bytes", grown.Size, a0.Size)
	}

	// A filter lists only what it names; unknown topics and partitions are simply left out, as in Kafka
	// (sent to the broker directly: DescribeAllLogDirs would route by metadata, which has no nope-0).
	dirs, err := adm.DescribeBrokerLogDirs(testCtx(t), k.Config.NodeID, kadm.TopicsSet{"b": {0: {}}, "a": {1: {}, 7: {}}, "nope": {0: {}}})
	if err != nil || dirs.Error() != nil {
		t.Fatalf("DescribeBrokerLogDirs: %v, %v", err, dirs.Error())
	}
	var got []string
	for _, p := range dirs.SortedPartitions() {
		got = append(got, fmt.Sprintf("%s-%d", p.Topic, p.Partition))
	}
	if fmt.Sprint(got) != "[a-1 b-0]" {
		t.Errorf("filtered to a-1, a-7, b-0, nope-0: got %v, want a-1 and b-0", got)
	}
}

// TestDescribeLogDirsV1 sends the oldest version Kafka 4.x accepts, below any client: same answer, without
// the v3 error code and v4 byte counts.
func TestDescribeLogDirsV1(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	k.CreateTopic("a", 1, nil)
	conn, err := net.DialTimeout("tcp", k.Addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	req := kmsg.NewPtrDescribeLogDirsRequest()
	req.Version = 1
	rt := kmsg.NewDescribeLogDirsRequestTopic()
	rt.Topic, rt.Partitions = "a", []int32{0}
	req.Topics = append(req.Topics, rt)
	if _, err := conn.Write(rawreq.Frame(req, 1, nil)); err != nil {
		t.Fatal(err)
	}
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	if err := rawreq.ReadResponse(conn, 1, resp); err != nil {
		t.Fatal(err)
	}
	if len(resp.Dirs) != 1 || resp.Dirs[0].ErrorCode != 0 || len(resp.Dirs[0].Topics) != 1 ||
		resp.Dirs[0].Topics[0].Topic != "a" || len(resp.Dirs[0].Topics[0].Partitions) != 1 || resp.Dirs[0].Topics[0].Partitions[0].Partition != 0 {
		t.Fatalf("v1 response = %+v, want one dir listing a-0", resp)
	}
}

func TestDescribeLogDirsAuthorization(t *testing.T) {
	t.Parallel()
	a := startAuthz(t)
	if _, err := a.admin("admin").CreateTopic(testCtx(t), 1, 1, nil, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.admin("alice").DescribeAllLogDirs(testCtx(t), nil); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("alice without DESCRIBE on the cluster: err = %v, want CLUSTER_AUTHORIZATION_FAILED", err)
	}
	// DESCRIBE on a topic is not enough: Kafka asks for the cluster.
	a.grant(kadm.NewACLs().Allow("User:alice").AllowHosts().Topics("a").Operations(kadm.OpDescribe))
	if _, err := a.admin("alice").DescribeAllLogDirs(testCtx(t), nil); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("alice with DESCRIBE on topic a only: err = %v, want CLUSTER_AUTHORIZATION_FAILED", err)
	}
	a.grant(kadm.NewACLs().Allow("User:alice").AllowHosts().Clusters().Operations(kadm.OpDescribe))
	if _, ok := logDir(t, a.admin("alice"), nil).Topics.Lookup("a", 0); !ok {
		t.Fatalf("alice with DESCRIBE on the cluster: a-0 not listed")
	}
}
