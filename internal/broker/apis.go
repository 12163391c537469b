package broker

import (
	"context"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/group"
	"github.com/kawa-broker/kawa/internal/wire"
)

// reply completes a request (see server.Reply): it may block and returns the
// response, nil for none, or an error that closes the connection.
type reply = func() (kmsg.Response, error)

// api is one entry of the handler table.
type api struct {
	min, max int16
	handle   func(b *Broker, ctx context.Context, req kmsg.Request) reply
}

// apis is the handler table: the only place versions are declared.
// ApiVersions answers from it.
var apis = map[int16]api{}

func register(key, min, max int16, fn func(b *Broker, ctx context.Context, req kmsg.Request) reply) {
	if _, dup := apis[key]; dup {
		panic(fmt.Sprintf("broker: api %d registered twice", key))
	}
	apis[key] = api{min: min, max: max, handle: fn}
}

// now returns a reply that answers resp immediately.
func now(resp kmsg.Response) reply { return func() (kmsg.Response, error) { return resp, nil } }

// Handle dispatches one decoded request. A key or version outside the table
// closes the connection (what Kafka does for non-ApiVersions requests).
func (b *Broker) Handle(ctx context.Context, h wire.Header, req kmsg.Request) reply {
	a, ok := apis[h.Key]
	if !ok || h.Version < a.min || h.Version > a.max {
		if h.Key == 18 {
			return now(b.Unsupported(h))
		}
		return func() (kmsg.Response, error) {
			return nil, fmt.Errorf("unsupported api key %d version %d", h.Key, h.Version)
		}
	}
	b.metrics.Requests.WithLabelValues(kmsg.NameForKey(h.Key)).Inc()
	clientID := ""
	if h.ClientID != nil {
		clientID = *h.ClientID
	}
	host := wire.ClientAddr(ctx)
	if i := strings.LastIndexByte(host, ':'); i > 0 {
		host = host[:i]
	}
	ctx = group.WithClient(ctx, clientID, "/"+host)
	return a.handle(b, ctx, req)
}

// Supports reports whether key is implemented at version.
func (b *Broker) Supports(key, version int16) bool {
	a, ok := apis[key]
	return ok && version >= a.min && version <= a.max
}

// Unsupported answers an ApiVersions request of a version Kawa does not
// implement: ApiVersions v0 with UNSUPPORTED_VERSION and the full table, so
// the client can retry with a version it shares (KIP-511).
func (b *Broker) Unsupported(h wire.Header) kmsg.Response {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	resp.ApiKeys = apiKeys()
	return resp
}

func apiKeys() []kmsg.ApiVersionsResponseApiKey {
	keys := make([]kmsg.ApiVersionsResponseApiKey, 0, len(apis))
	for k := int16(0); k < 100; k++ {
		a, ok := apis[k]
		if !ok {
			continue
		}
		keys = append(keys, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MinVersion: a.min, MaxVersion: a.max})
	}
	return keys
}

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
func init() {
	register(18, 0, 4, func(b *Broker, ctx context.Context, req kmsg.Request) reply {
		r := req.(*kmsg.ApiVersionsRequest)
		resp := r.ResponseKind().(*kmsg.ApiVersionsResponse)
		resp.ApiKeys = apiKeys()
		if r.Version >= 3 {
			setFeatures(resp)
		}
		return now(resp)
	})
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
