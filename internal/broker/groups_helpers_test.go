package broker_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/kawatest"
)

// Group tests use Kafka's smallest allowed session timeout
// (group.min.session.timeout.ms, 6 s; Kawa's broker does not lower it) and
// heartbeat often, so a member that dies is noticed ~6 s later.
const (
	groupSession   = 6 * time.Second
	groupHeartbeat = 250 * time.Millisecond
)

// errCut is what a cut dialer answers once its client is "dead".
var errCut = errors.New("test: connection cut")

// cutDialer dials for one kgo client and can cut it off the network at
// once: every open connection is reset (RST, no FIN handshake, nothing more
// sent) and every later dial fails. To the broker this is a crashed client
// process: nothing tells the coordinator, only the session timeout does.
type cutDialer struct {
	mu    sync.Mutex
	conns []net.Conn
	cut   bool
}

func (d *cutDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	dead := d.cut
	d.mu.Unlock()
	if dead {
		return nil, errCut
	}
	c, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cut {
		c.Close()
		return nil, errCut
	}
	d.conns = append(d.conns, c)
	return c, nil
}

// Cut resets every connection and refuses new ones.
func (d *cutDialer) Cut() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cut = true
	for _, c := range d.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		c.Close()
	}
	d.conns = nil
}

// crashableClient is a kgo client on a cutDialer. Crash cuts it off; Close
// then returns at once (it would otherwise retry its LeaveGroup).
type crashableClient struct {
	*kgo.Client
	d *cutDialer
}

func newCrashable(t *testing.T, addr string, opts ...kgo.Opt) *crashableClient {
	t.Helper()
	d := &cutDialer{}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.Dialer(d.dial)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	c := &crashableClient{Client: cl, d: d}
	t.Cleanup(c.Close)
	return c
}

// Crash cuts the client off the broker without leaving its group or
// committing anything more.
func (c *crashableClient) Crash() { c.d.Cut() }

// Close closes the client; after Crash it skips the LeaveGroup.
func (c *crashableClient) Close() {
	c.d.mu.Lock()
	cut := c.d.cut
	c.d.mu.Unlock()
	c.AllowRebalance()
	if cut {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_ = c.LeaveGroupContext(ctx)
	}
	c.Client.Close()
}

// memberOpts are the group options every test member shares.
func memberOpts(group, topic string) []kgo.Opt {
	return []kgo.Opt{
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.SessionTimeout(groupSession), kgo.HeartbeatInterval(groupHeartbeat),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100 * time.Millisecond),
	}
}

// produceValues writes n records to one partition, one batch, and returns
// the offsets they got (0..n-1 on a fresh partition).
func produceValues(t *testing.T, k *kawatest.Broker, topic string, partition int32, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl := k.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic(topic))
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Partition: partition, Value: []byte{byte(i)}}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// fetchCommitted asks OffsetFetch for exactly these partitions of topic and
// returns the committed offset of each (-1: none), failing on any error.
func fetchCommitted(t *testing.T, cl *kgo.Client, group, topic string, partitions ...int32) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic, rt.Partitions = topic, partitions
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != 0 {
		t.Fatalf("OffsetFetch %s: error code %d", group, resp.ErrorCode)
	}
	out := make(map[int32]int64)
	for _, tp := range resp.Topics {
		for _, p := range tp.Partitions {
			if p.ErrorCode != 0 {
				t.Fatalf("OffsetFetch %s %s[%d]: error code %d", group, tp.Topic, p.Partition, p.ErrorCode)
			}
			out[p.Partition] = p.Offset
		}
	}
	return out
}

// describeGroup returns DescribeGroups' answer for one group.
func describeGroup(t *testing.T, adm *kadm.Client, group string) kadm.DescribedGroup {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ds, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	return ds[group]
}

// offsetRange is {from, ..., to-1}.
func offsetRange(from, to int64) map[int64]bool {
	s := make(map[int64]bool)
	for o := from; o < to; o++ {
		s[o] = true
	}
	return s
}

func sameOffsetSet(a, b map[int64]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for o := range a {
		if !b[o] {
			return false
		}
	}
	return true
}
