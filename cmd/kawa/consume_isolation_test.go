package main

import (
	"context"
	"testing"
	"time"

	"github.com/kawa-broker/kawa/cmd/internal/clitest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestConsumeIsolation: an aborted transaction's record is skipped by
// read_committed and printed by read_uncommitted (KIP-98).
func TestConsumeIsolation(t *testing.T) {
	t.Parallel()
	addr := clitest.Broker(t)
	requireAPI(t, addr, kmsg.EndTxn)
	topic := clitest.Topic(t, addr, 1)
	cl := clitest.Client(t, addr, kgo.TransactionalID(clitest.UniqueName(t, "txn")), kgo.DefaultProduceTopic(topic))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, step := range []struct {
		value  string
		commit kgo.TransactionEndTry
	}{{"aborted", kgo.TryAbort}, {"committed", kgo.TryCommit}} {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(step.value)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := cl.EndTransaction(ctx, step.commit); err != nil {
			t.Fatal(err)
		}
	}
	b := []string{"--brokers", addr, "--topic", topic, "--from-beginning"}
	if out := mustRun(t, runConsume, "", append(b, "--isolation", "read_committed", "--max-messages", "1")...); out != "committed\n" {
		t.Errorf("read_committed: %q", out)
	}
	if out := mustRun(t, runConsume, "", append(b, "--max-messages", "2")...); out != "aborted\ncommitted\n" {
		t.Errorf("read_uncommitted: %q", out)
	}
}

// requireAPI skips the test when the broker does not advertise key, so the
// tests can run against a broker that implements the protocol in stages.
func requireAPI(t *testing.T, addr string, key kmsg.Key) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	versions, err := clitest.Admin(t, addr).ApiVersions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	versions.Each(func(v kadm.BrokerApiVersions) {
		_, ok := v.KeyMaxVersion(int16(key))
		found = found || ok
	})
	if !found {
		t.Skipf("broker does not advertise %s", key.Name())
	}
}
