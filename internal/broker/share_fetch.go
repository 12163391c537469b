package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/batch"
	"github.com/kawa-broker/kawa/internal/partition"
	"github.com/kawa-broker/kawa/internal/share"
	"github.com/kawa-broker/kawa/internal/wire"
)

// defaultShareMaxRecords bounds a ShareFetch that sets no max_records (v0
// had none; Kafka's share.fetch.max.records default is 500).
const defaultShareMaxRecords = 500

// shareAcquireRecordLimit is KIP-1206's share_acquire_mode record_limit
// (ShareFetch v2+): max_records is a hard limit. 0, batch_optimized, is
// the default and v1's behaviour.
const shareAcquireRecordLimit int8 = 1

// ShareFetch (key 78), versions 1-2 (KIP-932; v2 adds KIP-1206's acquire
// mode and KIP-1222's renew acknowledgements).
//
// Behaviour: first the share session (KIP-932 "Share sessions", Kafka's
// SharePartitionManager.newContext): epoch 0 opens a new one with the
// request's partitions (replacing any open one; piggybacked
// acknowledgements are refused then; SHARE_SESSION_LIMIT_REACHED when
// group.share.max.share.sessions are open), owned by this connection
// (when it closes, the session ends and the member's acquired records are
// released at once, as in Kafka 4.1), -1 closes it, any other epoch must
// be the session's current one (1 after the opening fetch, then one more
// per ShareFetch or ShareAcknowledge; MaxInt32 wraps to 1) and adds the
// request's partitions and drops forgotten ones. A refused session step
// changes nothing. Then piggybacked acknowledgements are applied (answered
// per partition in acknowledge_error_code); epoch -1 then releases every
// record the member still holds and fetches nothing. Records are then
// acquired from every session partition:
// redeliveries (the lowest available offsets) first, then new records up
// to the high watermark (the last stable offset under
// share.isolation.level=read_committed, where aborted transactions' records
// and control batches are archived, never delivered). Up to max_records
// are acquired (KIP-1206: in batch_optimized mode, the default, the stored
// batch reaching max_records is acquired to its end, as in Kafka; in
// record_limit mode never more), each locked for share.record.lock.duration.ms (the response's
// acquisition_lock_timeout_ms); their delivery counts are persisted before
// the answer. Whole stored batches are returned; the
// acquired_records ranges say which of their records belong to this member.
// With nothing to acquire the request long-polls up to max_wait_ms, woken
// by appends, releases and lock expiries. Only partitions with records or
// errors, or with acknowledgements in the request, are answered. Errors
// for the whole request: INVALID_REQUEST (no group or member; epoch 0 with
// acknowledgements), UNKNOWN_MEMBER_ID, SHARE_SESSION_NOT_FOUND (no open
// session for a non-zero epoch), SHARE_SESSION_LIMIT_REACHED, INVALID_SHARE_SESSION_EPOCH (not the
// session's epoch); per partition UNKNOWN_TOPIC_ID, KAFKA_STORAGE_ERROR
// (the acquisition could not be persisted; nothing was acquired).
//
// Authorization (with an authorizer): READ on the group (else
// GROUP_AUTHORIZATION_FAILED for the request) and READ on each topic (else
// its partitions are TOPIC_AUTHORIZATION_FAILED, nothing is acquired or
// acknowledged there).
func (b *Broker) handleShareFetch(ctx context.Context, info wire.RequestInfo, req kmsg.Request) reply {
	r := req.(*kmsg.ShareFetchRequest)
	if r.GroupID != nil && !b.groupRead(info, *r.GroupID) {
		resp := r.ResponseKind().(*kmsg.ShareFetchResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return now(resp)
	}
	readable := func(topic string) bool {
		return b.authorized(info, kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, topic)
	}
	return func() (kmsg.Response, error) { return b.shareFetch(ctx, info.PollDone, r, readable), nil }
}

// shareAnswer is one partition of a ShareFetch answer being built.
type shareAnswer struct {
	topicID [16]byte
	sp      kmsg.ShareFetchResponseTopicPartition
	acked   bool // the request acknowledged records here: always answered
}

func (b *Broker) shareFetch(ctx context.Context, pollDone <-chan struct{}, r *kmsg.ShareFetchRequest, readable func(topic string) bool) *kmsg.ShareFetchResponse {
	resp := r.ResponseKind().(*kmsg.ShareFetchResponse)
	if r.GroupID == nil || *r.GroupID == "" || r.MemberID == nil || *r.MemberID == "" {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp
	}
	groupID, memberID := *r.GroupID, *r.MemberID
	resp.AcquisitionLockTimeoutMillis = int32(b.shares.LockDuration(groupID).Milliseconds())

	answers := map[share.TP]*shareAnswer{}
	answer := func(id [16]byte, tp share.TP) *shareAnswer {
		a := answers[tp]
		if a == nil {
			a = &shareAnswer{topicID: id, sp: kmsg.NewShareFetchResponseTopicPartition()}
			a.sp.Partition = tp.Partition
			a.sp.CurrentLeader.LeaderID, a.sp.CurrentLeader.LeaderEpoch = b.cfg.NodeID, 0
			answers[tp] = a
		}
		return a
	}
	// The session step comes first, as in Kafka (newContext before the
	// acknowledgements): a request with a stale epoch changes nothing.
	type ackTP struct {
		id   [16]byte
		tp   share.TP
		acks []share.Ack
	}
	var add, forget []share.TP
	var acked []ackTP
	for _, rt := range r.Topics {
		t, known := b.catalog.ByID(rt.TopicID)
		for _, rp := range rt.Partitions {
			tp := share.TP{Topic: t.Name, Partition: rp.Partition}
			if !known {
				tp.Topic = "\x00unknown"
				a := answer(rt.TopicID, tp)
				a.sp.ErrorCode = kerr.UnknownTopicID.Code
				continue
			}
			if !readable(t.Name) {
				answer(rt.TopicID, tp).sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				continue
			}
			add = append(add, tp)
			if len(rp.AcknowledgementBatches) > 0 {
				acks := make([]share.Ack, 0, len(rp.AcknowledgementBatches))
				for _, ab := range rp.AcknowledgementBatches {
					acks = append(acks, share.Ack{First: ab.FirstOffset, Last: ab.LastOffset, Types: ab.AcknowledgeTypes})
				}
				acked = append(acked, ackTP{t.ID, tp, acks})
			}
		}
	}
	for _, ft := range r.ForgottenTopicsData {
		if t, ok := b.catalog.ByID(ft.TopicID); ok {
			for _, p := range ft.Partitions {
				forget = append(forget, share.TP{Topic: t.Name, Partition: p})
			}
		}
	}
	tps, err := b.shares.FetchSession(groupID, memberID, r.ShareSessionEpoch, add, forget, len(acked) > 0, pollDone)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = errCode(err), errMsg(err)
		resp.Topics = nil
		return resp
	}
	for _, x := range acked {
		a := answer(x.id, x.tp)
		a.acked = true
		if err := b.shares.Acknowledge(ctx, groupID, memberID, x.tp, x.acks); err != nil {
			a.sp.AcknowledgeErrorCode, a.sp.AcknowledgeErrorMessage = errCode(err), errMsg(err)
		}
	}
	if r.ShareSessionEpoch == share.SessionClose {
		if err := b.shares.CloseSession(ctx, groupID, memberID); err != nil {
			resp.ErrorCode, resp.ErrorMessage = errCode(err), errMsg(err)
		}
	}
	max := int(r.MaxRecords)
	if max <= 0 {
		max = defaultShareMaxRecords
	}
	maxBytes := int(r.MaxBytes)
	if maxBytes <= 0 {
		maxBytes = 1<<31 - 1
	}
	deadline := time.Now().Add(time.Duration(r.MaxWaitMillis) * time.Millisecond)
	for len(tps) > 0 {
		wakes := append(b.shareWakes(tps), b.shares.Wake())
		if n := b.shareFetchOnce(ctx, groupID, memberID, tps, max, maxBytes, r.ShareAcquireMode != shareAcquireRecordLimit, answer); n > 0 || !time.Now().Before(deadline) || ctx.Err() != nil {
			break
		}
		wait := time.Until(deadline)
		if exp := b.shares.NextExpiry(groupID); !exp.IsZero() && time.Until(exp) < wait {
			wait = max64Dur(time.Until(exp), time.Millisecond)
		}
		b.parked.Add(1)
		woken := waitAny(ctx, pollDone, wakes, wait)
		b.parked.Add(-1)
		if !woken {
			break
		}
	}
	byTopic := map[[16]byte]int{}
	for _, a := range answers {
		if !a.acked && a.sp.ErrorCode == 0 && len(a.sp.AcquiredRecords) == 0 {
			continue
		}
		i, ok := byTopic[a.topicID]
		if !ok {
			i = len(resp.Topics)
			byTopic[a.topicID] = i
			resp.Topics = append(resp.Topics, kmsg.ShareFetchResponseTopic{TopicID: a.topicID})
		}
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, a.sp)
	}
	return resp
}

