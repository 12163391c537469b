package delivery

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ParkOptions turns on key parking in the at-least-once loop (a sequenced
// dead-letter queue): once a record with key K is dead-lettered, every later
// record of K in that source partition is diverted to the park topic instead
// of being handled, while other keys flow. A parked key stays parked across
// restarts and rebalances until it is released with ReleaseKey; its parked
// records are then handled in their original order before any later record
// of K. Records with a nil key are dead-lettered but never park anything.
//
// Persistence: Kawa refuses cleanup.policy=compact today (issue 13), so the
// park topic is a plain topic holding, per source partition, park markers,
// the diverted records and release markers. A partition's new owner reads
// its park partition from the start when it first sees the partition, and a
// release reads it again; both cost time proportional to the park topic's
// size. The topic must exist before the loop runs (a missing one is a fatal
// error) and should have as many partitions as the source topic.
type ParkOptions struct {
	// Topic maps a source topic to its park topic; nil means
	// topic + ".parked".
	Topic func(topic string) string
}

func (p ParkOptions) withDefaults() ParkOptions {
	if p.Topic == nil {
		p.Topic = func(t string) string { return t + ".parked" }
	}
	return p
}

// Headers of the park protocol. A park-topic record carries HeaderPark with
// one of the Park* values, the provenance headers (HeaderDLTTopic,
// HeaderDLTPartition, HeaderDLTOffset, HeaderDLTScope) of the source record
// it is about, and for a release marker HeaderParkReleaseOffset. A release
// request is a record in the source topic with HeaderPark = ParkRelease.
const (
	HeaderPark              = "kawa-park"
	HeaderParkReleaseOffset = "kawa-park-release-offset"

	ParkParked   = "parked"   // park marker: the key is parked from here on
	ParkRecord   = "record"   // a diverted source record
	ParkReleased = "released" // release marker: the parked records up to here are replayed
	ParkRelease  = "release"  // release request, in the source topic
)

// ReleaseKey asks the at-least-once loop with the given scope (Config.Scope,
// by default its group) to release key in topic's partition: it writes a
// release request (a record with key, a nil value and HeaderPark=release) to
// that source partition, acks=all, through cl (any client whose partitioner
// honours Record.Partition, e.g. kgo.ManualPartitioner). The loop that owns
// the partition, on reaching the request in offset order, replays the key's
// parked records through the handler in their original order (with the
// usual retries; one that fails again is dead-lettered and parks the key
// anew with the rest), writes a release marker and handles later records of
// the key normally. The handler never sees the request itself; loops without
// parking do see it, so do not send requests to topics they consume.
func ReleaseKey(ctx context.Context, cl *kgo.Client, topic string, partition int32, key []byte, scope string) error {
	if key == nil {
		return fmt.Errorf("delivery: ReleaseKey: nil keys are never parked")
	}
	rec := &kgo.Record{Topic: topic, Partition: partition, Key: key, Headers: []kgo.RecordHeader{
		{Key: HeaderPark, Value: []byte(ParkRelease)},
		{Key: HeaderDLTScope, Value: []byte(scope)},
	}}
	if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		return fmt.Errorf("delivery: ReleaseKey %s/%d: %w", topic, partition, err)
	}
	return nil
}

// parkSet is one source partition's parked keys.
type parkSet struct {
	topic string // park topic
	mu    sync.Mutex
	keys  map[string]*parkedKey
}

type parkedKey struct {
	parked     bool
	releasedAt int64 // source offset of the last release request carried out, -1 if none
}

func (s *parkSet) get(k []byte) *parkedKey {
	s.mu.Lock()
	defer s.mu.Unlock()
	pk := s.keys[string(k)]
	if pk == nil {
		pk = &parkedKey{releasedAt: -1}
		s.keys[string(k)] = pk
	}
	return pk
}

