package wire

import "context"

// RequestInfo is what the server knows about one request beyond its header
// and body, passed explicitly from the server through the broker's handlers.
type RequestInfo struct {
	// ClientAddr is the remote address of the connection the request arrived
	// on, "host:port" (net.Addr.String); handlers report it as the client host
	// (DescribeGroups).
	ClientAddr string
	// ClientID is the request header's client.id, "" when null.
	ClientID string
	// PollDone is closed when long polls on this connection should return
	// early: the client stopped sending (EOF) or the server is shutting down.
	// Waits that must finish (fsync for acks=all) use the request's context
	// instead. A nil PollDone is never closed.
	PollDone <-chan struct{}
	// Principal is the connection's authenticated principal, Kafka's form:
	// "User:alice" after SASL, "User:<subject DN>" from a verified client
	// certificate, else "User:ANONYMOUS". The server sets it after the TLS
	// handshake and again when SASL succeeds; it is what an authorizer checks.
	Principal string
}

type advertisedKey struct{}

type advertised struct {
	host string
	port int32
}

// WithAdvertised returns ctx carrying the address advertised on the listener
// the connection arrived on (Kafka's advertised.listeners entry): Metadata and
// FindCoordinator answer it, so a client stays on its listener.
func WithAdvertised(ctx context.Context, host string, port int32) context.Context {
	return context.WithValue(ctx, advertisedKey{}, advertised{host, port})
}

// Advertised returns the address set by WithAdvertised; ok is false if none.
func Advertised(ctx context.Context) (host string, port int32, ok bool) {
	a, ok := ctx.Value(advertisedKey{}).(advertised)
	return a.host, a.port, ok
}
