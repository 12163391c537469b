package broker_test

import (
	"crypto/tls"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/kawa-broker/kawa/internal/kawatest"
	"github.com/kawa-broker/kawa/internal/server"
)

// produceAs writes n records to topic as admin and fails on error.
func (a authzBroker) produceAs(user, topic string, n int) {
	a.t.Helper()
	cl := a.client(user, kgo.DefaultProduceTopic(topic))
	for i := range n {
		if err := cl.ProduceSync(testCtx(a.t), &kgo.Record{Value: fmt.Appendf(nil, "v%d", i)}).FirstErr(); err != nil {
			a.t.Fatalf("produce to %s as %s: %v", topic, user, err)
		}
	}
}

func (a authzBroker) createTopics(names ...string) {
	a.t.Helper()
	for _, n := range names {
		if _, err := a.admin("admin").CreateTopic(testCtx(a.t), 1, 1, nil, n); err != nil {
			a.t.Fatalf("create %s: %v", n, err)
		}
	}
}

// raw sends req as user straight to the broker (a seed broker: no
// coordinator lookup first, so the handler's own check answers).
func (a authzBroker) raw(user string, req kmsg.Request, opts ...kgo.Opt) kmsg.Response {
	a.t.Helper()
	resp, err := a.client(user, opts...).SeedBrokers()[0].Request(testCtx(a.t), req)
	if err != nil {
		a.t.Fatalf("%s as %s: %v", kmsg.NameForKey(req.Key()), user, err)
	}
	return resp
}

// fetchCode sends one raw Fetch for partition 0 of topic as user and
// returns the partition's error code.
func (a authzBroker) fetchCode(user, topic string) int16 {
	a.t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxBytes = -1, 1<<20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 1 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return a.raw(user, req).(*kmsg.FetchResponse).Topics[0].Partitions[0].ErrorCode
}

