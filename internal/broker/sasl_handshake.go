package broker

import (
	"context"

	"github.com/kawa-broker/kawa/internal/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SaslHandshake (key 17), versions 0-1.
//
// Version 0 is advertised because librdkafka requires it in ApiVersions to
// enable SASL at all, but only the v1 flow is spoken (SaslAuthenticate
// frames after the handshake): a v0 handshake is answered UNSUPPORTED_VERSION
// and the connection closed, since v0 means raw tokens outside Kafka framing.
//
// Behaviour: on a SASL listener the server (internal/server) answers
// SaslHandshake itself until the connection is authenticated, as Kafka's
// SaslServerAuthenticator does, and again for a KIP-368 re-authentication
// when connections.max.reauth.ms gives sessions a lifetime. One that reaches
// the broker (a PLAINTEXT or SSL listener, or a second handshake after login
// without a session lifetime) gets ILLEGAL_SASL_STATE, as in Kafka's
// KafkaApis.
func (b *Broker) handleSaslHandshake(ctx context.Context, _ wire.RequestInfo, req kmsg.Request) reply {
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.ErrorCode = kerr.IllegalSaslState.Code
	return now(resp)
}