func header(r *kgo.Record, name string) (string, bool) {
	for i := len(r.Headers) - 1; i >= 0; i-- {
		if r.Headers[i].Key == name {
			return string(r.Headers[i].Value), true
		}
	}
	return "", false
}

// mine says whether park-topic record pr is about source partition k in scope.
func mine(pr *kgo.Record, k tp, scope string) bool {
	t, _ := header(pr, HeaderDLTTopic)
	p, _ := header(pr, HeaderDLTPartition)
	s, _ := header(pr, HeaderDLTScope)
	return t == k.topic && p == strconv.Itoa(int(k.partition)) && s == scope
}

// readPark calls fn, in offset order, for every record of the park topic
// partition that source partition k maps to and that belongs to k and scope.
func (a *alo) readPark(ctx context.Context, topic string, k tp, fn func(*kgo.Record)) error {
	ends, err := kadm.NewClient(a.cl).ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return fmt.Errorf("delivery: park topic %s: %w", topic, err)
	}
	n := 0
	ends.Each(func(kadm.ListedOffset) { n++ })
	if n == 0 {
		return fmt.Errorf("delivery: park topic %s does not exist", topic)
	}
	p := k.partition % int32(n)
	end, ok := ends.Lookup(topic, p)
	if !ok || end.Offset <= 0 {
		return nil
	}
	rd, err := kgo.NewClient(append(append([]kgo.Opt{kgo.SeedBrokers(a.Brokers...)}, a.KgoOpts...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: kgo.NewOffset().AtStart()}}))...)
	if err != nil {
		return fmt.Errorf("delivery: park reader: %w", err)
	}
	defer rd.Close()
	for {
		fs := rd.PollFetches(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err := fs.Err(); err != nil {
			return fmt.Errorf("delivery: read park topic %s/%d: %w", topic, p, err)
		}
		last := int64(-1)
		fs.EachRecord(func(r *kgo.Record) {
			last = r.Offset
			if r.Offset < end.Offset && mine(r, k, a.Scope) {
				fn(r)
			}
		})
		if last+1 >= end.Offset {
			return nil
		}
	}
}

// loadParked rebuilds partition k's parked keys from its park topic.
func (a *alo) loadParked(ctx context.Context, k tp) (*parkSet, error) {
	s := &parkSet{topic: a.opts.Park.Topic(k.topic), keys: map[string]*parkedKey{}}
	err := a.readPark(ctx, s.topic, k, func(r *kgo.Record) {
		kind, _ := header(r, HeaderPark)
		pk := s.get(r.Key)
		switch kind {
		case ParkParked:
			pk.parked = true
		case ParkReleased:
			pk.parked = false
			if o, err := strconv.ParseInt(headerOr(r, HeaderParkReleaseOffset), 10, 64); err == nil {
				pk.releasedAt = o
			}
		}
	})
	return s, err
}

func headerOr(r *kgo.Record, name string) string {
	v, _ := header(r, name)
	return v
}

// parkStep handles r when parking decides its fate: a release request, or a
// record of a parked key. done=false means r is handled normally.
func (a *alo) parkStep(ps *partState, r *kgo.Record) (done bool, err error) {
	if kind, ok := header(r, HeaderPark); ok && kind == ParkRelease {
		if headerOr(r, HeaderDLTScope) != a.Scope || r.Key == nil {
			return true, nil // another loop's request
		}
		pk := ps.park.get(r.Key)
		if !pk.parked || r.Offset <= pk.releasedAt {
			return true, nil
		}
		return true, a.replay(ps, r)
	}
	if r.Key == nil || !ps.park.get(r.Key).parked {
		return false, nil
	}
	rec := provenance(r, ps.park.topic, a.Scope, kgo.RecordHeader{Key: HeaderPark, Value: []byte(ParkRecord)})
	if err := a.write(ps.ctx, rec); err != nil {
		return true, err
	}
	a.hooks.OnParked(r, ps.park.topic)
	return true, nil
}

