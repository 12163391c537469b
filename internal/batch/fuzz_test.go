package batch

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// FuzzValidate checks that Validate, Records, ParseControl and CheckCRC never
// panic and return kerr-wrapped errors, and that when Validate accepts b:
// CheckCRC agrees, Records decodes exactly NumRecords records, and Iterate
// consumes b whole as one batch. Random bytes rarely carry a matching CRC,
// so each input is also tried with its length field and CRC fixed up, which
// lets the fuzzer reach decompression and record parsing.
func FuzzValidate(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		checkValidate(t, b)
		if len(b) >= HeaderSize {
			checkValidate(t, reseal(append([]byte(nil), b...)))
		}
	})
}

func checkValidate(t *testing.T, b []byte) {
	h, err := Validate(b)
	recs, recErr := Records(b)
	_, _, ctlErr := ParseControl(b)
	crcErr := CheckCRC(b)
	for _, e := range []error{err, recErr, ctlErr, crcErr} {
		if e != nil && !errors.As(e, new(*kerr.Error)) {
			t.Fatalf("error %v wraps no kerr.Error", e)
		}
	}
	if err != nil {
		return
	}
	if crcErr != nil {
		t.Fatalf("Validate accepted, CheckCRC says %v", crcErr)
	}
	if recErr != nil || len(recs) != int(h.NumRecords) {
		t.Fatalf("Validate accepted %d records, Records gave %d, %v", h.NumRecords, len(recs), recErr)
	}
	calls := 0
	valid, iterErr := Iterate(b, func(ih Header, one []byte) bool {
		calls++
		if ih != h || len(one) != len(b) {
			t.Fatalf("Iterate header %+v, Validate %+v", ih, h)
		}
		return true
	})
	if iterErr != nil || valid != len(b) || calls != 1 {
		t.Fatalf("Iterate over a valid batch = %d, %v, %d calls", valid, iterErr, calls)
	}
}

// FuzzIterate checks that Iterate never panics, that validBytes is within b
// and covers whole batches each passing CheckCRC, that a nil error means b
// was consumed whole, and that iterating the valid prefix again stops
// cleanly at its end with the same batches.
func FuzzIterate(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		var sizes []int
		valid, err := Iterate(b, func(h Header, one []byte) bool {
			if crcErr := CheckCRC(one); crcErr != nil {
				t.Fatalf("Iterate passed a batch failing CheckCRC: %v", crcErr)
			}
			sizes = append(sizes, len(one))
			return true
		})
		if valid < 0 || valid > len(b) {
			t.Fatalf("validBytes %d outside [0, %d]", valid, len(b))
		}
		if err == nil && valid != len(b) {
			t.Fatalf("nil error but only %d of %d bytes valid", valid, len(b))
		}
		if err != nil && !errors.As(err, new(*kerr.Error)) {
			t.Fatalf("error %v wraps no kerr.Error", err)
		}
		if err != nil && valid == len(b) {
			t.Fatalf("error %v with all %d bytes valid", err, valid)
		}
		n := 0
		again, err := Iterate(b[:valid], func(Header, []byte) bool {
			if n >= len(sizes) {
				t.Fatal("second pass found more batches")
			}
			n++
			return true
		})
		if err != nil || again != valid || n != len(sizes) {
			t.Fatalf("re-iterating the valid prefix: %d, %v, %d batches; want %d, nil, %d", again, err, n, valid, len(sizes))
		}
	})
}

var updateCorpus = flag.Bool("update-corpus", false, "rewrite the committed fuzz seed corpora under testdata/fuzz")

// TestSeedCorpus regenerates testdata/fuzz/Fuzz{Validate,Iterate} with
// -update-corpus; without it, it checks the seeds are present.
func TestSeedCorpus(t *testing.T) {
	seeds := seedBatches(t)
	for _, fuzz := range []string{"FuzzValidate", "FuzzIterate"} {
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
		for name, b := range seeds {
			data := fmt.Appendf(nil, "go test fuzz v1\n[]byte(%q)\n", b)
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// seedBatches returns named seeds: valid batches of every codec and framing,
// a control batch, a log of several batches, and broken variants.
func seedBatches(t *testing.T) map[string][]byte {
	recs := testRecords(3)
	plain := Encode(testHeader(), recs)
	seeds := map[string][]byte{
		"plain":   plain,
		"control": NewControl(7, 1, true, 4, 1_700_000_000_000),
		"xerial":  withRecordsSection(plain, CodecSnappy, xerialForTest(plain[HeaderSize:], 16)),
		"empty":   {},
	}
	for name, codec := range map[string]int8{"gzip": CodecGzip, "snappy": CodecSnappy, "lz4": CodecLz4, "zstd": CodecZstd} {
		seeds[name] = withRecordsSection(plain, codec, compressForTest(t, codec, plain[HeaderSize:]))
	}
	log, _ := segment()
	seeds["log"] = log
	seeds["log-torn"] = log[:len(log)-7]
	seeds["truncated"] = plain[:len(plain)-1]
	seeds["header-only"] = plain[:HeaderSize]
	badCRC := append([]byte(nil), plain...)
	badCRC[len(badCRC)-1] ^= 0x55
	seeds["bad-crc"] = badCRC
	badCount := append([]byte(nil), seeds["zstd"]...)
	badCount[offNumRecords+3] = 9
	seeds["zstd-bad-count"] = reseal(badCount)
	return seeds
}
