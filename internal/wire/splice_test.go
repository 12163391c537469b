package wire

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// spliceFixture is a file of known bytes and a Fetch response of three partitions: the first and third with
// their records in the file (stand-ins), the second with records in memory.
type spliceFixture struct {
	f       *os.File
	content []byte
}

func newSpliceFixture(t *testing.T) spliceFixture {
	t.Helper()
	content := make([]byte, 300<<10) // over 16 KiB, so the flexible length prefix is 3 bytes, not 1
	for i := range content {
		content[i] = byte(i * 7)
	}
	name := filepath.Join(t.TempDir(), "seg.log")
	if err := os.WriteFile(name, content, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return spliceFixture{f: f, content: content}
}

// materialize writes the pieces as the server's copy path does: bytes as they are, file ranges read in.
func materialize(t *testing.T, pieces []Piece) []byte {
	t.Helper()
	var out bytes.Buffer
	for _, p := range pieces {
		if p.File == nil {
			out.Write(p.Bytes)
			continue
		}
		if n, err := io.Copy(&out, io.NewSectionReader(p.File, p.Pos, p.Size)); err != nil || n != p.Size {
			t.Fatalf("read range: %d of %d bytes, %v", n, p.Size, err)
		}
	}
	return out.Bytes()
}

// TestSpliceFetchResponse: a Fetch response encoded by kmsg with stand-ins and spliced decodes (with kmsg) to the
// same response with the file bytes in place, at a non-flexible (v11) and a flexible (v12) version, and the
// frame size prefix counts the real bytes.
func TestSpliceFetchResponse(t *testing.T) {
	t.Parallel()
	fx := newSpliceFixture(t)
	for _, version := range []int16{4, 11, 12} {
		s := NewSplices()
		resp := kmsg.NewPtrFetchResponse()
		st := kmsg.NewFetchResponseTopic()
		st.Topic = "t"
		inMemory := []byte("records copied into the frame")
		want := [][]byte{fx.content[100 : 100+200<<10], inMemory, append(append([]byte{}, fx.content[:10]...), fx.content[1000:1000+70000]...)}
		for i := range 3 {
			sp := kmsg.NewFetchResponseTopicPartition()
			sp.Partition = int32(i)
			sp.HighWatermark = int64(1000 + i)
			switch i {
			case 0:
				sp.RecordBatches = s.Placeholder([]FileRange{{File: fx.f, Pos: 100, Size: 200 << 10}})
			case 1:
				sp.RecordBatches = inMemory
			case 2:
				sp.RecordBatches = s.Placeholder([]FileRange{{File: fx.f, Pos: 0, Size: 10}, {File: fx.f, Pos: 1000, Size: 70000}})
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
		frame := AppendResponse(nil, Header{Key: 1, Version: version, CorrelationID: 42}, resp)
		pieces, err := s.Splice(frame, resp.IsFlexible())
		if err != nil {
			t.Fatalf("v%d: %v", version, err)
		}
		out := materialize(t, pieces)
		if size := int(uint32(out[0])<<24 | uint32(out[1])<<16 | uint32(out[2])<<8 | uint32(out[3])); size != len(out)-4 {
			t.Fatalf("v%d: size prefix %d, frame holds %d bytes after it", version, size, len(out)-4)
		}
		got := kmsg.NewPtrFetchResponse()
		corr, err := ParseResponse(out[4:], version, got)
		if err != nil || corr != 42 {
			t.Fatalf("v%d: parse spliced frame: corr %d, %v", version, corr, err)
		}
		for i, p := range got.Topics[0].Partitions {
			if !bytes.Equal(p.RecordBatches, want[i]) || p.HighWatermark != int64(1000+i) {
				t.Fatalf("v%d partition %d: %d record bytes (want %d), hw %d", version, i, len(p.RecordBatches), len(want[i]), p.HighWatermark)
			}
		}
	}
}

// TestSpliceDroppedStandIn: a stand-in whose field was left out of the response (an incremental fetch drops a
// partition) is skipped; the others are still spliced.
func TestSpliceDroppedStandIn(t *testing.T) {
	t.Parallel()
	fx := newSpliceFixture(t)
	s := NewSplices()
	s.Placeholder([]FileRange{{File: fx.f, Pos: 0, Size: 5}}) // its partition is not in the response
	resp := kmsg.NewPtrFetchResponse()
	st := kmsg.NewFetchResponseTopic()
	st.Topic = "t"
	sp := kmsg.NewFetchResponseTopicPartition()
	sp.RecordBatches = s.Placeholder([]FileRange{{File: fx.f, Pos: 5, Size: 50}})
	st.Partitions = append(st.Partitions, sp)
	resp.Topics = append(resp.Topics, st)
	frame := AppendResponse(nil, Header{Key: 1, Version: 12, CorrelationID: 1}, resp)
	pieces, err := s.Splice(frame, true)
	if err != nil {
		t.Fatal(err)
	}
	got := kmsg.NewPtrFetchResponse()
	if _, err := ParseResponse(materialize(t, pieces)[4:], 12, got); err != nil {
		t.Fatal(err)
	}
	if rb := got.Topics[0].Partitions[0].RecordBatches; !bytes.Equal(rb, fx.content[5:55]) {
		t.Fatalf("records %x, want %x", rb, fx.content[5:55])
	}
}

// TestSpliceRefusesBrokenFrames: a stand-in moved out of its field (no length prefix before it) or repeated is
// refused, so a frame that would misstate its lengths is never sent.
func TestSpliceRefusesBrokenFrames(t *testing.T) {
	t.Parallel()
	fx := newSpliceFixture(t)
	s := NewSplices()
	ph := s.Placeholder([]FileRange{{File: fx.f, Pos: 0, Size: 5}})
	for name, body := range map[string][]byte{
		"no prefix": append([]byte{0, 0, 0, 0, 1, 2, 3}, ph...),
		"twice":     append(append([]byte{0, 0, 0, 0, 0, 0, 0, 20}, ph...), append([]byte{0, 0, 0, 20}, ph...)...),
		"cut off":   append([]byte{0, 0, 0, 0, 0, 0, 0, 20}, ph[:18]...),
	} {
		if _, err := s.Splice(body, false); err == nil {
			t.Errorf("%s: spliced, want an error", name)
		}
	}
}