// TestAuthzReadOnlyConsumer is issue 14's acceptance case: a principal with
// only READ on topic A and group G consumes A and commits to G, and gets
// TOPIC_AUTHORIZATION_FAILED on B and GROUP_AUTHORIZATION_FAILED on H.
func TestAuthzReadOnlyConsumer(t *testing.T) {
	a := startAuthz(t)
	a.createTopics("A", "B")
	a.produceAs("admin", "A", 5)
	a.produceAs("admin", "B", 5)
	a.grant(
		kadm.NewACLs().Allow("User:alice").AllowHosts().Topics("A").Operations(kadm.OpRead),
		kadm.NewACLs().Allow("User:alice").AllowHosts().Groups("G").Operations(kadm.OpRead),
	)
	ctx := testCtx(t)

	cons := a.client("alice", kgo.ConsumeTopics("A"), kgo.ConsumerGroup("G"), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got int
	for got < 5 {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("alice consuming A: %v", err)
		}
		got += fs.NumRecords()
	}
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("alice committing to G: %v", err)
	}
	cons.Close()
	alice := a.admin("alice")
	offs, err := alice.FetchOffsets(ctx, "G") // DESCRIBE on G, implied by READ
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := offs.Lookup("A", 0); !ok || o.At != 5 || o.Err != nil {
		t.Fatalf("G's committed offset on A = %+v, %v; want 5", o, ok)
	}

	if code := a.fetchCode("alice", "B"); code != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("alice fetching B: code %d, want TOPIC_AUTHORIZATION_FAILED", code)
	}
	if code := a.fetchCode("alice", "A"); code != 0 {
		t.Errorf("alice fetching A: code %d, want 0", code)
	}
	// Committing B's offsets to G, and A's to H (raw OffsetCommit v9, by name).
	md, err := a.admin("admin").Metadata(ctx, "A", "B")
	if err != nil {
		t.Fatal(err)
	}
	byID := map[[16]byte]string{}
	commit := func(group string, topics ...string) map[string]int16 {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Group, req.Generation = group, -1
		for _, tp := range topics {
			rt := kmsg.NewOffsetCommitRequestTopic()
			rt.Topic, rt.TopicID = tp, md.Topics[tp].ID // v10+ sends only the ID
			byID[rt.TopicID] = tp
			rt.Partitions = []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1, LeaderEpoch: -1}}
			req.Topics = append(req.Topics, rt)
		}
		codes := map[string]int16{}
		for _, rt := range a.raw("alice", req).(*kmsg.OffsetCommitResponse).Topics {
			name := rt.Topic
			if name == "" {
				name = byID[rt.TopicID]
			}
			codes[name] = rt.Partitions[0].ErrorCode
		}
		return codes
	}
	if codes := commit("G", "A", "B"); codes["A"] != 0 || codes["B"] != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("alice committing A and B to G: codes %v, want A 0, B TOPIC_AUTHORIZATION_FAILED", codes)
	}
	if codes := commit("H", "A"); codes["A"] != kerr.GroupAuthorizationFailed.Code {
		t.Errorf("alice committing A to H: codes %v, want GROUP_AUTHORIZATION_FAILED", codes)
	}
	// Joining H.
	h := a.client("alice", kgo.ConsumeTopics("A"), kgo.ConsumerGroup("H"))
	if err := h.PollFetches(ctx).Err0(); !errors.Is(err, kerr.GroupAuthorizationFailed) {
		t.Errorf("alice consuming A in H: %v, want GROUP_AUTHORIZATION_FAILED", err)
	}
	// No WRITE on A (and no idempotent producer: no IDEMPOTENT_WRITE, no
	// WRITE on any topic).
	if resp := a.rawInitProducerID("alice", nil); resp.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Errorf("alice's InitProducerId: code %d, want CLUSTER_AUTHORIZATION_FAILED", resp.ErrorCode)
	}
	p := a.client("alice", kgo.DefaultProduceTopic("A"), kgo.RecordRetries(0), kgo.DisableIdempotentWrite())
	if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Errorf("alice producing to A: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	// Metadata lists only what alice may describe; naming B is refused.
	md, err = alice.Metadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if names := md.Topics.Names(); !slices.Equal(names, []string{"A"}) {
		t.Errorf("alice's metadata lists %v, want [A]", names)
	}
	mreq := kmsg.NewPtrMetadataRequest()
	mreq.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("B")}, {Topic: kmsg.StringPtr("A")}, {Topic: kmsg.StringPtr("nonexistent")}}
	mresp := a.raw("alice", mreq).(*kmsg.MetadataResponse)
	if mresp.Topics[0].ErrorCode != kerr.TopicAuthorizationFailed.Code || len(mresp.Topics[0].Partitions) != 0 ||
		mresp.Topics[1].ErrorCode != 0 || mresp.Topics[2].ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("alice's metadata for B, A, nonexistent: codes %d %d %d, want TOPIC_AUTHORIZATION_FAILED, 0, TOPIC_AUTHORIZATION_FAILED",
			mresp.Topics[0].ErrorCode, mresp.Topics[1].ErrorCode, mresp.Topics[2].ErrorCode)
	}
	// Groups: ListGroups shows G only; DescribeGroups of H is refused.
	lg, err := alice.ListGroups(ctx)
	if err != nil || !slices.Equal(lg.Groups(), []string{"G"}) {
		t.Errorf("alice lists groups %v, %v; want [G]", lg.Groups(), err)
	}
	// ListOffsets of B, DeleteRecords of A, topic creation, configs, SCRAM users.
	lreq := kmsg.NewPtrListOffsetsRequest()
	lreq.ReplicaID = -1
	lreq.Topics = []kmsg.ListOffsetsRequestTopic{
		{Topic: "A", Partitions: []kmsg.ListOffsetsRequestTopicPartition{{Partition: 0, Timestamp: -1, CurrentLeaderEpoch: -1}}},
		{Topic: "B", Partitions: []kmsg.ListOffsetsRequestTopicPartition{{Partition: 0, Timestamp: -1, CurrentLeaderEpoch: -1}}},
	}
	lresp := a.raw("alice", lreq).(*kmsg.ListOffsetsResponse)
	if pa, pb := lresp.Topics[0].Partitions[0], lresp.Topics[1].Partitions[0]; pa.ErrorCode != 0 || pa.Offset != 5 || pb.ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("alice's ListOffsets: A %+v, B %+v; want A at 5, B TOPIC_AUTHORIZATION_FAILED", pa, pb)
	}
	if _, err := alice.CreateTopic(ctx, 1, 1, nil, "C"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Errorf("alice creating C: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	if _, err := alice.DescribeUserSCRAMs(ctx); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Errorf("alice describing SCRAM users: %v, want CLUSTER_AUTHORIZATION_FAILED", err)
	}
	rc, err := alice.DescribeTopicConfigs(ctx, "A")
	if !errors.Is(err, kerr.TopicAuthorizationFailed) && (err != nil || len(rc) != 1 || !errors.Is(rc[0].Err, kerr.TopicAuthorizationFailed)) {
		t.Errorf("alice describing A's configs: %+v, %v; want TOPIC_AUTHORIZATION_FAILED (READ does not imply DESCRIBE_CONFIGS)", rc, err)
	}
}

