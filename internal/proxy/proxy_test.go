package proxy_test

import (
	"context"
	"errors"
	"net"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/kawa-broker/kawa/internal/kawatest"
	"github.com/kawa-broker/kawa/internal/proxy"
)

// TestRewritesBrokerAddresses: Metadata, FindCoordinator and
// DescribeCluster answered through the proxy name the proxy, for old
// (non-flexible) and new (flexible, KIP-482) versions alike, so clients
// never bypass it.
func TestRewritesBrokerAddresses(t *testing.T) {
	t.Parallel()
	k, p := setup(t)
	host, portStr, _ := net.SplitHostPort(p.Addr())
	port, _ := strconv.Atoi(portStr)
	for _, tc := range []struct {
		name string
		max  *kversion.Versions
	}{
		{"0.11 non-flexible", kversion.V0_11_0()},
		{"2.8 flexible, FindCoordinator v3", kversion.V2_8_0()},
		{"latest, FindCoordinator v4", kversion.Stable()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			cl := k.Client(kgo.SeedBrokers(p.Addr()), kgo.MaxVersions(tc.max))
			seed := cl.SeedBrokers()[0]

			md, err := seed.Request(ctx, kmsg.NewPtrMetadataRequest())
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range md.(*kmsg.MetadataResponse).Brokers {
				if b.Host != host || b.Port != int32(port) {
					t.Fatalf("Metadata v%d advertises %s:%d, want the proxy %s", md.GetVersion(), b.Host, b.Port, p.Addr())
				}
			}

			fc := kmsg.NewPtrFindCoordinatorRequest()
			fc.CoordinatorKey, fc.CoordinatorKeys = "g", []string{"g"}
			r, err := seed.Request(ctx, fc)
			if err != nil {
				t.Fatal(err)
			}
			checkCoordinator(t, r.(*kmsg.FindCoordinatorResponse), host, int32(port))
		})
	}
	t.Run("DescribeCluster", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cl := k.Client(kgo.SeedBrokers(p.Addr()))
		r, err := cl.SeedBrokers()[0].Request(ctx, kmsg.NewPtrDescribeClusterRequest())
		if err != nil {
			t.Fatal(err)
		}
		bs := r.(*kmsg.DescribeClusterResponse).Brokers
		if len(bs) != 1 || bs[0].Host != host || bs[0].Port != int32(port) {
			t.Fatalf("DescribeCluster brokers %+v, want only the proxy %s", bs, p.Addr())
		}
	})
}

func checkCoordinator(t *testing.T, r *kmsg.FindCoordinatorResponse, host string, port int32) {
	t.Helper()
	if r.Version < 4 {
		if r.ErrorCode != 0 || r.Host != host || r.Port != port {
			t.Fatalf("FindCoordinator v%d: error %d at %s:%d, want the proxy", r.Version, r.ErrorCode, r.Host, r.Port)
		}
		return
	}
	if len(r.Coordinators) != 1 || r.Coordinators[0].Host != host || r.Coordinators[0].Port != port {
		t.Fatalf("FindCoordinator v%d coordinators %+v, want the proxy", r.Version, r.Coordinators)
	}
}

