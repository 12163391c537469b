package wire

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
	// AdvertisedHost and AdvertisedPort are the address advertised on the
	// listener the connection arrived on (its advertised.listeners entry);
	// Metadata, FindCoordinator and DescribeCluster answer it so a client
	// stays on its listener. AdvertisedHost "" means the listener sets none
	// and the broker's own address applies.
	AdvertisedHost string
	AdvertisedPort int32
	// SendFile reports that the connection is plaintext TCP, so the server
	// writes file ranges of a response (Splices) with splice(2); on TLS a
	// handler should put the bytes in the response instead (the server would
	// otherwise read the ranges into user space to encrypt them).
	SendFile bool
}
