package server

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/kawatest/rawreq"
	"github.com/kawa-broker/kawa/internal/wire"
)

// frameHandler releases Produce frames (FrameReleaser) and keeps SyncGroup's
// assignment bytes until its Reply runs, after every Produce was handled.
type frameHandler struct {
	produces int
	allRead  chan struct{} // closed when the last Produce was handled
	bad      chan string   // what a handler saw wrong
}

func (*frameHandler) Supports(key, version int16) bool { return true }

func (*frameHandler) Unsupported(wire.Header) kmsg.Response { return kmsg.NewPtrApiVersionsResponse() }

func (*frameHandler) ReleasesFrame(key int16) bool { return key == kmsg.Produce.Int16() }

// pattern is n bytes that differ for every correlation ID and offset.
func pattern(corr int32, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(int(corr)*7 + i)
	}
	return b
}

func (f *frameHandler) Handle(_ context.Context, _ wire.RequestInfo, h wire.Header, req kmsg.Request) Reply {
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		// Reader goroutine only: f.produces needs no lock.
		if got := r.Topics[0].Partitions[0].Records; !bytes.Equal(got, pattern(h.CorrelationID, len(got))) {
			f.bad <- fmt.Sprintf("produce %d: records are not its own bytes", h.CorrelationID)
		}
		if f.produces++; f.produces == 20 {
			close(f.allRead)
		}
		return func() (kmsg.Response, error) { return r.ResponseKind(), nil }
	case *kmsg.SyncGroupRequest:
		kept := r.GroupAssignment[0].MemberAssignment
		return func() (kmsg.Response, error) {
			<-f.allRead // the 20 Produce frames were read (and released) meanwhile
			if !bytes.Equal(kept, pattern(h.CorrelationID, len(kept))) {
				f.bad <- "SyncGroup's assignment changed under its Reply: its frame was reused"
			}
			return r.ResponseKind(), nil
		}
	}
	return nil
}

// TestReleasedFramesAreReusedOthersKept: Produce frames go back to the pool
// once handled, so each later frame may land in a reused, unzeroed buffer; a
// handler still sees exactly its request's bytes, and a request whose key is
// not released (SyncGroup, whose Reply reads its bytes later) keeps its frame
// while 20 Produce frames of the same size class come and go.
func TestReleasedFramesAreReusedOthersKept(t *testing.T) {
	t.Parallel()
	h := &frameHandler{allRead: make(chan struct{}), bad: make(chan string, 32)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(Config{MaxRequestBytes: 4 << 20}, h) // the connection budget (MaxRequestBytes) holds all 21 frames while SyncGroup waits
	go s.Serve(ln)
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second)) // a hung server, not a speed limit

	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Group, sync.MemberID = "g", "m"
	a := kmsg.NewSyncGroupRequestGroupAssignment()
	a.MemberID, a.MemberAssignment = "m", pattern(1, 60<<10)
	sync.GroupAssignment = append(sync.GroupAssignment, a)
	out := frame(3, 1, sync)
	for corr := int32(2); corr <= 21; corr++ {
		p := kmsg.NewPtrProduceRequest()
		p.Acks = 1
		tp := kmsg.NewProduceRequestTopic()
		tp.Topic = "t"
		pp := kmsg.NewProduceRequestTopicPartition()
		pp.Records = pattern(corr, 60<<10-int(corr)*100) // sizes differ: stale tails of longer frames must not show
		tp.Partitions = append(tp.Partitions, pp)
		p.Topics = append(p.Topics, tp)
		out = append(out, frame(7, corr, p)...)
	}
	if _, err := c.Write(out); err != nil {
		t.Fatal(err)
	}
	for corr := int32(1); corr <= 21; corr++ {
		got, _, err := rawreq.ReadFrame(c)
		if err != nil || got != corr {
			t.Fatalf("response %d: correlation %d, %v", corr, got, err)
		}
	}
	close(h.bad)
	for msg := range h.bad {
		t.Error(msg)
	}
}
