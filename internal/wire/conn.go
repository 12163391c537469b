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
