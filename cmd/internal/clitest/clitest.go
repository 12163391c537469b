// Package clitest is the test broker of the command tests (cmd/kawa,
// cmd/kawa-bench): an in-process kfake per test, or one external broker for
// every test when KAWA_TEST_BROKERS is set, with kgo/kadm clients and unique
// names.
package clitest

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Broker returns the --brokers value the tests talk to. By default each
// test gets its own in-process kfake broker. With KAWA_TEST_BROKERS set
// (e.g. to a `kawa serve` address) every test uses that broker instead, with
// topics and groups named uniquely per test, so the same assertions hold
// for Kawa.
func Broker(t *testing.T) string {
	t.Helper()
	if addr := os.Getenv("KAWA_TEST_BROKERS"); addr != "" {
		return addr
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()[0]
}

// Shared reports whether the tests share one external broker, where
// assertions about the whole cluster (every topic) do not hold.
func Shared() bool { return os.Getenv("KAWA_TEST_BROKERS") != "" }

var nameSeq atomic.Int64

// UniqueName is a topic or group name unique within this process and run.
func UniqueName(t *testing.T, prefix string) string {
	clean := regexp.MustCompile(`[^a-zA-Z0-9]+`).ReplaceAllString(t.Name(), "-")
	return fmt.Sprintf("%s-%s-%d-%d", prefix, strings.ToLower(clean), time.Now().UnixNano()%1e6, nameSeq.Add(1))
}

// Topic creates a topic with the given partitions through kadm.
func Topic(t *testing.T, addr string, partitions int32) string {
	t.Helper()
	name := UniqueName(t, "t")
	adm := Admin(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, partitions, 1, nil, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
	return name
}

// Client returns a kgo client for addr, closed when the test ends.
func Client(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// Admin returns a kadm client for addr, closed when the test ends.
func Admin(t *testing.T, addr string) *kadm.Client {
	return kadm.NewClient(Client(t, addr))
}
