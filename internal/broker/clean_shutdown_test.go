package broker_test

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kawa-broker/kawa/internal/kawatest"
	"github.com/kawa-broker/kawa/internal/vfs"
)

// TestCrashAfterCleanRestartStillRecovers: a clean shutdown leaves the
// clean-shutdown marker, the next start removes it before serving, so a power
// cut later (here with a torn batch at the end of the active segment) is
// recovered as a crash: the torn tail is cut back to the last whole batch,
// every record keeps its offset and writes continue at the next offset.
func TestCrashAfterCleanRestartStillRecovers(t *testing.T) {
	t.Parallel()
	mem := vfs.NewMem()
	k := kawatest.NewBrokerOn(t, mem)
	k.CreateTopic("cm", 1, nil)
	want := produceN(t, k, "cm", 20)
	k.Close()
	marker := filepath.Join(k.Dir, ".kawa_cleanshutdown")
	if _, err := mem.Stat(marker); err != nil {
		t.Fatalf("after a clean shutdown: %v, want the clean-shutdown marker", err)
	}
	k2 := k.Restart()
	if _, err := k2.FS.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("marker after restart: %v, want it removed", err)
	}
	for off, v := range produceN(t, k2, "cm", 10) {
		want[off] = v
	}
	seg := filepath.Join(k.Dir, "cm-0", "00000000000000000000.log")
	validSize := -1
	k3 := k2.PowerCutKeeping(func(name string, synced, current []byte) []byte {
		if name != seg || !strings.HasSuffix(name, ".log") {
			return synced
		}
		// The batches, without the preallocated zeros after them, then a
		// torn copy of earlier batches: a valid-looking header, cut short.
		batches := synced[:batchesEnd(synced)]
		validSize = len(batches)
		return append(slices.Clone(batches), batches[:len(batches)/3]...)
	})
	if validSize <= 0 {
		t.Fatalf("no durable bytes kept for %s", seg)
	}
	if st, err := k3.FS.Stat(seg); err != nil || st.Size() != int64(validSize) {
		t.Fatalf("segment after recovery: %v (err %v), want exactly %d bytes (the last whole batch)", st, err, validSize)
	}
	consumeExpect(t, k3, "cm", want)
	if again := produceN(t, k3, "cm", 1); again[30] == "" {
		t.Fatalf("write after recovery landed at %v, want offset 30", again)
	}
}

// batchesEnd walks the record batches at the start of a segment (base offset,
// then batch length, KIP-98's v2 layout) and returns where the first one that
// is not there (zeros, or the end) begins.
func batchesEnd(seg []byte) int {
	pos := 0
	for pos+12 <= len(seg) {
		n := int(binary.BigEndian.Uint32(seg[pos+8:]))
		if n == 0 || pos+12+n > len(seg) {
			break
		}
		pos += 12 + n
	}
	return pos
}
