package verify

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// producerOpts are the delivery settings of a producer per semantic.
// at-most-once sends once: no idempotence, leader ack, no record retries, so
// a lost response loses the record rather than writing it twice. The others
// use the idempotent producer (acks=all, retries without duplicates).
func producerOpts(sem Semantic) []kgo.Opt {
	if sem == AtMostOnce {
		return []kgo.Opt{
			kgo.DisableIdempotentWrite(),
			kgo.RequiredAcks(kgo.LeaderAck()),
			kgo.RecordRetries(0),
		}
	}
	return nil
}

// runProducer writes records with unique ids at spec.Rate per second until
// stop, then flushes for up to flushTimeout. Every record gets a send event
// before it is handed to the client and an ack or fail event from its
// promise; a record whose promise never ran (the process died) has an
// unknown outcome.
func runProducer(ctx context.Context, spec WorkerSpec, stop <-chan struct{}, emit Emit) error {
	opts := append(baseOpts(spec), producerOpts(spec.Semantic)...)
	opts = append(opts, kgo.DefaultProduceTopic(spec.Topics[0]), kgo.MaxBufferedRecords(20000))
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	runCtx, cancel := untilStop(ctx, stop)
	defer cancel()

	topic := spec.Topics[0]
	start := time.Now()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var seq int64
	for runCtx.Err() == nil {
		select {
		case <-runCtx.Done():
		case <-tick.C:
		}
		due := int64(time.Since(start).Seconds() * float64(spec.Rate))
		for ; seq < due && runCtx.Err() == nil; seq++ {
			produceOne(cl, emit, recordID(spec.Name, seq+1), topic)
		}
	}
	if ctx.Err() != nil {
		return nil // crashed: no flush
	}
	fctx, fcancel := context.WithTimeout(ctx, flushTimeout)
	defer fcancel()
	cl.Flush(fctx)
	return nil
}

// flushTimeout bounds the graceful end of a producer or writer.
const flushTimeout = 15 * time.Second

// produceOne emits the send event and produces one record whose promise
// emits the outcome. The record is produced under context.Background so a
// graceful stop does not cancel records already handed over; the buffer is
// large enough for the longest broker pause at the default rates.
func produceOne(cl *kgo.Client, emit Emit, id, topic string) {
	emit(Event{Kind: KindSend, ID: id, Topic: topic})
	sent := time.Now()
	r := &kgo.Record{Topic: topic, Value: recordValue(id, "")}
	cl.Produce(context.Background(), r, func(r *kgo.Record, err error) {
		if err != nil {
			emit(Event{Kind: KindFail, ID: id, Topic: topic, Err: err.Error()})
			return
		}
		emit(Event{Kind: KindAck, ID: id, Topic: topic, Part: r.Partition, Off: r.Offset,
			Lat: time.Since(sent).Microseconds()})
	})
}
