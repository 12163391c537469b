package txn_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/kawatest"
)

// The coordinator's request-level answers: FindCoordinator for
// transactions, transaction.max.timeout.ms, AddPartitionsToTxn's v3 unknown
// partition and v4+ batched/verify-only forms, ListTransactions filters,
// DescribeTransactions of a group's offsets, and WriteTxnMarkers refusing
// internal topics.
func TestCoordinatorProtocolAnswers(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	topic := name("proto")
	k.CreateTopic(topic, 2, nil)
	r := newRaw(t, k, nil)

	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorType, fc.CoordinatorKeys = 1, []string{"any"}
	if c := r.do(fc).(*kmsg.FindCoordinatorResponse).Coordinators[0]; c.ErrorCode != 0 || c.NodeID != 0 {
		t.Fatalf("FindCoordinator(transaction): %s node %d", codeName(c.ErrorCode), c.NodeID)
	}
	id := name("tx")
	if _, code := r.initPID(id, 15*60*1000+1, nil); code != kerr.InvalidTransactionTimeout.Code {
		t.Fatalf("timeout above transaction.max.timeout.ms: %s", codeName(code))
	}
	p := r.mustInit(id, 15*60*1000, nil)
	if code := r.addPartitions(id, p, "no-such-topic", 0); code != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown partition: %s", codeName(code))
	}

	// v5, batched: one entry adds p0; another verifies p0 and p1.
	r5 := newRaw(t, k, map[kmsg.Key]int16{kmsg.AddPartitionsToTxn: 5})
	entry := func(verify bool, parts ...int32) kmsg.AddPartitionsToTxnRequestTransaction {
		e := kmsg.NewAddPartitionsToTxnRequestTransaction()
		e.TransactionalID, e.ProducerID, e.ProducerEpoch, e.VerifyOnly = id, p.id, p.epoch, verify
		e.Topics = []kmsg.AddPartitionsToTxnRequestTransactionTopic{{Topic: topic, Partitions: parts}}
		return e
	}
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Transactions = append(req.Transactions, entry(false, 0))
	if pr := r5.do(req).(*kmsg.AddPartitionsToTxnResponse).Transactions[0].Topics[0].Partitions[0]; pr.ErrorCode != 0 {
		t.Fatalf("v5 add: %s", codeName(pr.ErrorCode))
	}
	req = kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Transactions = append(req.Transactions, entry(true, 0, 1))
	ps := r5.do(req).(*kmsg.AddPartitionsToTxnResponse).Transactions[0].Topics[0].Partitions
	if len(ps) != 2 || ps[0].ErrorCode != 0 || ps[1].ErrorCode != kerr.TransactionAbortable.Code {
		t.Fatalf("v5 verify: %+v", ps)
	}

	group := name("g")
	if code := r.addOffsets(id, p, group); code != 0 {
		t.Fatal(codeName(code))
	}
	d := r.describe(id)
	var tps []string
	for _, t := range d.Topics {
		for _, p := range t.Partitions {
			tps = append(tps, fmt.Sprintf("%s/%d", t.Topic, p))
		}
	}
	if d.State != "Ongoing" || d.TimeoutMillis != 15*60*1000 || d.StartTimestamp <= 0 || !slices.Equal(tps, []string{topic + "/0", "__consumer_offsets/0"}) {
		t.Fatalf("describe: %s timeout %d start %d partitions %q", d.State, d.TimeoutMillis, d.StartTimestamp, tps)
	}
	if d := r.describe(name("none")); d.ErrorCode != kerr.TransactionalIDNotFound.Code {
		t.Fatalf("describe unknown: %s", codeName(d.ErrorCode))
	}

	lt := kmsg.NewPtrListTransactionsRequest()
	lt.StateFilters = []string{"Ongoing", "Bogus"}
	pattern := "^" + id + "$"
	lt.TransactionalIDPattern = &pattern
	resp := r.do(lt).(*kmsg.ListTransactionsResponse)
	if resp.ErrorCode != 0 || len(resp.TransactionStates) != 1 || resp.TransactionStates[0].ProducerID != p.id || !slices.Equal(resp.UnknownStateFilters, []string{"Bogus"}) {
		t.Fatalf("list: %+v", resp)
	}
	bad := "("
	lt.TransactionalIDPattern = &bad
	if resp := r.do(lt).(*kmsg.ListTransactionsResponse); resp.ErrorCode != kerr.InvalidRegularExpression.Code {
		t.Fatalf("list with a bad pattern: %s", codeName(resp.ErrorCode))
	}

	wm := kmsg.NewPtrWriteTxnMarkersRequest()
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch = p.id, p.epoch
	m.Topics = []kmsg.WriteTxnMarkersRequestMarkerTopic{{Topic: "__consumer_offsets", Partitions: []int32{0}}}
	wm.Markers = append(wm.Markers, m)
	if c := r.do(wm).(*kmsg.WriteTxnMarkersResponse).Markers[0].Topics[0].Partitions[0].ErrorCode; c != kerr.InvalidRequest.Code {
		t.Fatalf("marker for an internal topic: %s", codeName(c))
	}
}
