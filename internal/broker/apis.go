package broker

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/wire"
)

// reply completes a request (see server.Reply): it may block and returns the
// response, nil for none, or an error that closes the connection.
type reply = func() (kmsg.Response, error)

// api is one entry of the handler table: an API key, the version range
// advertised in ApiVersions and accepted on the wire (inclusive), and the
// handler, a method documented in the file named after the API (or, for the
// group coordinator's APIs, on group.Coordinator's method).
type api struct {
	key      kmsg.Key
	min, max int16
	handle   func(b *Broker, ctx context.Context, info wire.RequestInfo, req kmsg.Request) reply
}

// apis is the handler table, sorted by key: the only place keys and versions
// are declared. ApiVersions answers from it; TestAPITable checks the order
// and each handler's documented range against it.
var apis = [...]api{
	{kmsg.Produce, 3, 12, (*Broker).handleProduce},
	{kmsg.Fetch, 4, 12, (*Broker).handleFetch},
	{kmsg.ListOffsets, 1, 8, (*Broker).handleListOffsets},
	{kmsg.Metadata, 0, 12, (*Broker).handleMetadata},
	{kmsg.OffsetCommit, 2, 10, (*Broker).handleOffsetCommit},
	{kmsg.OffsetFetch, 1, 10, (*Broker).handleOffsetFetch},
	{kmsg.FindCoordinator, 0, 4, (*Broker).handleFindCoordinator},
	{kmsg.JoinGroup, 0, 9, (*Broker).handleJoinGroup},
	{kmsg.Heartbeat, 0, 4, (*Broker).handleHeartbeat},
	{kmsg.LeaveGroup, 0, 5, (*Broker).handleLeaveGroup},
	{kmsg.SyncGroup, 0, 5, (*Broker).handleSyncGroup},
	{kmsg.DescribeGroups, 0, 6, (*Broker).handleDescribeGroups},
	{kmsg.ListGroups, 0, 5, (*Broker).handleListGroups},
	{kmsg.SASLHandshake, 0, 1, (*Broker).handleSaslHandshake},
	{kmsg.ApiVersions, 0, 4, (*Broker).handleApiVersions},
	{kmsg.CreateTopics, 2, 7, (*Broker).handleCreateTopics},
	{kmsg.DeleteTopics, 1, 6, (*Broker).handleDeleteTopics},
	{kmsg.DeleteRecords, 0, 2, (*Broker).handleDeleteRecords},
	{kmsg.InitProducerID, 0, 4, (*Broker).handleInitProducerID},
	{kmsg.AddPartitionsToTxn, 0, 5, (*Broker).handleAddPartitionsToTxn},
	{kmsg.AddOffsetsToTxn, 0, 4, (*Broker).handleAddOffsetsToTxn},
	{kmsg.EndTxn, 0, 5, (*Broker).handleEndTxn},
	{kmsg.WriteTxnMarkers, 0, 2, (*Broker).handleWriteTxnMarkers},
	{kmsg.TxnOffsetCommit, 0, 5, (*Broker).handleTxnOffsetCommit},
	{kmsg.DescribeACLs, 1, 3, (*Broker).handleDescribeAcls},
	{kmsg.CreateACLs, 1, 3, (*Broker).handleCreateAcls},
	{kmsg.DeleteACLs, 1, 3, (*Broker).handleDeleteAcls},
	{kmsg.DescribeConfigs, 1, 4, (*Broker).handleDescribeConfigs},
	{kmsg.AlterConfigs, 0, 2, (*Broker).handleAlterConfigs},
	{kmsg.DescribeLogDirs, 1, 4, (*Broker).handleDescribeLogDirs},
	{kmsg.SASLAuthenticate, 0, 2, (*Broker).handleSaslAuthenticate},
	{kmsg.CreatePartitions, 0, 3, (*Broker).handleCreatePartitions},
	{kmsg.DeleteGroups, 0, 2, (*Broker).handleDeleteGroups},
	{kmsg.ElectLeaders, 0, 2, (*Broker).handleElectLeaders},
	{kmsg.IncrementalAlterConfigs, 0, 1, (*Broker).handleIncrementalAlterConfigs},
	{kmsg.AlterPartitionAssignments, 0, 1, (*Broker).handleAlterPartitionAssignments},
	{kmsg.ListPartitionReassignments, 0, 0, (*Broker).handleListPartitionReassignments},
	{kmsg.OffsetDelete, 0, 0, (*Broker).handleOffsetDelete},
	{kmsg.DescribeUserSCRAMCredentials, 0, 0, (*Broker).handleDescribeUserScramCredentials},
	{kmsg.AlterUserSCRAMCredentials, 0, 0, (*Broker).handleAlterUserScramCredentials},
	{kmsg.DescribeCluster, 0, 1, (*Broker).handleDescribeCluster},
	{kmsg.DescribeProducers, 0, 0, (*Broker).handleDescribeProducers},
	{kmsg.DescribeTransactions, 0, 0, (*Broker).handleDescribeTransactions},
	{kmsg.ListTransactions, 0, 2, (*Broker).handleListTransactions},
	{kmsg.ConsumerGroupHeartbeat, 0, 1, (*Broker).handleConsumerGroupHeartbeat},
	{kmsg.ConsumerGroupDescribe, 0, 1, (*Broker).handleConsumerGroupDescribe},
	{kmsg.ShareGroupHeartbeat, 1, 1, (*Broker).handleShareGroupHeartbeat},
	{kmsg.ShareGroupDescribe, 1, 1, (*Broker).handleShareGroupDescribe},
	{kmsg.ShareFetch, 1, 2, (*Broker).handleShareFetch},
	{kmsg.ShareAcknowledge, 1, 2, (*Broker).handleShareAcknowledge},
	{kmsg.DescribeShareGroupOffsets, 0, 1, (*Broker).handleDescribeShareGroupOffsets},
	{kmsg.AlterShareGroupOffsets, 0, 0, (*Broker).handleAlterShareGroupOffsets},
	{kmsg.DeleteShareGroupOffsets, 0, 0, (*Broker).handleDeleteShareGroupOffsets},
}