// rawInitProducerID sends InitProducerId (txnID nil for an idempotent
// producer) as user and returns the response.
func (a authzBroker) rawInitProducerID(user string, txnID *string) *kmsg.InitProducerIDResponse {
	a.t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID, req.TransactionTimeoutMillis = txnID, 10000
	req.ProducerID, req.ProducerEpoch = -1, -1
	return a.raw(user, req).(*kmsg.InitProducerIDResponse)
}

// TestAuthzTransactional: a transactional producer without WRITE on its
// transactional ID fails at InitProducerId; with it but without READ on
// the group it fails at AddOffsetsToTxn and TxnOffsetCommit (GROUP_AUTHORIZATION_FAILED);
// FindCoordinator for a transactional ID without DESCRIBE is refused; the
// other transactional APIs check WRITE on the ID.
func TestAuthzTransactional(t *testing.T) {
	a := startAuthz(t)
	a.createTopics("out")
	a.grant(
		kadm.NewACLs().Allow("User:carol").AllowHosts().TransactionalIDs("tx-ok").Operations(kadm.OpWrite),
		kadm.NewACLs().Allow("User:carol").AllowHosts().Topics("out").Operations(kadm.OpWrite),
	)
	ctx := testCtx(t)
	if resp := a.rawInitProducerID("carol", kmsg.StringPtr("tx-nope")); resp.ErrorCode != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Fatalf("InitProducerId for tx-nope: code %d, want TRANSACTIONAL_ID_AUTHORIZATION_FAILED", resp.ErrorCode)
	}
	// The same through franz-go: its producer ID initialisation fails (at
	// BeginTransaction or the first produce; franz-go reports a fatal
	// producer-ID error naming the code).
	kp := a.client("carol", kgo.TransactionalID("tx-nope"), kgo.DefaultProduceTopic("out"))
	err := kp.BeginTransaction()
	if err == nil {
		err = kp.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr()
	}
	if err == nil || !strings.Contains(err.Error(), kerr.TransactionalIDAuthorizationFailed.Message) {
		t.Errorf("franz-go transactional producer with tx-nope: %v, want TRANSACTIONAL_ID_AUTHORIZATION_FAILED", err)
	}

	cl := a.client("carol")
	fc := func(keyType int8, key string) int16 {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorType, req.CoordinatorKey = keyType, key
		req.CoordinatorKeys = []string{key}
		resp := a.raw("carol", req).(*kmsg.FindCoordinatorResponse)
		if len(resp.Coordinators) > 0 {
			return resp.Coordinators[0].ErrorCode
		}
		return resp.ErrorCode
	}
	if code := fc(1, "tx-nope"); code != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Errorf("FindCoordinator(tx-nope): %d, want TRANSACTIONAL_ID_AUTHORIZATION_FAILED", code)
	}
	if code := fc(1, "tx-ok"); code != 0 {
		t.Errorf("FindCoordinator(tx-ok): %d, want 0 (WRITE implies DESCRIBE)", code)
	}
	if code := fc(0, "g"); code != kerr.GroupAuthorizationFailed.Code {
		t.Errorf("FindCoordinator(group g): %d, want GROUP_AUTHORIZATION_FAILED", code)
	}

	init := a.rawInitProducerID("carol", kmsg.StringPtr("tx-ok"))
	if init.ErrorCode != 0 {
		t.Fatalf("InitProducerId for tx-ok: code %d", init.ErrorCode)
	}
	ao := kmsg.NewPtrAddOffsetsToTxnRequest()
	ao.TransactionalID, ao.ProducerID, ao.ProducerEpoch, ao.Group = "tx-ok", init.ProducerID, init.ProducerEpoch, "g"
	if resp := a.raw("carol", ao).(*kmsg.AddOffsetsToTxnResponse); resp.ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Errorf("AddOffsetsToTxn without READ on g: %+v; want GROUP_AUTHORIZATION_FAILED", resp)
	}
	toc := kmsg.NewPtrTxnOffsetCommitRequest()
	toc.TransactionalID, toc.Group, toc.ProducerID, toc.ProducerEpoch = "tx-ok", "g", init.ProducerID, init.ProducerEpoch
	toc.Generation = -1
	tt := kmsg.NewTxnOffsetCommitRequestTopic()
	tt.Topic = "out"
	tt.Partitions = []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1, LeaderEpoch: -1}}
	toc.Topics = append(toc.Topics, tt)
	if resp := a.raw("carol", toc).(*kmsg.TxnOffsetCommitResponse); resp.Topics[0].Partitions[0].ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Errorf("TxnOffsetCommit without READ on g: %+v; want GROUP_AUTHORIZATION_FAILED", resp)
	}
	// AddPartitionsToTxn: WRITE on out is granted, on other is not.
	ap := kmsg.NewPtrAddPartitionsToTxnRequest() // v3, what clients send (franz-go sends the highest version both sides have)
	ap.TransactionalID, ap.ProducerID, ap.ProducerEpoch = "tx-ok", init.ProducerID, init.ProducerEpoch
	ap.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "out", Partitions: []int32{0}}, {Topic: "other", Partitions: []int32{0}}}
	v3 := kversion.Stable()
	v3.SetMaxKeyVersion(kmsg.AddPartitionsToTxn.Int16(), 3)
	apResp := a.raw("carol", ap, kgo.MaxVersions(v3)).(*kmsg.AddPartitionsToTxnResponse)
	codes := map[string]int16{}
	for _, rt := range apResp.Topics {
		codes[rt.Topic] = rt.Partitions[0].ErrorCode
	}
	if codes["out"] != kerr.OperationNotAttempted.Code || codes["other"] != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("AddPartitionsToTxn codes %v, want out OPERATION_NOT_ATTEMPTED, other TOPIC_AUTHORIZATION_FAILED", codes)
	}
	ap.Version = 5 // the brokers' form needs CLUSTER_ACTION
	ap.Transactions = []kmsg.AddPartitionsToTxnRequestTransaction{{TransactionalID: "tx-ok", ProducerID: init.ProducerID, ProducerEpoch: init.ProducerEpoch,
		Topics: []kmsg.AddPartitionsToTxnRequestTransactionTopic{{Topic: "out", Partitions: []int32{0}}}}}
	if resp := a.raw("carol", ap).(*kmsg.AddPartitionsToTxnResponse); resp.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Errorf("AddPartitionsToTxn v5: code %d, want CLUSTER_AUTHORIZATION_FAILED", resp.ErrorCode)
	}
	// EndTxn, DescribeTransactions and ListTransactions for an ID carol may not use.
	et := kmsg.NewPtrEndTxnRequest()
	et.TransactionalID, et.ProducerID, et.ProducerEpoch = "tx-nope", 1, 0
	if resp := a.raw("carol", et).(*kmsg.EndTxnResponse); resp.ErrorCode != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Errorf("EndTxn(tx-nope): %+v; want TRANSACTIONAL_ID_AUTHORIZATION_FAILED", resp)
	}
	carolAdm := kadm.NewClient(cl)
	dts, err := carolAdm.DescribeTransactions(ctx, "tx-nope")
	if err == nil {
		if d, ok := dts["tx-nope"]; !ok || !errors.Is(d.Err, kerr.TransactionalIDAuthorizationFailed) {
			t.Errorf("DescribeTransactions(tx-nope): %+v, want TRANSACTIONAL_ID_AUTHORIZATION_FAILED", dts)
		}
	} else if !errors.Is(err, kerr.TransactionalIDAuthorizationFailed) {
		t.Errorf("DescribeTransactions(tx-nope): %v", err)
	}
	a.rawInitProducerID("admin", kmsg.StringPtr("tx-admin"))
	lts, err := carolAdm.ListTransactions(ctx, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ids := lts.TransactionalIDs(); !slices.Equal(ids, []string{"tx-ok"}) {
		t.Errorf("carol lists transactions %v, want [tx-ok]", ids)
	}
}