// TestClientTrafficGoesThroughProxy: a franz-go client seeded at the proxy
// sends its produce, fetch and group requests through it, and a response
// rule sees the key of the request each response answers.
func TestClientTrafficGoesThroughProxy(t *testing.T) {
	t.Parallel()
	k, p := setup(t)
	k.CreateTopic("via", 1, nil)
	var mu sync.Mutex
	requests, responses := map[int16]int{}, map[int16]int{}
	p.OnRequest(func(f proxy.Frame) proxy.Action {
		mu.Lock()
		requests[f.Key]++
		mu.Unlock()
		return proxy.Action{}
	})
	p.OnResponse(func(f proxy.Frame) proxy.Action {
		mu.Lock()
		responses[f.Key]++
		mu.Unlock()
		return proxy.Action{}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl := k.Client(kgo.SeedBrokers(p.Addr()), kgo.DefaultProduceTopic("via"),
		kgo.ConsumeTopics("via"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		// NB: the broker finishes a parked fetch even after its client
		// left, and cleanup waits for it; keep the park short.
		kgo.FetchMaxWait(100*time.Millisecond))
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if fs := cl.PollFetches(ctx); fs.NumRecords() != 1 {
		t.Fatalf("fetched %d records through the proxy: %v", fs.NumRecords(), fs.Errors())
	}
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "via", Partition: 0, At: 1})
	if _, err := kadm.NewClient(cl).CommitOffsets(ctx, "g", offs); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, key := range []int16{0, 1, 8, 10} { // Produce, Fetch, OffsetCommit, FindCoordinator
		if requests[key] == 0 || responses[key] == 0 {
			t.Errorf("%s: %d requests and %d responses crossed the proxy, want both > 0",
				kmsg.NameForKey(key), requests[key], responses[key])
		}
	}
}

// onCorr returns a rule that answers a for correlation ID corr and forwards
// everything else.
func onCorr(corr int32, a proxy.Action) proxy.Rule {
	return func(f proxy.Frame) proxy.Action {
		if f.Corr == corr {
			return a
		}
		return proxy.Action{}
	}
}

// TestActions: each action applies to exactly the chosen frame.
func TestActions(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	newProxy := func(t *testing.T) *proxy.Proxy {
		p, err := proxy.New(k.Addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		return p
	}
	t.Run("drop response", func(t *testing.T) {
		p := newProxy(t)
		p.OnResponse(onCorr(2, proxy.Action{Drop: true}))
		c := dial(t, p.Addr())
		for corr := int32(1); corr <= 3; corr++ {
			c.send(metadataV4(), corr)
		}
		c.mustRecv(1)
		c.mustRecv(3)
	})
	t.Run("drop request", func(t *testing.T) {
		p := newProxy(t)
		var seen []int32
		var mu sync.Mutex
		p.OnRequest(onCorr(2, proxy.Action{Drop: true}))
		p.OnResponse(func(f proxy.Frame) proxy.Action {
			mu.Lock()
			seen = append(seen, f.Corr)
			mu.Unlock()
			return proxy.Action{}
		})
		c := dial(t, p.Addr())
		for corr := int32(1); corr <= 3; corr++ {
			c.send(metadataV4(), corr)
		}
		c.mustRecv(1)
		c.mustRecv(3)
		mu.Lock()
		defer mu.Unlock()
		if len(seen) != 2 || seen[0] != 1 || seen[1] != 3 {
			t.Fatalf("broker answered %v, want [1 3]", seen)
		}
	})
	t.Run("delay", func(t *testing.T) {
		p := newProxy(t)
		const d = 150 * time.Millisecond
		p.OnResponse(onCorr(1, proxy.Action{Delay: d}))
		c := dial(t, p.Addr())
		start := time.Now()
		c.send(metadataV4(), 1)
		c.mustRecv(1)
		if el := time.Since(start); el < d {
			t.Fatalf("delayed response arrived after %v, want >= %v", el, d)
		}
	})
	t.Run("hold keeps order", func(t *testing.T) {
		p := newProxy(t)
		hold := make(chan struct{})
		p.OnResponse(onCorr(1, proxy.Action{Hold: hold}))
		c := dial(t, p.Addr())
		c.send(metadataV4(), 1)
		c.send(metadataV4(), 2)
		if _, _, err := c.recv(100 * time.Millisecond); !isTimeout(err) {
			t.Fatalf("read while held: %v, want a timeout", err)
		}
		close(hold)
		c.mustRecv(1)
		c.mustRecv(2)
	})
	t.Run("cut", func(t *testing.T) {
		p := newProxy(t)
		p.OnResponse(onCorr(2, proxy.Action{Cut: true}))
		c := dial(t, p.Addr())
		c.send(metadataV4(), 1)
		c.send(metadataV4(), 2)
		c.mustRecv(1)
		if _, _, err := c.recv(10 * time.Second); err == nil || isTimeout(err) {
			t.Fatalf("after cut: %v, want the connection closed", err)
		}
	})
	t.Run("cut all", func(t *testing.T) {
		p := newProxy(t)
		c := dial(t, p.Addr())
		c.send(metadataV4(), 1)
		c.mustRecv(1)
		p.CutAll()
		if _, _, err := c.recv(10 * time.Second); err == nil || isTimeout(err) {
			t.Fatalf("after CutAll: %v, want the connection closed", err)
		}
	})
	t.Run("close releases holds", func(t *testing.T) {
		p := newProxy(t)
		p.OnResponse(func(proxy.Frame) proxy.Action { return proxy.Action{Hold: make(chan struct{})} })
		c := dial(t, p.Addr())
		c.send(metadataV4(), 1)
		if _, _, err := c.recv(50 * time.Millisecond); !isTimeout(err) {
			t.Fatalf("read while held: %v, want a timeout", err)
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		if _, _, err := c.recv(10 * time.Second); err == nil || isTimeout(err) {
			t.Fatalf("after Close: %v, want the connection closed", err)
		}
	})
}

func isTimeout(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }
