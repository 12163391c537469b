package broker

import (
	"context"

	"github.com/kawa-broker/kawa/internal/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SaslAuthenticate (key 36), versions 0-2.
//
// Behaviour: the server (internal/server) answers SaslAuthenticate on a SASL
// listener before authentication; one that reaches the broker is out of
// place (no SASL on this listener, or already authenticated) and gets
// ILLEGAL_SASL_STATE, as in Kafka's KafkaApis.
func (b *Broker) handleSaslAuthenticate(ctx context.Context, _ wire.RequestInfo, req kmsg.Request) reply {
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	resp.ErrorCode = kerr.IllegalSaslState.Code
	msg := "SaslAuthenticate is only valid during a SASL exchange on a SASL listener"
	resp.ErrorMessage = &msg
	return now(resp)
}
