package wire

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParseRequest checks that ParseRequest never panics, that every error
// wraps one of the package's errors, and that an accepted request has the
// header's version and re-encodes into a body that parses again to the same
// bytes (kmsg's encoding is canonical once decoded).
func FuzzParseRequest(f *testing.F) {
	f.Fuzz(func(t *testing.T, frame []byte) {
		h, req, err := ParseRequest(frame)
		if err != nil {
			if req != nil {
				t.Fatal("request returned with an error")
			}
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrUnknownKey) && !errors.Is(err, ErrUnsupportedVersion) {
				t.Fatalf("unclassified error %v", err)
			}
			return
		}
		if req.Key() != h.Key || req.GetVersion() != h.Version {
			t.Fatalf("request %d v%d, header %+v", req.Key(), req.GetVersion(), h)
		}
		body := req.AppendTo(nil)
		again := append(header(h.Key, h.Version, h.CorrelationID, "", nil), flexTags(req.IsFlexible())...)
		if h.Key == keyControlledShutdown && h.Version == 0 {
			again = again[:8] // header v0: no client_id
		}
		_, req2, err := ParseRequest(append(again, body...))
		if err != nil {
			t.Fatalf("re-encoded request does not parse: %v", err)
		}
		if !bytes.Equal(req2.AppendTo(nil), body) {
			t.Fatal("re-encoding is not stable")
		}
	})
}

func flexTags(flexible bool) []byte {
	if flexible {
		return []byte{0}
	}
	return nil
}

// FuzzReadFrame checks that ReadFrame never panics, never returns more than
// max bytes, and that a returned frame is exactly the declared size.
func FuzzReadFrame(f *testing.F) {
	f.Fuzz(func(t *testing.T, stream []byte, max int32) {
		r := bytes.NewReader(stream)
		for {
			at := len(stream) - r.Len() + 4 // where this frame's body starts
			frame, err := ReadFrame(r, max)
			if err != nil {
				if errors.Is(err, ErrFrameTooLarge) || err == io.EOF || err == io.ErrUnexpectedEOF {
					return
				}
				t.Fatalf("unexpected error %v", err)
			}
			if len(frame) > int(max) {
				t.Fatalf("frame of %d bytes over max %d", len(frame), max)
			}
			// Frames come from the pool unzeroed: each must hold exactly its
			// stream bytes, also after earlier frames were given back.
			if !bytes.Equal(frame, stream[at:at+len(frame)]) {
				t.Fatalf("frame at %d does not hold the stream's bytes", at)
			}
			PutBuffer(frame)
		}
	})
}

var updateCorpus = flag.Bool("update-corpus", false, "rewrite the committed fuzz seed corpora under testdata/fuzz")

// TestSeedCorpus regenerates testdata/fuzz/Fuzz{ParseRequest,ReadFrame} with
// -update-corpus; without it, it checks the seeds are present.
func TestSeedCorpus(t *testing.T) {
	requests := requestSeeds()
	frames := map[string]string{}
	for name, frame := range requests {
		frames[name] = fmt.Sprintf("[]byte(%q)\nint32(%d)\n", sized(frame), 1<<20)
	}
	frames["over-max"] = fmt.Sprintf("[]byte(%q)\nint32(%d)\n", []byte{0, 0, 1, 0, 1, 2, 3}, 100)
	frames["negative"] = fmt.Sprintf("[]byte(%q)\nint32(%d)\n", []byte{0xff, 0xff, 0xff, 0xff}, 100)
	frames["torn"] = fmt.Sprintf("[]byte(%q)\nint32(%d)\n", []byte{0, 0, 0, 9, 1, 2}, 100)
	frames["two"] = fmt.Sprintf("[]byte(%q)\nint32(%d)\n", append(sized([]byte("ab")), sized(nil)...), 100)
	parse := map[string]string{}
	for name, frame := range requests {
		parse[name] = fmt.Sprintf("[]byte(%q)\n", frame)
	}
	for fuzz, seeds := range map[string]map[string]string{"FuzzParseRequest": parse, "FuzzReadFrame": frames} {
		dir := filepath.Join("testdata", "fuzz", fuzz)
		if !*updateCorpus {
			if ents, err := os.ReadDir(dir); err != nil || len(ents) < len(seeds) {
				t.Fatalf("%s: %d seeds (%v); run go test -run TestSeedCorpus -update-corpus", dir, len(ents), err)
			}
			continue
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, args := range seeds {
			if err := os.WriteFile(filepath.Join(dir, name), []byte("go test fuzz v1\n"+args), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// requestSeeds returns request frames (without size) of several keys and
// header versions, and broken ones.
func requestSeeds() map[string][]byte {
	id := "seed"
	tags := []byte{2, 0, 3, 'a', 'b', 'c', 0xac, 0x02, 0}
	meta12 := metadataRequest(12).AppendTo(nil)
	return map[string][]byte{
		"metadata-v0":          frameOf(metadataRequest(0), 1, &id),
		"metadata-v12":         frameOf(metadataRequest(12), 2, &id),
		"metadata-v12-tags":    append(header(3, 12, 3, "c", tags), meta12...),
		"produce-v3":           frameOf(produceRequest(3), 4, &id),
		"produce-v9":           frameOf(produceRequest(9), 5, nil),
		"apiversions-v0":       frameOf(apiVersionsRequest(0), 6, &id),
		"apiversions-v3":       frameOf(apiVersionsRequest(3), 7, &id),
		"apiversions-v999":     header(18, 999, 8, "c", nil),
		"controlledshutdown-0": {0, 7, 0, 0, 0, 0, 0, 42, 0, 0, 0, 4},
		"unknown-key":          header(9999, 0, 9, "c", nil),
		"truncated":            frameOf(metadataRequest(12), 10, &id)[:15],
		"empty":                {},
	}
}
