package broker_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/kawa-broker/kawa/internal/kawatest"
)

// TestSaramaRoundTrip: sarama's sync producer and partition consumer work
// unchanged against Kawa (issue 2 acceptance).
func TestSaramaRoundTrip(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	k.CreateTopic("sarama", 2, nil)

	cfg := sarama.NewConfig()
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Consumer.Return.Errors = true
	prod, err := sarama.NewSyncProducer([]string{k.Addr}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	const n = 500
	offsets := map[int64]string{}
	for i := 0; i < n; i++ {
		v := fmt.Sprintf("value-%d", i)
		part, off, err := prod.SendMessage(&sarama.ProducerMessage{
			Topic: "sarama", Partition: 1, Key: sarama.StringEncoder(fmt.Sprint(i)), Value: sarama.StringEncoder(v),
			Headers: []sarama.RecordHeader{{Key: []byte("i"), Value: []byte(fmt.Sprint(i))}},
		})
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		if part != 1 || off != int64(i) {
			t.Fatalf("send %d: partition %d offset %d, want 1/%d", i, part, off, i)
		}
		offsets[off] = v
	}

	cons, err := sarama.NewConsumer([]string{k.Addr}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	pc, err := cons.ConsumePartition("sarama", 1, sarama.OffsetOldest)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	timeout := time.After(30 * time.Second)
	for i := 0; i < n; i++ {
		select {
		case m := <-pc.Messages():
			if m.Offset != int64(i) || string(m.Value) != offsets[m.Offset] || string(m.Key) != fmt.Sprint(i) {
				t.Fatalf("message %d: offset %d key %q value %q", i, m.Offset, m.Key, m.Value)
			}
			if len(m.Headers) != 1 || string(m.Headers[0].Value) != fmt.Sprint(i) {
				t.Fatalf("message %d: headers %v", i, m.Headers)
			}
		case err := <-pc.Errors():
			t.Fatalf("consume: %v", err)
		case <-timeout:
			t.Fatalf("consumed %d of %d", i, n)
		}
	}
	if hw := pc.HighWaterMarkOffset(); hw != n {
		t.Fatalf("high watermark %d, want %d", hw, n)
	}
}
