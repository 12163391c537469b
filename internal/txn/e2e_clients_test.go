package txn_test

import (
	"bytes"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/IBM/sarama"

	"github.com/kawa-broker/kawa/internal/kawatest"
)

// sarama's transactional producer writes committed, aborted and committed
// transactions; franz-go read_committed, kcat (librdkafka) with
// isolation.level=read_committed and a franz-go read_uncommitted consumer
// agree on what is visible.
func TestSaramaKcatFranzAgree(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	topic := name("sarama")
	k.CreateTopic(topic, 2, nil)
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_8_0_0
	cfg.Producer.Idempotent = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Producer.Transaction.ID = name("sarama-tx")
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Net.MaxOpenRequests = 1
	prod, err := sarama.NewSyncProducer([]string{k.Addr}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	for _, txn := range []struct {
		commit bool
		values []string
	}{{true, []string{"a", "b"}}, {false, []string{"c", "d"}}, {true, []string{"e"}}} {
		if err := prod.BeginTxn(); err != nil {
			t.Fatal(err)
		}
		for i, v := range txn.values {
			msg := &sarama.ProducerMessage{Topic: topic, Partition: int32(i % 2), Value: sarama.StringEncoder(v)}
			if _, _, err := prod.SendMessage(msg); err != nil {
				t.Fatalf("send %q: %v", v, err)
			}
		}
		if txn.commit {
			err = prod.CommitTxn()
		} else {
			err = prod.AbortTxn()
		}
		if err != nil {
			t.Fatalf("end (commit=%v): %v", txn.commit, err)
		}
	}
	committed := []string{"a", "b", "e"}
	waitVisible(t, k, topic, committed)
	if got := readAll(t, k, topic, false, 5); !slices.Equal(got, []string{"a", "b", "c", "d", "e"}) {
		t.Fatalf("read_uncommitted: %q", got)
	}
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		if os.Getenv("KAWA_REQUIRE_KCAT") != "" {
			t.Fatal("kcat not installed but KAWA_REQUIRE_KCAT is set")
		}
		t.Skip("kcat not installed")
	}
	for iso, want := range map[string][]string{"read_committed": committed, "read_uncommitted": {"a", "b", "c", "d", "e"}} {
		cmd := exec.Command(kcat, "-C", "-b", k.Addr, "-t", topic, "-o", "beginning", "-e", "-q", "-f", "%s\n", "-X", "isolation.level="+iso)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("kcat %s: %v\n%s", iso, err, stderr.String())
		}
		got := strings.Fields(string(out))
		sort.Strings(got)
		if !slices.Equal(got, want) {
			t.Fatalf("kcat %s: %q, want %q", iso, got, want)
		}
	}
}