// parkKey writes r's key's park marker after r was dead-lettered.
func (a *alo) parkKey(ps *partState, r *kgo.Record) error {
	if err := a.write(ps.ctx, a.marker(ps, r, ParkParked, -1)); err != nil {
		return err
	}
	ps.park.get(r.Key).parked = true
	return nil
}

func (a *alo) marker(ps *partState, r *kgo.Record, kind string, releaseOffset int64) *kgo.Record {
	m := provenance(&kgo.Record{Topic: ps.topic, Partition: ps.partition, Offset: r.Offset, Key: r.Key},
		ps.park.topic, a.Scope, kgo.RecordHeader{Key: HeaderPark, Value: []byte(kind)})
	if releaseOffset >= 0 {
		m.Headers = append(m.Headers, kgo.RecordHeader{Key: HeaderParkReleaseOffset, Value: []byte(strconv.FormatInt(releaseOffset, 10))})
	}
	return m
}

func (a *alo) write(ctx context.Context, rec *kgo.Record) error {
	if err := a.cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("%w: to %s/%d: %w", errDeadLetter, rec.Topic, rec.Partition, err)
	}
	return nil
}

// replay carries out release request req: the key's records parked since its
// last release marker go through the handler in order.
func (a *alo) replay(ps *partState, req *kgo.Record) error {
	var recs []*kgo.Record
	err := a.readPark(ps.ctx, ps.park.topic, ps.tp, func(r *kgo.Record) {
		if !bytes.Equal(r.Key, req.Key) {
			return
		}
		switch headerOr(r, HeaderPark) {
		case ParkReleased:
			recs = recs[:0]
		case ParkRecord:
			recs = append(recs, r)
		}
	})
	if err != nil {
		return err
	}
	for i, pr := range recs {
		src := original(pr)
		res := a.attempts(ps.ctx, src)
		if res.err == nil {
			a.hooks.OnProcessed(src)
			continue
		}
		if ps.ctx.Err() != nil {
			return ps.ctx.Err()
		}
		// Failed again: dead-letter it, close this release and park the key
		// anew, carrying the records after it over the new marker.
		if err := a.deadLetter(ps.ctx, src, res); err != nil {
			return err
		}
		if err := a.write(ps.ctx, a.marker(ps, req, ParkReleased, req.Offset)); err != nil {
			return err
		}
		if err := a.write(ps.ctx, a.marker(ps, src, ParkParked, -1)); err != nil {
			return err
		}
		for _, rest := range recs[i+1:] {
			cp := &kgo.Record{Topic: ps.park.topic, Partition: ps.partition, Key: rest.Key,
				Value: rest.Value, Headers: rest.Headers, Timestamp: rest.Timestamp}
			if err := a.write(ps.ctx, cp); err != nil {
				return err
			}
		}
		ps.park.get(req.Key).releasedAt = req.Offset
		return nil
	}
	if err := a.write(ps.ctx, a.marker(ps, req, ParkReleased, req.Offset)); err != nil {
		return err
	}
	pk := ps.park.get(req.Key)
	pk.parked, pk.releasedAt = false, req.Offset
	return nil
}

// original rebuilds the source record a parked record was diverted from:
// its topic, partition, offset, key, value, timestamp and own headers.
func original(pr *kgo.Record) *kgo.Record {
	r := &kgo.Record{Key: pr.Key, Value: pr.Value, Timestamp: pr.Timestamp}
	r.Topic = headerOr(pr, HeaderDLTTopic)
	p, _ := strconv.Atoi(headerOr(pr, HeaderDLTPartition))
	r.Partition = int32(p)
	r.Offset, _ = strconv.ParseInt(headerOr(pr, HeaderDLTOffset), 10, 64)
	for _, h := range pr.Headers {
		if !strings.HasPrefix(h.Key, "kawa-dlt-") && h.Key != HeaderPark {
			r.Headers = append(r.Headers, h)
		}
	}
	return r
}
