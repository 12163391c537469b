package broker

import (
	"context"

	"github.com/kawa-broker/kawa/internal/wire"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ApiVersions (key 18), versions 0-4.
//
// Behaviour: advertises exactly the handler table. A request version above 4
// never reaches here: it is answered with v0 + UNSUPPORTED_VERSION
// (Unsupported). v3+ client software name/version are accepted and ignored.
// v3+ also carries the feature flags (KIP-584): Kawa supports and has
// finalized transaction.version 2 (KIP-890 part 2), so clients that read it
// (franz-go, Java 4.0+) use Produce v12, TxnOffsetCommit v5 and EndTxn v5
// without AddPartitionsToTxn/AddOffsetsToTxn. Clients that ignore features
// keep the transaction protocol of the versions they negotiate.
func (b *Broker) handleApiVersions(ctx context.Context, _ wire.RequestInfo, req kmsg.Request) reply {
	r := req.(*kmsg.ApiVersionsRequest)
	resp := r.ResponseKind().(*kmsg.ApiVersionsResponse)
	resp.ApiKeys = b.apiKeys
	if r.Version >= 3 {
		setFeatures(resp)
	}
	return now(resp)
}

// Feature flags (KIP-584). The finalized levels never change while a broker
// runs, so their epoch is a constant; it only has to be >= 0, since -1 means
// "no finalized features" to clients.
const (
	transactionVersionFeature = "transaction.version"
	transactionVersion        = 2
	finalizedFeaturesEpoch    = 1
)

func setFeatures(resp *kmsg.ApiVersionsResponse) {
	sf := kmsg.NewApiVersionsResponseSupportedFeature()
	sf.Name, sf.MinVersion, sf.MaxVersion = transactionVersionFeature, 0, transactionVersion
	resp.SupportedFeatures = []kmsg.ApiVersionsResponseSupportedFeature{sf}
	ff := kmsg.NewApiVersionsResponseFinalizedFeature()
	ff.Name, ff.MinVersionLevel, ff.MaxVersionLevel = transactionVersionFeature, transactionVersion, transactionVersion
	resp.FinalizedFeatures = []kmsg.ApiVersionsResponseFinalizedFeature{ff}
	resp.FinalizedFeaturesEpoch = finalizedFeaturesEpoch
}
