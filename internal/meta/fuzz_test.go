package meta

import (
	"encoding/json"
	"maps"
	"path/filepath"
	"testing"

	"github.com/kawa-broker/kawa/internal/vfs"
)

// FuzzOpen feeds arbitrary catalog files to Open, which the broker runs on
// start. With wrap, data is taken as the topics JSON and wrapped in a file
// with the right version and CRC, so the fuzzer reaches past the checksum.
// Open must not panic; a catalog it accepts must survive a save (Create
// rewrites the file) and reopen with the same topics.
func FuzzOpen(f *testing.F) {
	f.Add([]byte(`[{"name":"a","id":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16],"partitions":3,"configs":{"retention.ms":"1000"}}]`), true)
	f.Add([]byte(`[{"name":"__consumer_offsets","partitions":1,"internal":true},{"name":"b","partitions":1}]`), true)
	f.Add([]byte(`{"version":1,"topics":[],"crc":0}`), false)
	f.Add([]byte(`{"version":2,"topics":null,"crc":0}`), false)
	f.Fuzz(func(t *testing.T, data []byte, wrap bool) {
		fsys := vfs.NewMem()
		if wrap {
			var ts []Topic
			if json.Unmarshal(data, &ts) != nil {
				return
			}
			var err error
			if data, err = json.Marshal(file{Version: formatVersion, Topics: ts, CRC: crcOf(ts)}); err != nil {
				t.Fatal(err)
			}
		}
		if err := fsys.MkdirAll("m", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := vfs.WriteFileAtomic(fsys, filepath.Join("m", fileName), data); err != nil {
			t.Fatal(err)
		}
		c, err := Open(fsys, "m")
		if err != nil {
			return
		}
		before := c.List()
		const probe = "\x00fuzz-probe"
		if _, ok := c.Get(probe); ok {
			return
		}
		if _, err := c.Create(Topic{Name: probe, Partitions: 1}); err != nil {
			t.Fatalf("create: %v", err)
		}
		if err := c.Delete(probe); err != nil {
			t.Fatalf("delete: %v", err)
		}
		c2, err := Open(fsys, "m")
		if err != nil {
			t.Fatalf("reopen after save: %v", err)
		}
		after := c2.List()
		if len(after) != len(before) {
			t.Fatalf("reopened %d topics, had %d", len(after), len(before))
		}
		for i := range before {
			a, b := before[i], after[i]
			if a.Name != b.Name || a.ID != b.ID || a.Partitions != b.Partitions || a.Internal != b.Internal || !maps.Equal(a.Configs, b.Configs) {
				t.Fatalf("topic %d: %+v reopened as %+v", i, a, b)
			}
		}
	})
}
