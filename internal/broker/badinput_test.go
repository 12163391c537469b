package broker_test

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/batch"
	"github.com/kawa-broker/kawa/internal/kawatest"
	"github.com/kawa-broker/kawa/internal/kawatest/rawreq"
)

// rawConn is a bare TCP connection speaking Kafka frames.
type rawConn struct {
	t  *testing.T
	c  net.Conn
	id int32
}

func dial(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c}
}

// frame encodes req as the next request on this connection, with client ID
// "test" (as clients do).
func (r *rawConn) frame(req kmsg.Request) []byte {
	r.id++
	id := "test"
	return rawreq.Frame(req, r.id, &id)
}

func (r *rawConn) write(b []byte) {
	r.t.Helper()
	if _, err := r.c.Write(b); err != nil {
		r.t.Fatal(err)
	}
}

// read reads one response frame into resp (header v0 or v1 by flexibility);
// a response to another request fails the test.
func (r *rawConn) read(resp kmsg.Response) error {
	_ = r.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	err := rawreq.ReadResponse(r.c, r.id, resp)
	if errors.Is(err, rawreq.ErrCorrelation) {
		r.t.Fatal(err)
	}
	return err
}

// closed reports whether the broker closed the connection.
func (r *rawConn) closed() bool {
	_ = r.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var b [1]byte
	_, err := r.c.Read(b[:])
	return errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || isReset(err)
}

func isReset(err error) bool {
	var ne *net.OpError
	return errors.As(err, &ne) && !ne.Timeout()
}

// healthy produces and fetches on a separate client, proving one bad
// connection does not disturb others.
func healthy(t *testing.T, k *kawatest.Broker, topic string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl := k.Client(kgo.DefaultProduceTopic(topic), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	res := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("ok")})
	if err := res.FirstErr(); err != nil {
		t.Fatalf("healthy produce: %v", err)
	}
	fs := cl.PollFetches(ctx)
	if fs.NumRecords() == 0 {
		t.Fatalf("healthy fetch got nothing: %v", fs.Errors())
	}
}

