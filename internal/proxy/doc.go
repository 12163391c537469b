// Package proxy is an in-process TCP proxy that understands Kafka framing,
// for fault-injection tests and the verifier: it can hold, delay, drop or
// cut on one chosen request or response.
//
// # Usage
//
//	p, err := proxy.New(brokerAddr)   // listens on 127.0.0.1:0
//	defer p.Close()
//	p.OnResponse(func(f proxy.Frame) proxy.Action {
//		if f.Key == 0 && lose.Load() { // Produce (key 0)
//			return proxy.Action{Drop: true, Cut: true} // lost ack
//		}
//		return proxy.Action{}
//	})
//	cl, _ := kgo.NewClient(kgo.SeedBrokers(p.Addr()))
//
// Every frame is a 4-byte big-endian size and a body. A request body starts
// with api key, api version and correlation ID (request header v1/v2); a
// response body starts with the correlation ID; internal/wire reads both, as
// it does for the broker. The proxy remembers the key
// and version of every request by correlation ID on its connection, so a
// response rule sees which API it answers.
//
// Kafka clients connect to the broker address advertised in Metadata, not to
// the seed. So the proxy rewrites every broker host and port in Metadata
// (key 3), FindCoordinator (key 10) and DescribeCluster (key 60) responses
// to its own address; without it a client would reach the broker directly on
// every connection but the first. NB: all brokers are rewritten to the one
// proxy address, so one Proxy fronts exactly one broker.
//
// # Ordering and ownership
//
// Each client connection gets an upstream connection and two goroutines, one
// per direction. A rule runs on that direction's goroutine, and a held or
// delayed frame also holds back every frame behind it in that direction, as
// TCP would: Kafka clients match responses to requests by order, so frames
// are never reordered. Rules must not block; use Action.Hold to wait. Close
// stops the listener, closes every connection, releases every hold and waits
// for all goroutines.
//
// The proxy never decodes anything but frame headers and the three rewritten
// responses; a frame it cannot parse (size over 256 MiB, header too short, a
// rewritten response kmsg cannot decode) closes that connection pair.
package proxy
