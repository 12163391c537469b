package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The NATS JetStream side of a cell: the same workload shapes as the Kafka
// side (bench-protocol.md §4.2, NATS only in W1/W2/W7), on one R1 stream with
// file storage. NATS speaks no Kafka, so it is an anchor for "a durable
// single-node log", not a protocol peer.
const (
	natsStream  = "bench"
	natsSubject = "bench.subj"
	// natsWindow is a publisher's async window (acks outstanding), the
	// figure `nats bench js pub async --batch 500` uses.
	natsWindow = 500
)

// natsConnect connects to url and makes sure the bench stream exists.
func natsConnect(ctx context.Context, url string) (*nats.Conn, jetstream.JetStream, error) {
	nc, err := nats.Connect(url, nats.MaxReconnects(0))
	if err != nil {
		return nil, nil, fmt.Errorf("nats connect %s: %w", url, err)
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(natsWindow))
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	_, err = js.CreateOrUpdateStream(cctx, jetstream.StreamConfig{
		Name: natsStream, Subjects: []string{natsSubject},
		Storage: jetstream.FileStorage, Replicas: 1,
	})
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("nats create stream: %w", err)
	}
	return nc, js, nil
}

// natsProduce publishes like produceBench.run: w.producers connections,
// one message in flight each with w.sync, else an async window of
// natsWindow; latency from the intended send time (the moment the message
// is handed to the client, which blocks while the window is full).
func natsProduce(ctx context.Context, url string, w workload, brokerPID int) (*produceResult, error) {
	res := &produceResult{Bench: "produce", Topic: natsStream, Partitions: 1, Producers: w.producers,
		RecordSize: w.recordSize, Acks: "all", Sync: w.sync, TargetRate: w.rate, WarmupS: w.warmup.Seconds()}
	conns := make([]jetstream.JetStream, 0, w.producers)
	for range w.producers {
		nc, js, err := natsConnect(ctx, url)
		if err != nil {
			return res, err
		}
		defer nc.Close()
		conns = append(conns, js)
	}
	payload := make([]byte, w.recordSize)
	start := time.Now()
	st := &produceStats{hist: newHistogram(), warmEnd: start.Add(w.warmup), runCtx: ctx}
	st.end = st.warmEnd.Add(w.duration)
	var interval time.Duration // W3: each publisher's share of the fixed rate
	if w.rate > 0 {
		interval = time.Duration(float64(time.Second) * float64(w.producers) / w.rate)
	}
	var wg sync.WaitGroup
	for _, js := range conns {
		wg.Go(func() { natsPublishLoop(ctx, js, w.sync, interval, st, start, payload) })
	}
	pb := &produceBench{brokerPID: brokerPID, recordSize: w.recordSize}
	usage, sampleErr := pb.sampleWindow(ctx, st)
	stopped := time.Now()
	if stopped.After(st.end) {
		stopped = st.end
	}
	wg.Wait()
	pb.fill(res, st, usage, stopped.Sub(st.warmEnd))
	if p := st.firstErr.Load(); p != nil {
		return res, fmt.Errorf("%d messages failed, first: %w", res.Errors, *p)
	}
	return res, sampleErr
}

// natsPublishLoop publishes until the window ends, then waits for the acks.
// With interval > 0 the intended send times are start + i*interval, fixed in
// advance as in produceBench.produceLoop.
func natsPublishLoop(ctx context.Context, js jetstream.JetStream, oneInFlight bool, interval time.Duration,
	st *produceStats, start time.Time, payload []byte) {
	type pending struct {
		f        jetstream.PubAckFuture
		intended time.Time
	}
	var acks chan pending
	var collector sync.WaitGroup
	if !oneInFlight {
		// One collector per publisher reads futures in publish order; the
		// channel holds a window's worth so it never blocks the publisher
		// beyond what the client's own window does.
		acks = make(chan pending, natsWindow)
		collector.Go(func() {
			for p := range acks {
				select {
				case <-p.f.Ok():
					st.ack(p.intended, nil)
				case err := <-p.f.Err():
					st.ack(p.intended, err)
				}
			}
		})
	}
	for i := 0; ctx.Err() == nil; i++ {
		intended := time.Now()
		if interval > 0 {
			intended = start.Add(time.Duration(i) * interval)
			if !sleepUntil(ctx, intended) {
				break
			}
		}
		if !intended.Before(st.end) {
			break
		}
		if oneInFlight {
			_, err := js.Publish(ctx, natsSubject, payload)
			st.ack(intended, err)
			continue
		}
		f, err := js.PublishAsync(natsSubject, payload, jetstream.WithStallWait(30*time.Second))
		if err != nil {
			st.ack(intended, err)
			continue
		}
		acks <- pending{f, intended}
	}
	if acks != nil {
		close(acks)
		collector.Wait()
	}
}

// natsFill publishes records messages of size bytes as fast as the async
// window allows, for a fetch cell's backlog.
func natsFill(ctx context.Context, url string, records int64, size int) error {
	nc, js, err := natsConnect(ctx, url)
	if err != nil {
		return err
	}
	defer nc.Close()
	payload := make([]byte, size)
	var failed atomic.Int64
	var firstErr atomic.Pointer[error]
	for range records {
		if _, err := js.PublishAsync(natsSubject, payload, jetstream.WithStallWait(30*time.Second)); err != nil {
			failed.Add(1)
			firstErr.CompareAndSwap(nil, &err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(2 * time.Minute):
		return errors.New("nats fill: acks did not arrive within 2 minutes")
	}
	if p := firstErr.Load(); p != nil {
		return fmt.Errorf("nats fill: %d failed, first: %w", failed.Load(), *p)
	}
	return nil
}

// natsFetch reads the whole stream with an ordered consumer, as fast as it
// can, like fetchBench.run.
func natsFetch(ctx context.Context, url string, brokerPID int) (*fetchResult, error) {
	res := &fetchResult{Bench: "fetch", Topic: natsStream, Partitions: 1}
	nc, js, err := natsConnect(ctx, url)
	if err != nil {
		return res, err
	}
	defer nc.Close()
	s, err := js.Stream(ctx, natsStream)
	if err != nil {
		return res, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return res, err
	}
	res.Expected = int64(info.State.Msgs)
	if res.Expected == 0 {
		return res, errors.New("nats stream is empty")
	}
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return res, err
	}
	sampler := &brokerSampler{pid: brokerPID}
	if err := sampler.start(); err != nil {
		return res, err
	}
	start := time.Now()
	it, err := cons.Messages(jetstream.PullMaxMessages(4096))
	if err != nil {
		return res, err
	}
	defer it.Stop()
	for res.Records < res.Expected {
		m, err := it.Next()
		if err != nil {
			return res, fmt.Errorf("nats fetch after %d of %d: %w", res.Records, res.Expected, err)
		}
		res.Records++
		res.Bytes += int64(len(m.Data()))
	}
	elapsed := time.Since(start)
	res.Complete = true
	res.ElapsedS = roundTo(elapsed.Seconds(), 3)
	res.RecordsPerS, res.MBPerS, res.MiBPerS = rates(res.Records, res.Bytes, elapsed)
	res.Broker, err = sampler.stop(res.Bytes)
	return res, err
}
