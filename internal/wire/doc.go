// Package wire is Kawa's sans-I/O edge of the Kafka protocol (protocol guide
// "Common Request and Response Structure", KIP-482 for flexible versions):
// size-prefixed frames, request headers v0-v2 with their tagged fields, the
// request body decoded by kmsg, and response framing with header v0 or v1.
//
// The package reads only from an io.Reader handed in and never writes to a
// connection, so its decoders can be fuzzed without sockets; the server owns
// the connections.
//
// Header versions:
//
//	request v0  api_key, api_version, correlation_id (ControlledShutdown v0 only)
//	request v1  + client_id (nullable int16 string)
//	request v2  + tagged fields, for flexible versions; client_id stays a
//	            non-compact nullable string
//	response v0 correlation_id
//	response v1 + tagged fields, for flexible versions except ApiVersions,
//	            whose response header stays v0 so that a client can read the
//	            answer before it knows what the broker supports
package wire
