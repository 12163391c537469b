package main

import (
	"context"
	"errors"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestServeDefaultsMatchKafkaQuickstart: `kawa serve` is node 1 and, where
// localhost resolves only to 127.0.0.1, advertises localhost, as Kafka's
// quickstart broker does (kafka-go's own test suite asserts broker ID 1 at
// localhost:9092 and treats a coordinator node 0 as missing); --node-id and
// --advertised-host override them.
func TestServeDefaultsMatchKafkaQuickstart(t *testing.T) {
	t.Parallel()
	wantHost := loopbackName("127.0.0.1", net.LookupHost)
	for _, c := range []struct {
		flags []string
		node  int32
		host  string
	}{{nil, 1, wantHost}, {[]string{"--node-id", "7", "--advertised-host", "127.0.0.1"}, 7, "127.0.0.1"}} {
		p := startKawa(t, t.TempDir(), c.flags...)
		_, port, _ := net.SplitHostPort(p.Addr)
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
		if len(md.Brokers) != 1 || md.Brokers[0].NodeID != c.node || md.Brokers[0].Host != c.host ||
			strconv.Itoa(int(md.Brokers[0].Port)) != port || md.ControllerID != c.node || co.NodeID != c.node || co.Host != c.host {
			t.Errorf("flags %v: brokers %+v controller %d coordinator %d@%s, want node %d at %s:%s",
				c.flags, md.Brokers, md.ControllerID, co.NodeID, co.Host, c.node, c.host, port)
		}
	}
}

func TestLoopbackName(t *testing.T) {
	t.Parallel()
	resolve := func(addrs ...string) func(string) ([]string, error) {
		return func(string) ([]string, error) { return addrs, nil }
	}
	failing := func(string) ([]string, error) { return nil, errors.New("no resolver") }
	for _, c := range []struct {
		host   string
		lookup func(string) ([]string, error)
		want   string
	}{
		{"127.0.0.1", resolve("127.0.0.1"), "localhost"},
		{"127.0.0.1", resolve("127.0.0.1", "127.0.0.1"), "localhost"},
		{"127.0.0.1", resolve("::1", "127.0.0.1"), "127.0.0.1"}, // ::1 would be refused
		{"127.0.0.1", resolve(), "127.0.0.1"},
		{"127.0.0.1", failing, "127.0.0.1"},
		{"10.0.0.5", resolve("127.0.0.1"), "10.0.0.5"},
		{"::1", resolve("::1"), "::1"},
	} {
		if got := loopbackName(c.host, c.lookup); got != c.want {
			t.Errorf("loopbackName(%q) = %q, want %q", c.host, got, c.want)
		}
	}
}
