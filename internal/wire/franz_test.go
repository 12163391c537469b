package wire_test

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/wire"
)

// serveOne reads one request from conn, checks its key and flexibility, and
// answers with the response answer builds.
func serveOne(t *testing.T, conn net.Conn, key int16, answer func(req kmsg.Request) kmsg.Response) wire.Header {
	t.Helper()
	frame, err := wire.ReadFrame(conn, 1<<20)
	if err != nil {
		t.Fatalf("ReadFrame: %v", err)
	}
	h, req, err := wire.ParseRequest(frame)
	if err != nil {
		t.Fatalf("ParseRequest: %v", err)
	}
	if h.Key != key || h.ClientID == nil || *h.ClientID != "wire-test" {
		t.Fatalf("header %+v, want key %d from client wire-test", h, key)
	}
	if !req.IsFlexible() {
		t.Fatalf("%s v%d is not flexible; franz-go should use the latest", kmsg.NameForKey(key), h.Version)
	}
	if _, err := conn.Write(wire.AppendResponse(nil, h, answer(req))); err != nil {
		t.Fatal(err)
	}
	return h
}

// The oracle for both directions: franz-go's own connection handshake
// (ApiVersions v3+ with a v2 request header, answered with a v0 response
// header) and a flexible Metadata round trip, over real TCP.
func TestFranzGoHandshake(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(ln.Addr().String()), kgo.ClientID("wire-test"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pinged := make(chan error, 1)
	go func() { pinged <- cl.Ping(ctx) }()

	conn, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}

	h := serveOne(t, conn, 18, func(req kmsg.Request) kmsg.Response {
		if name := req.(*kmsg.ApiVersionsRequest).ClientSoftwareName; name != "kgo" {
			t.Errorf("client software name %q", name)
		}
		resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
		for _, k := range []struct{ key, max int16 }{{18, 4}, {3, 12}} {
			ak := kmsg.NewApiVersionsResponseApiKey()
			ak.ApiKey, ak.MaxVersion = k.key, k.max
			resp.ApiKeys = append(resp.ApiKeys, ak)
		}
		return resp
	})
	if h.Version < 3 {
		t.Fatalf("ApiVersions v%d, want a flexible v3+", h.Version)
	}
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	serveOne(t, conn, 3, func(req kmsg.Request) kmsg.Response {
		resp := req.ResponseKind().(*kmsg.MetadataResponse)
		b := kmsg.NewMetadataResponseBroker()
		b.Host = host
		p, err := strconv.Atoi(port)
		if err != nil {
			t.Fatal(err)
		}
		b.Port = int32(p)
		resp.Brokers = append(resp.Brokers, b)
		return resp
	})
	if err := <-pinged; err != nil {
		t.Fatalf("franz-go rejected the responses: %v", err)
	}
}
