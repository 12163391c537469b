package server

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/kawatest/rawreq"
	"github.com/kawa-broker/kawa/internal/wire"
)

// testHandler answers Metadata after a delay that shrinks with the
// correlation id (so later requests finish first), and panics on
// ListGroups.
type testHandler struct{}

func (testHandler) Supports(key, version int16) bool { return true }

func (testHandler) Unsupported(h wire.Header) kmsg.Response { return kmsg.NewPtrApiVersionsResponse() }

func (testHandler) Handle(ctx context.Context, _ wire.RequestInfo, h wire.Header, req kmsg.Request) Reply {
	if h.Key == 16 {
		panic("boom")
	}
	return func() (kmsg.Response, error) {
		time.Sleep(time.Duration(20-h.CorrelationID) * time.Millisecond)
		r := req.ResponseKind().(*kmsg.MetadataResponse)
		r.ControllerID = h.CorrelationID
		return r, nil
	}
}

func start(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(Config{MaxRequestBytes: 1 << 20}, testHandler{})
	go s.Serve(ln)
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	return ln.Addr().String()
}

// frame is req at version as request corr, with a null client ID.
func frame(version int16, corr int32, req kmsg.Request) []byte {
	req.SetVersion(version)
	return rawreq.Frame(req, corr, nil)
}

// TestResponsesInRequestOrder: replies that finish out of order are still
// written in request order.
func TestResponsesInRequestOrder(t *testing.T) {
	t.Parallel()
	c, err := net.Dial("tcp", start(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var out []byte
	for i := int32(1); i <= 10; i++ {
		out = append(out, frame(1, i, kmsg.NewPtrMetadataRequest())...)
	}
	c.Write(out)
	for i := int32(1); i <= 10; i++ {
		var size [4]byte
		if _, err := io.ReadFull(c, size[:]); err != nil {
			t.Fatal(err)
		}
		b := make([]byte, binary.BigEndian.Uint32(size[:]))
		io.ReadFull(c, b)
		if got := int32(binary.BigEndian.Uint32(b)); got != i {
			t.Fatalf("response %d has correlation id %d", i, got)
		}
	}
}

// TestPanicClosesOnlyThatConnection: a handler panic closes its connection;
// another connection is still served.
func TestPanicClosesOnlyThatConnection(t *testing.T) {
	t.Parallel()
	addr := start(t)
	bad, _ := net.Dial("tcp", addr)
	defer bad.Close()
	bad.Write(frame(0, 1, kmsg.NewPtrListGroupsRequest()))
	bad.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := bad.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("panicking request: read %v, want EOF", err)
	}
	good, _ := net.Dial("tcp", addr)
	defer good.Close()
	good.Write(frame(1, 7, kmsg.NewPtrMetadataRequest()))
	good.SetReadDeadline(time.Now().Add(5 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(good, size[:]); err != nil {
		t.Fatalf("healthy connection after a panic elsewhere: %v", err)
	}
}

// TestIdleConnectionClosed: a connection that sends nothing (or half a
// frame) is closed after MaxIdle.
func TestIdleConnectionClosed(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(Config{MaxRequestBytes: 1 << 20, MaxIdle: 200 * time.Millisecond}, testHandler{})
	go s.Serve(ln)
	defer s.Shutdown(context.Background())
	c, _ := net.Dial("tcp", ln.Addr().String())
	defer c.Close()
	c.Write([]byte{0, 0, 0, 50, 0}) // half a frame, then silence
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("idle connection: read %v, want EOF (closed by the server)", err)
	}
}