func max64Dur(a, b time.Duration) time.Duration {
	if a > b {
		return a
	}
	return b
}

func (b *Broker) shareWakes(tps []share.TP) []<-chan struct{} {
	out := make([]<-chan struct{}, 0, len(tps)+1)
	for _, tp := range tps {
		if p := b.partition(tp.Topic, tp.Partition); p != nil {
			out = append(out, p.Wake())
		}
	}
	return out
}

// shareFetchOnce acquires records from each partition once, up to max
// records (a soft limit with wholeBatches, see share.Coordinator.Acquire)
// and maxBytes over all of them, and returns the records acquired.
func (b *Broker) shareFetchOnce(ctx context.Context, groupID, memberID string, tps []share.TP, max, maxBytes int, wholeBatches bool, answer func([16]byte, share.TP) *shareAnswer) int {
	n, bytes := 0, 0
	iso := partition.ReadUncommitted
	if b.shares.ReadCommitted(groupID) {
		iso = partition.ReadCommitted
	}
	for _, tp := range tps {
		if n >= max || bytes >= maxBytes {
			break
		}
		t, _ := b.catalog.Get(tp.Topic)
		p, err := b.lookup(tp.Topic, tp.Partition)
		if err != nil {
			a := answer(t.ID, tp)
			a.sp.ErrorCode, a.sp.ErrorMessage = errCode(err), errMsg(err)
			continue
		}
		bound := p.HighWatermark()
		if iso == partition.ReadCommitted {
			bound = p.LastStableOffset()
		}
		from, room, ok := b.shares.ReadFrom(groupID, tp, p.LogStart(), p.HighWatermark(), bound)
		if !ok {
			continue
		}
		spans, raws, err := shareRead(p, from, bound, min(max-n, room), maxBytes-bytes, iso)
		if err != nil {
			a := answer(t.ID, tp)
			a.sp.ErrorCode, a.sp.ErrorMessage = errCode(err), errMsg(err)
			continue
		}
		acq, err := b.shares.Acquire(ctx, groupID, memberID, tp, from, spans, bound, max-n, wholeBatches)
		if err != nil {
			a := answer(t.ID, tp)
			a.sp.ErrorCode, a.sp.ErrorMessage = kerr.KafkaStorageError.Code, kmsg.StringPtr(err.Error())
			continue
		}
		if len(acq) == 0 {
			continue
		}
		a := answer(t.ID, tp)
		for _, q := range acq {
			n += int(q.Last - q.First + 1)
			a.sp.AcquiredRecords = append(a.sp.AcquiredRecords, kmsg.ShareFetchResponseTopicPartitionAcquiredRecord{
				FirstOffset: q.First, LastOffset: q.Last, DeliveryCount: q.DeliveryCount,
			})
		}
		// Only the batches holding acquired records go back.
		for i, s := range spans {
			for _, q := range acq {
				if q.First <= s.Last && q.Last >= s.First {
					a.sp.Records = append(a.sp.Records, raws[i]...)
					bytes += len(raws[i])
					break
				}
			}
		}
	}
	return n
}