// TestAuthzIdempotentWrite: an idempotent producer (no transactional ID)
// needs IDEMPOTENT_WRITE on the cluster or WRITE on some topic; a WRITE on a
// topic that a matching DENY dominates does not count (Kafka's
// authorizeByResourceType).
func TestAuthzIdempotentWrite(t *testing.T) {
	a := startAuthz(t)
	if resp := a.rawInitProducerID("bob", nil); resp.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("no ACLs: code %d, want CLUSTER_AUTHORIZATION_FAILED", resp.ErrorCode)
	}
	a.grant(kadm.NewACLs().Allow("User:bob").AllowHosts().Topics("t1").Operations(kadm.OpWrite))
	if resp := a.rawInitProducerID("bob", nil); resp.ErrorCode != 0 || resp.ProducerID < 0 {
		t.Fatalf("WRITE on t1: %+v, want a producer ID", resp)
	}
	a.grant(kadm.NewACLs().Deny("User:bob").DenyHosts().Topics("t").Operations(kadm.OpWrite).ResourcePatternType(kadm.ACLPatternPrefixed))
	if resp := a.rawInitProducerID("bob", nil); resp.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("WRITE on t1 dominated by a prefixed DENY on t: code %d, want CLUSTER_AUTHORIZATION_FAILED", resp.ErrorCode)
	}
	a.grant(kadm.NewACLs().Allow("User:bob").AllowHosts().Clusters().Operations(kadm.OpIdempotentWrite))
	if resp := a.rawInitProducerID("bob", nil); resp.ErrorCode != 0 {
		t.Fatalf("IDEMPOTENT_WRITE on the cluster: code %d", resp.ErrorCode)
	}
}

