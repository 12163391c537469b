package kawatest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Ack is one acknowledged produce of a Producer: where the record landed and when the
// acknowledgement arrived.
type Ack struct {
	Partition int32
	Offset    int64
	At        time.Time
}

// Producer writes one record ("x") every 2 ms round-robin over partitions 0..n-1 of a topic from
// its own goroutine, which Stop ends, and keeps every acknowledgement. Failed produces are not
// kept; the client's retries (kgo.RetryTimeout) decide how long a produce outlives a broker
// restart.
type Producer struct {
	cl   *kgo.Client
	mu   sync.Mutex
	acks []Ack
	quit chan struct{}
	done chan struct{}
}

// StartProducer starts producing to topic's partitions 0..partitions-1 through cl, which must
// place records by their Partition field (kgo.RecordPartitioner(kgo.ManualPartitioner())).
// The goroutine is ended at cleanup if Stop was not called.
func StartProducer(t testing.TB, cl *kgo.Client, topic string, partitions int32) *Producer {
	p := &Producer{cl: cl, quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-p.quit:
				return
			case <-tick.C:
			}
			p.cl.Produce(context.Background(), &kgo.Record{Topic: topic, Partition: int32(i) % partitions, Value: []byte("x")}, p.record)
		}
	}()
	t.Cleanup(p.end)
	return p
}

func (p *Producer) record(r *kgo.Record, err error) {
	if err != nil {
		return
	}
	p.mu.Lock()
	p.acks = append(p.acks, Ack{r.Partition, r.Offset, time.Now()})
	p.mu.Unlock()
}

// end stops the producing goroutine (idempotent).
func (p *Producer) end() {
	select {
	case <-p.quit:
	default:
		close(p.quit)
	}
	<-p.done
}

// Stop ends production, waits up to 30 s for outstanding acknowledgements (failing the test if
// they do not come) and returns every acknowledgement in arrival order.
func (p *Producer) Stop(t testing.TB) []Ack {
	t.Helper()
	p.end()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Ack(nil), p.acks...)
}

// AckedBetween counts the acknowledgements that arrived after from and before to.
func (p *Producer) AckedBetween(from, to time.Time) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, a := range p.acks {
		if a.At.After(from) && a.At.Before(to) {
			n++
		}
	}
	return n
}