// batchReader is what shareRead needs of a partition (partition.Read).
type batchReader interface {
	Read(offset int64, maxBytes int, isolation int8) (partition.ReadResult, error)
}

// shareReadFirst is the first read of shareRead: small, since only the
// batches that hold the records to acquire are wanted and their size per
// record is not known yet (a larger first batch still comes whole, KIP-74).
const shareReadFirst = 64 << 10

// shareRead reads whole batches of p from offset from until they hold want
// deliverable records (offsets from on, not control or aborted batches),
// maxBytes are read, or bound is reached, and lists them (see shareSpans).
// A ShareFetch can acquire at most want records here (max_records and the
// share-partition's lock window, group.share.partition.max.record.locks),
// so reading maxBytes (often 50 MiB) for a window of a few hundred records
// would read and list megabytes to acquire kilobytes: after a small first
// read, each further read asks for what the records still wanted take at
// the byte-per-record density seen so far.
func shareRead(p batchReader, from, bound int64, want, maxBytes int, iso int8) ([]share.Span, [][]byte, error) {
	var spans []share.Span
	var raws [][]byte
	off, got, read := from, 0, 0
	chunk := min(maxBytes, shareReadFirst)
	for off < bound && read < maxBytes {
		res, err := p.Read(off, chunk, iso)
		if err != nil {
			if len(spans) > 0 {
				break // answer what was read; the next fetch meets the error
			}
			return nil, nil, err
		}
		if len(res.Records) == 0 {
			break
		}
		s, r := shareSpans(res)
		if len(s) == 0 {
			break
		}
		for _, sp := range s {
			if !sp.Skip {
				got += int(sp.Last - max(sp.First, from) + 1)
			}
		}
		spans, raws = append(spans, s...), append(raws, r...)
		read += len(res.Records)
		off = s[len(s)-1].Last + 1
		if got >= want {
			break
		}
		perRecord := read / max(got, 1)
		chunk = min(maxBytes-read, max(perRecord*(want-got), shareReadFirst))
	}
	return spans, raws, nil
}

// shareSpans lists the whole batches of a read with their offsets; control
// batches and, under read_committed, aborted transactions' batches are
// marked Skip (archived, never delivered).
func shareSpans(res partition.ReadResult) ([]share.Span, [][]byte) {
	var spans []share.Span
	var raws [][]byte
	_, _ = batch.Iterate(res.Records, func(h batch.Header, raw []byte) bool {
		skip := h.Control()
		if h.Transactional() {
			for _, at := range res.Aborted {
				if at.ProducerID == h.ProducerID && h.BaseOffset >= at.FirstOffset && h.BaseOffset <= at.LastOffset {
					skip = true
				}
			}
		}
		spans = append(spans, share.Span{First: h.BaseOffset, Last: h.LastOffset(), Skip: skip})
		raws = append(raws, raw)
		return true
	})
	return spans, raws
}