// TestAuthzMTLSPrincipal: the principal of a verified client certificate,
// User:<subject DN>, is what ACLs name.
func TestAuthzMTLSPrincipal(t *testing.T) {
	ca := kawatest.NewCA(t, "kawa test CA")
	l := server.Listener{Protocol: server.SSL, TLS: &tls.Config{
		Certificates: []tls.Certificate{ca.Issue("localhost", "")}, ClientCAs: ca.Pool(), ClientAuth: tls.RequireAndVerifyClientCert}}
	b := kawatest.NewSecureBroker(t, l, withAuthorizer("User:CN=admin"))
	as := func(cn string, opts ...kgo.Opt) *kgo.Client {
		cert := ca.Issue(cn, "Example")
		if cn == "admin" {
			cert = ca.Issue(cn, "")
		}
		return b.Client(append([]kgo.Opt{kgo.DialTLSConfig(&tls.Config{RootCAs: ca.Pool(), ServerName: "localhost", Certificates: []tls.Certificate{cert}})}, opts...)...)
	}
	ctx := testCtx(t)
	adm := kadm.NewClient(as("admin"))
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "m"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "n"); err != nil {
		t.Fatal(err)
	}
	rs, err := adm.CreateACLs(ctx, kadm.NewACLs().Allow("User:CN=app,O=Example").AllowHosts().Topics("m").Operations(kadm.OpWrite, kadm.OpRead))
	if err != nil || rs[0].Err != nil {
		t.Fatalf("CreateACLs: %+v, %v", rs, err)
	}
	app := as("app", kgo.RecordRetries(0))
	if err := app.ProduceSync(ctx, &kgo.Record{Topic: "m", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("CN=app,O=Example producing to m: %v", err)
	}
	if err := app.ProduceSync(ctx, &kgo.Record{Topic: "n", Value: []byte("v")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Errorf("CN=app,O=Example producing to n: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	other := as("other", kgo.RecordRetries(0))
	if err := other.ProduceSync(ctx, &kgo.Record{Topic: "m", Value: []byte("v")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Errorf("CN=other,O=Example producing to m: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	cons := as("app", kgo.ConsumeTopics("m"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if fs := cons.PollFetches(ctx); fs.Err0() != nil || fs.NumRecords() != 1 {
		t.Fatalf("CN=app consuming m: %d records, %v", fs.NumRecords(), fs.Err0())
	}
}
