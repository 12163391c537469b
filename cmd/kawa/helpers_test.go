package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
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

// testBroker returns the --brokers value the tests talk to. By default each
// test gets its own in-process kfake broker. With KAWA_TEST_BROKERS set
// (e.g. to a `kawa serve` address) every test uses that broker instead, with
// topics and groups named uniquely per test, so the same assertions hold
// for Kawa.
func testBroker(t *testing.T) string {
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

// brokerIsShared reports whether the tests share one external broker, where
// assertions about the whole cluster (every topic) do not hold.
func brokerIsShared() bool { return os.Getenv("KAWA_TEST_BROKERS") != "" }

var nameSeq atomic.Int64

// uniqueName is a topic or group name unique within this process and run.
func uniqueName(t *testing.T, prefix string) string {
	clean := regexp.MustCompile(`[^a-zA-Z0-9]+`).ReplaceAllString(t.Name(), "-")
	return fmt.Sprintf("%s-%s-%d-%d", prefix, strings.ToLower(clean), time.Now().UnixNano()%1e6, nameSeq.Add(1))
}

// testTopic creates a topic with the given partitions through kadm.
func testTopic(t *testing.T, addr string, partitions int32) string {
	t.Helper()
	name := uniqueName(t, "t")
	adm := testAdmin(t, addr)
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

func testClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func testAdmin(t *testing.T, addr string) *kadm.Client {
	return kadm.NewClient(testClient(t, addr))
}

// cmdFunc is the shape of every client subcommand.
type cmdFunc func(args []string, stdin io.Reader, stdout io.Writer) error

// runCmd runs a subcommand in-process and returns its stdout.
func runCmd(t *testing.T, fn cmdFunc, stdin string, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := fn(args, strings.NewReader(stdin), &out)
	return out.String(), err
}

// mustRun is runCmd that fails the test on error.
func mustRun(t *testing.T, fn cmdFunc, stdin string, args ...string) string {
	t.Helper()
	out, err := runCmd(t, fn, stdin, args...)
	if err != nil {
		t.Fatalf("%v: %v (stdout %q)", args, err, out)
	}
	return out
}
