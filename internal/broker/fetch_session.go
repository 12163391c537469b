package broker

import (
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/fetchsession"
)

// Fetch sessions (KIP-227), Fetch v7+: resolveSession turns a request into the partitions to read and the
// session it belongs to; finishSession keeps only what an incremental response must carry. The rules are
// internal/fetchsession's.

// fetchSession is a resolved request's session state.
type fetchSession struct {
	s    *fetchsession.Session // nil: a sessionless fetch (answered in full, SessionID 0)
	full bool                  // the full fetch that created s
}

// resolveSession applies r's session fields and returns the request to read (r itself for a full fetch; for
// an incremental one a copy listing every partition of the session) or the top-level error to answer with
// (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH).
func (b *Broker) resolveSession(r *kmsg.FetchRequest, now time.Time) (*kmsg.FetchRequest, fetchSession, error) {
	if r.Version < 7 {
		return r, fetchSession{}, nil
	}
	if r.SessionEpoch == fetchsession.InitialEpoch || r.SessionEpoch == fetchsession.FinalEpoch {
		s := b.sessions.Full(r.SessionID, r.SessionEpoch, wantsOf(r), now)
		return r, fetchSession{s: s, full: true}, nil
	}
	var forgotten []fetchsession.Key
	for _, ft := range r.ForgottenTopics {
		for _, p := range ft.Partitions {
			forgotten = append(forgotten, fetchsession.Key{Topic: ft.Topic, Partition: p})
		}
	}
	s, wants, err := b.sessions.Incremental(r.SessionID, r.SessionEpoch, wantsOf(r), forgotten, now)
	switch {
	case errors.Is(err, fetchsession.ErrNotFound):
		return nil, fetchSession{}, kerr.FetchSessionIDNotFound
	case errors.Is(err, fetchsession.ErrInvalidEpoch):
		return nil, fetchSession{}, kerr.InvalidFetchSessionEpoch
	}
	eff := *r
	eff.Topics = nil
	for _, w := range wants {
		if n := len(eff.Topics); n == 0 || eff.Topics[n-1].Topic != w.Topic {
			t := kmsg.NewFetchRequestTopic()
			t.Topic = w.Topic
			eff.Topics = append(eff.Topics, t)
		}
		p := kmsg.NewFetchRequestTopicPartition()
		p.Partition, p.FetchOffset, p.PartitionMaxBytes = w.Partition, w.FetchOffset, w.MaxBytes
		p.CurrentLeaderEpoch = -1
		t := &eff.Topics[len(eff.Topics)-1]
		t.Partitions = append(t.Partitions, p)
	}
	return &eff, fetchSession{s: s}, nil
}

func wantsOf(r *kmsg.FetchRequest) []fetchsession.Want {
	var out []fetchsession.Want
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			out = append(out, fetchsession.Want{Key: fetchsession.Key{Topic: t.Topic, Partition: p.Partition},
				FetchOffset: p.FetchOffset, MaxBytes: p.PartitionMaxBytes})
		}
	}
	return out
}

// finishSession sets the response's SessionID and, for an incremental fetch, drops the partitions with
// nothing new for the client (fetchsession.Cache.Respond).
func (b *Broker) finishSession(fs fetchSession, resp *kmsg.FetchResponse) {
	if fs.s == nil {
		return
	}
	resp.SessionID = fs.s.ID()
	var results []fetchsession.Result
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			results = append(results, fetchsession.Result{Key: fetchsession.Key{Topic: t.Topic, Partition: p.Partition},
				HasRecords: len(p.RecordBatches) > 0, ErrorCode: p.ErrorCode,
				HighWatermark: p.HighWatermark, LastStable: p.LastStableOffset, Start: p.LogStartOffset})
		}
	}
	include := b.sessions.Respond(fs.s, fs.full, results)
	i := 0
	topics := resp.Topics[:0]
	for _, t := range resp.Topics {
		parts := t.Partitions[:0]
		for _, p := range t.Partitions {
			if include[i] {
				parts = append(parts, p)
			}
			i++
		}
		if len(parts) > 0 {
			t.Partitions = parts
			topics = append(topics, t)
		}
	}
	resp.Topics = topics
}

// FetchSessions is the number of KIP-227 fetch sessions cached now and of those evicted to make room for new
// ones since the broker started (Kafka's NumIncrementalFetchSessions and IncrementalFetchSessionEvictions).
func (b *Broker) FetchSessions() (cached int, evictions int64) {
	return b.sessions.Len(), b.sessions.Evictions()
}
