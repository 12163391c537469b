package wire

import "context"

type clientAddrKey struct{}

// WithClientAddr returns ctx carrying the remote address of the connection a
// request arrived on (the server sets it; handlers read it for client host
// fields such as DescribeGroups' client host).
func WithClientAddr(ctx context.Context, addr string) context.Context {
	return context.WithValue(ctx, clientAddrKey{}, addr)
}

// ClientAddr returns the address set by WithClientAddr, or "".
func ClientAddr(ctx context.Context) string {
	s, _ := ctx.Value(clientAddrKey{}).(string)
	return s
}

type pollDoneKey struct{}

// WithPollDone returns ctx carrying a channel closed when long polls on this
// connection should return early: the client stopped sending (EOF) or the
// server is shutting down. Waits that must finish (fsync for acks=all) keep
// using ctx itself.
func WithPollDone(ctx context.Context, done <-chan struct{}) context.Context {
	return context.WithValue(ctx, pollDoneKey{}, done)
}

// PollDone returns the channel set by WithPollDone, or nil (never closed).
func PollDone(ctx context.Context) <-chan struct{} {
	ch, _ := ctx.Value(pollDoneKey{}).(<-chan struct{})
	return ch
}

type principalKey struct{}

// WithPrincipal returns ctx carrying the authenticated principal of the
// connection ("User:alice", "User:CN=app,O=Example", "User:ANONYMOUS"); the
// server sets it after TLS and again after SASL succeeds.
func WithPrincipal(ctx context.Context, principal string) context.Context {
	return context.WithValue(ctx, principalKey{}, principal)
}

// Principal returns the principal set by WithPrincipal, or "User:ANONYMOUS".
func Principal(ctx context.Context) string {
	if p, ok := ctx.Value(principalKey{}).(string); ok {
		return p
	}
	return "User:ANONYMOUS"
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
