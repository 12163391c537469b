package proxy_test

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/kawatest"
	"github.com/kawa-broker/kawa/internal/proxy"
)

// setup starts a broker and a proxy in front of it.
func setup(t *testing.T) (*kawatest.Broker, *proxy.Proxy) {
	t.Helper()
	k := kawatest.NewBroker(t)
	p, err := proxy.New(k.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return k, p
}

// conn is a bare Kafka connection with a request header v1 (client ID
// "t"), enough for the non-flexible requests these tests send.
type conn struct {
	t *testing.T
	c net.Conn
}

func dial(t *testing.T, addr string) *conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &conn{t: t, c: c}
}

// send writes req (not flexible) with correlation ID corr.
func (c *conn) send(req kmsg.Request, corr int32) {
	c.t.Helper()
	var b []byte
	b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, 1)
	b = append(b, 't')
	b = req.AppendTo(b)
	if _, err := c.c.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)); err != nil {
		c.t.Fatal(err)
	}
}

// recv reads one response frame within wait and returns its correlation ID
// and body (after the v0 header); err is the read error, if any.
func (c *conn) recv(wait time.Duration) (int32, []byte, error) {
	_ = c.c.SetReadDeadline(time.Now().Add(wait))
	var size [4]byte
	if _, err := io.ReadFull(c.c, size[:]); err != nil {
		return 0, nil, err
	}
	b := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c.c, b); err != nil {
		return 0, nil, err
	}
	return int32(binary.BigEndian.Uint32(b)), b[4:], nil
}

// mustRecv is recv that fails the test on error and checks the correlation
// ID.
func (c *conn) mustRecv(want int32) []byte {
	c.t.Helper()
	corr, body, err := c.recv(10 * time.Second)
	if err != nil {
		c.t.Fatalf("waiting for response %d: %v", want, err)
	}
	if corr != want {
		c.t.Fatalf("response correlation ID %d, want %d", corr, want)
	}
	return body
}

// metadataV4 is a non-flexible Metadata request for no topics.
func metadataV4() *kmsg.MetadataRequest {
	r := kmsg.NewPtrMetadataRequest()
	r.Version = 4
	r.Topics = []kmsg.MetadataRequestTopic{}
	return r
}