// lookup returns the table entry for key, if Kawa implements it.
func lookup(key int16) (api, bool) {
	i, ok := slices.BinarySearchFunc(apis[:], key, func(a api, k int16) int { return cmp.Compare(a.key.Int16(), k) })
	if !ok {
		return api{}, false
	}
	return apis[i], true
}

// now returns a reply that answers resp immediately.
func now(resp kmsg.Response) reply { return func() (kmsg.Response, error) { return resp, nil } }

// Handle dispatches one decoded request. A key or version outside the table
// closes the connection (what Kafka does for non-ApiVersions requests).
func (b *Broker) Handle(ctx context.Context, info wire.RequestInfo, h wire.Header, req kmsg.Request) reply {
	a, ok := lookup(h.Key)
	if !ok || h.Version < a.min || h.Version > a.max {
		if h.Key == kmsg.ApiVersions.Int16() {
			return now(b.Unsupported(h))
		}
		return func() (kmsg.Response, error) {
			return nil, fmt.Errorf("unsupported api key %d version %d", h.Key, h.Version)
		}
	}
	b.metrics.Requests.WithLabelValues(kmsg.NameForKey(h.Key)).Inc()
	return a.handle(b, ctx, info, req)
}

// Supports reports whether key is implemented at version.
func (b *Broker) Supports(key, version int16) bool {
	a, ok := lookup(key)
	return ok && version >= a.min && version <= a.max
}

// Unsupported answers an ApiVersions request of a version Kawa does not
// implement: ApiVersions v0 with UNSUPPORTED_VERSION and the full table, so
// the client can retry with a version it shares (KIP-511).
func (b *Broker) Unsupported(h wire.Header) kmsg.Response {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	resp.ApiKeys = b.apiKeys
	return resp
}

// apiKeys lists the table as ApiVersions advertises it. It is computed once
// per Broker (New), which also keeps the table's initialization free of a
// cycle through handleApiVersions.
func apiKeys() []kmsg.ApiVersionsResponseApiKey {
	keys := make([]kmsg.ApiVersionsResponseApiKey, 0, len(apis))
	for _, a := range apis {
		keys = append(keys, kmsg.ApiVersionsResponseApiKey{ApiKey: a.key.Int16(), MinVersion: a.min, MaxVersion: a.max})
	}
	return keys
}
