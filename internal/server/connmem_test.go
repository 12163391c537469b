package server_test

import (
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/kawatest"
	"github.com/kawa-broker/kawa/internal/kawatest/rawreq"
)

// idleConnBytesBound is what one idle connection may keep after it was
// answered ApiVersions and Metadata: its two goroutines' stacks (8 KiB each
// at least, grown by the handler's call depth) and its small structs. Before
// the read and write buffers were pooled it was ~150 KiB (a 64 KiB
// bufio.Reader and bufio.Writer each, held for the connection's life).
const idleConnBytesBound = 48 << 10

// TestIdleConnectionMemory opens conns raw connections to a real broker, each
// answered ApiVersions and Metadata and then left idle, and bounds the heap
// and stack bytes the broker process holds per connection (after GC, against
// the same measure before the connections opened). A connection that keeps
// a read buffer, a write buffer or a response buffer while idle exceeds it.
func TestIdleConnectionMemory(t *testing.T) {
	const conns = 200
	b := kawatest.NewBroker(t)
	b.CreateTopic("idle", 3, nil)

	open := make([]net.Conn, 0, conns)
	defer func() {
		for _, c := range open {
			c.Close()
		}
	}()
	roundTrip := func(c net.Conn, corr int32, req kmsg.Request, resp kmsg.Response) {
		t.Helper()
		_ = c.SetDeadline(time.Now().Add(time.Minute))
		if _, err := c.Write(rawreq.Frame(req, corr, nil)); err != nil {
			t.Fatal(err)
		}
		resp.SetVersion(req.GetVersion())
		if err := rawreq.ReadResponse(c, corr, resp); err != nil {
			t.Fatal(err)
		}
	}
	dial := func() {
		c, err := net.Dial("tcp", b.Addr)
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, c)
		av := kmsg.NewPtrApiVersionsRequest()
		av.SetVersion(3)
		av.ClientSoftwareName, av.ClientSoftwareVersion = "kawa-test", "1"
		roundTrip(c, 1, av, kmsg.NewPtrApiVersionsResponse())
		md := kmsg.NewPtrMetadataRequest()
		md.SetVersion(12)
		topic := "idle"
		md.Topics = []kmsg.MetadataRequestTopic{{Topic: &topic}}
		mr := kmsg.NewPtrMetadataResponse()
		roundTrip(c, 2, md, mr)
		if len(mr.Topics) != 1 || mr.Topics[0].ErrorCode != 0 || len(mr.Topics[0].Partitions) != 3 {
			t.Fatalf("metadata: %+v", mr.Topics)
		}
	}
	dial() // the first connection warms up what every connection shares (tables, pools)
	before := heldBytes()
	for len(open) < conns+1 {
		dial()
	}
	after := heldBytes()
	per := (int64(after) - int64(before)) / conns
	t.Logf("%d idle connections: %d bytes held each (heap in use + stacks, after GC)", conns, per)
	if per > idleConnBytesBound {
		t.Errorf("an idle connection holds %d bytes, want at most %d", per, idleConnBytesBound)
	}
}

// heldBytes is the process's live heap and goroutine stacks after a GC.
func heldBytes() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse + ms.StackInuse
}
