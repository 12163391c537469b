package broker_test

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/kawa-broker/kawa/internal/kawatest"
	"github.com/kawa-broker/kawa/internal/proxy"
)

// TestLostAcksSarama: sarama's idempotent producer (one request in flight,
// acks=all) loses four Produce answers, two dropped (read timeout) and two
// cut (connection reset), retries, and every record is stored once, in
// order, at the offset sarama reported.
func TestLostAcksSarama(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	const topic, parts, n = "lostack-sarama", 2, 600
	k.CreateTopic(topic, parts, nil)
	px := newProxy(t, k)
	drop, cut := proxy.Action{Drop: true}, proxy.Action{Drop: true, Cut: true}
	seen := loseProduceAcks(px, lost(lost(nil, 3, 4, drop), 6, 7, cut))

	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_8_0_0
	cfg.Producer.Idempotent = true
	cfg.Net.MaxOpenRequests = 1
	cfg.Net.ReadTimeout = 500 * time.Millisecond
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Retry.Max = 20
	cfg.Producer.Retry.Backoff = 20 * time.Millisecond
	cfg.Producer.Flush.MaxMessages = 25
	cfg.Producer.Flush.Frequency = time.Millisecond
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Producer.Return.Successes = true
	prod, err := sarama.NewAsyncProducer([]string{px.Addr()}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	go func() {
		for i := range n {
			prod.Input() <- &sarama.ProducerMessage{Topic: topic, Partition: int32(i % parts), Value: sarama.StringEncoder(fmt.Sprintf("v-%d", i)), Metadata: i}
		}
	}()
	acked := make([]int64, n)
	timeout := time.After(30 * time.Second)
	for range n {
		select {
		case m := <-prod.Successes():
			acked[m.Metadata.(int)] = m.Offset
		case e := <-prod.Errors():
			t.Fatalf("sarama produce failed: %v", e.Err)
		case <-timeout:
			t.Fatal("sarama did not finish producing")
		}
	}
	if seen.Load() <= 7 {
		t.Fatalf("only %d produce responses crossed the proxy", seen.Load())
	}
	checkExactlyOnce(t, k.Addr, topic, parts, n, acked)
}

// TestLostAcksKcat: librdkafka (kcat -X enable.idempotence=true) loses
// Produce answers, to connection cuts or to drops it detects by request
// timeout, reconnects, resends its in-flight batches (same producer ID,
// epoch and sequences), and the log holds every line once, in order.
func TestLostAcksKcat(t *testing.T) {
	t.Parallel()
	kcat := kcatPath(t)
	k := kawatest.NewBroker(t)
	for _, tc := range []struct {
		name  string
		lose  proxy.Action
		extra []string
	}{
		{"cut", proxy.Action{Drop: true, Cut: true}, nil},
		{"drop", proxy.Action{Drop: true}, []string{"-X", "request.timeout.ms=300", "-X", "socket.timeout.ms=300"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			const n = 2000
			topic := "lostack-kcat-" + tc.name
			k.CreateTopic(topic, 1, nil)
			px := newProxy(t, k)
			seen := loseProduceAcks(px, lost(nil, 3, 5, tc.lose))
			var in strings.Builder
			for i := range n {
				fmt.Fprintf(&in, "v-%d\n", i)
			}
			// -E: kcat otherwise exits when its only broker connection
			// drops ("all broker connections are down").
			args := append([]string{"-P", "-E", "-b", px.Addr(), "-t", topic, "-p", "0",
				"-X", "enable.idempotence=true", "-X", "acks=all", "-X", "batch.num.messages=50",
				"-X", "linger.ms=1", "-X", "retry.backoff.ms=20", "-X", "reconnect.backoff.ms=10"}, tc.extra...)
			cmd := exec.Command(kcat, args...)
			cmd.Stdin = strings.NewReader(in.String())
			out, err := cmd.CombinedOutput()
			if err != nil || strings.Contains(string(out), "failed") {
				t.Fatalf("kcat -P: %v\n%s", err, out)
			}
			if seen.Load() <= 5 {
				t.Fatalf("only %d produce responses crossed the proxy", seen.Load())
			}
			checkExactlyOnce(t, k.Addr, topic, 1, n, nil)
		})
	}
}