func TestBadInputClosesOnlyThatConnection(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	k.CreateTopic("good", 1, nil)

	t.Run("declared 2 GiB frame", func(t *testing.T) {
		c := dial(t, k.Addr)
		c.write([]byte{0x7f, 0xff, 0xff, 0xff, 0, 18})
		if !c.closed() {
			t.Fatal("connection with a 2 GiB declared size stayed open")
		}
		healthy(t, k, "good")
	})
	t.Run("negative frame size", func(t *testing.T) {
		c := dial(t, k.Addr)
		c.write([]byte{0xff, 0xff, 0xff, 0xf0})
		if !c.closed() {
			t.Fatal("connection with a negative size stayed open")
		}
	})
	t.Run("truncated frame then close", func(t *testing.T) {
		c := dial(t, k.Addr)
		f := c.frame(kmsg.NewPtrMetadataRequest())
		c.write(f[:len(f)-3])
		c.c.(*net.TCPConn).CloseWrite()
		if !c.closed() {
			t.Fatal("truncated frame: connection stayed open")
		}
		healthy(t, k, "good")
	})
	t.Run("garbage body", func(t *testing.T) {
		c := dial(t, k.Addr)
		c.write([]byte{0, 0, 0, 6, 0, 3, 0, 9, 0xff, 0xff})
		if !c.closed() {
			t.Fatal("garbage request: connection stayed open")
		}
	})
	t.Run("unknown api key", func(t *testing.T) {
		c := dial(t, k.Addr)
		c.write([]byte{0, 0, 0, 10, 0x27, 0x0f, 0, 0, 0, 0, 0, 1, 0xff, 0xff})
		if !c.closed() {
			t.Fatal("unknown api key: connection stayed open")
		}
	})
	t.Run("unsupported produce version", func(t *testing.T) {
		c := dial(t, k.Addr)
		req := kmsg.NewPtrProduceRequest()
		req.Version = 2 // message format v0/v1 era: not supported
		c.write(c.frame(req))
		if !c.closed() {
			t.Fatal("produce v2: connection stayed open")
		}
	})
	t.Run("apiversions too new", func(t *testing.T) {
		c := dial(t, k.Addr)
		var body []byte
		body = binary.BigEndian.AppendUint16(body, 18)
		body = binary.BigEndian.AppendUint16(body, 99)
		body = binary.BigEndian.AppendUint32(body, 1)
		body = append(body, 0xff, 0xff, 0) // null client id, tagged fields
		body = append(body, 1, 1, 0)       // compact strings, empty tags
		c.id = 1
		c.write(append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...))
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.Version = 0
		if err := c.read(resp); err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode != kerr.UnsupportedVersion.Code || len(resp.ApiKeys) == 0 {
			t.Fatalf("ApiVersions v99: error %d with %d keys; want UNSUPPORTED_VERSION and the table", resp.ErrorCode, len(resp.ApiKeys))
		}
	})
	t.Run("wrong crc", func(t *testing.T) {
		c := dial(t, k.Addr)
		req := kmsg.NewPtrProduceRequest()
		req.Version = 7
		req.Acks = -1
		req.TimeoutMillis = 5000
		rb := rawBatch([]byte("hello"))
		rb[len(rb)-1] ^= 0xff // corrupt the payload after the CRC was computed
		req.Topics = []kmsg.ProduceRequestTopic{{Topic: "good", Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: rb}}}}
		c.write(c.frame(req))
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		if err := c.read(resp); err != nil {
			t.Fatal(err)
		}
		if got := resp.Topics[0].Partitions[0].ErrorCode; got != kerr.CorruptMessage.Code {
			t.Fatalf("wrong CRC: error %d, want CORRUPT_MESSAGE", got)
		}
		// The same connection keeps working.
		req.Topics[0].Partitions[0].Records = rawBatch([]byte("hello"))
		c.write(c.frame(req))
		if err := c.read(resp); err != nil {
			t.Fatal(err)
		}
		if got := resp.Topics[0].Partitions[0].ErrorCode; got != 0 {
			t.Fatalf("valid batch after a corrupt one: error %d", got)
		}
		healthy(t, k, "good")
	})
	t.Run("unknown partition", func(t *testing.T) {
		c := dial(t, k.Addr)
		req := kmsg.NewPtrProduceRequest()
		req.Version = 7
		req.Acks = 1
		req.TimeoutMillis = 5000
		req.Topics = []kmsg.ProduceRequestTopic{{Topic: "good", Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 7, Records: rawBatch([]byte("x"))}}}}
		c.write(c.frame(req))
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		if err := c.read(resp); err != nil {
			t.Fatal(err)
		}
		if got := resp.Topics[0].Partitions[0].ErrorCode; got != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("unknown partition: error %d, want UNKNOWN_TOPIC_OR_PARTITION", got)
		}
	})
}

// rawBatch builds a one-record uncompressed v2 batch with a valid CRC.
func rawBatch(value []byte) []byte {
	ts := time.Now().UnixMilli()
	return batch.Encode(batch.Header{FirstTimestamp: ts, MaxTimestamp: ts, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1},
		[]kmsg.Record{{Value: value}})
}

// TestProduceRecordsShape: Kafka's ProduceRequest.validateRecords answers
// INVALID_RECORD for empty records, two batches, or a magic other than 2.
func TestProduceRecordsShape(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	k.CreateTopic("shape", 1, nil)
	one := rawBatch([]byte("a"))
	magic1 := append([]byte(nil), one...)
	magic1[16] = 1
	for name, records := range map[string][]byte{
		"empty":       {},
		"two batches": append(append([]byte(nil), one...), rawBatch([]byte("b"))...),
		"magic 1":     magic1,
	} {
		c := dial(t, k.Addr)
		req := kmsg.NewPtrProduceRequest()
		req.Version = 9
		req.Acks = 1
		req.TimeoutMillis = 5000
		req.Topics = []kmsg.ProduceRequestTopic{{Topic: "shape", Partitions: []kmsg.ProduceRequestTopicPartition{{Records: records}}}}
		c.write(c.frame(req))
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		if err := c.read(resp); err != nil {
			t.Fatal(err)
		}
		if got := resp.Topics[0].Partitions[0].ErrorCode; got != kerr.InvalidRecord.Code {
			t.Errorf("%s: error %d, want INVALID_RECORD (87)", name, got)
		}
	}
}
