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
