package broker

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// apiHeader matches the first line of a handler's doc comment, e.g.
// "// Produce (key 0), versions 3-12." or "// OffsetDelete (key 47), version 0.".
var apiHeader = regexp.MustCompile(`(?m)^// (\w+) \(key (\d+)\), versions? (\d+)(?:-(\d+))?\b`)

// kafkaNames maps the kmsg names that differ from Kafka's (which the docs
// use) beyond letter case.
var kafkaNames = map[string]string{"AlterPartitionAssignments": "AlterPartitionReassignments"}

type docRange struct {
	name, file string
	key        int16
	min, max   int16
}

func apiHeaders(t *testing.T, dir string) []docRange {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var out []docRange
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range apiHeader.FindAllStringSubmatch(string(src), -1) {
			num := func(s string) int16 {
				n, err := strconv.ParseInt(s, 10, 16)
				if err != nil {
					t.Fatalf("%s: %q: %v", f, m[0], err)
				}
				return int16(n)
			}
			d := docRange{name: m[1], file: f, key: num(m[2]), min: num(m[3])}
			d.max = d.min
			if m[4] != "" {
				d.max = num(m[4])
			}
			out = append(out, d)
		}
	}
	return out
}

// snake turns an API name into its file name: InitProducerId -> init_producer_id.go.
func snake(name string) string {
	var b strings.Builder
	for i, r := range name {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String() + ".go"
}

// TestAPITable checks the handler table against itself and the docs: keys
// strictly ascending, and every handler's documented version range (in the
// broker file named after the API, or on the group coordinator's method)
// equal to what ApiVersions advertises.
func TestAPITable(t *testing.T) {
	for i := 1; i < len(apis); i++ {
		if apis[i-1].key >= apis[i].key {
			t.Errorf("apis not sorted by key: %s (%d) before %s (%d)", apis[i-1].key.Name(), apis[i-1].key, apis[i].key.Name(), apis[i].key)
		}
	}
	for _, a := range apis {
		if a.min > a.max || a.min < 0 || a.handle == nil {
			t.Errorf("%s: bad entry min %d max %d", a.key.Name(), a.min, a.max)
		}
		if got, ok := lookup(a.key.Int16()); !ok || got.key != a.key {
			t.Errorf("lookup(%d) = %v, %v", a.key, got.key, ok)
		}
	}

	documented := map[kmsg.Key]int{}
	check := func(d docRange, inBroker bool) {
		a, ok := lookup(d.key)
		if !ok {
			t.Errorf("%s documents %s (key %d), which is not in the table", d.file, d.name, d.key)
			return
		}
		documented[a.key]++
		want := a.key.Name()
		if k, ok := kafkaNames[want]; ok {
			want = k
		}
		if !strings.EqualFold(d.name, want) {
			t.Errorf("%s: key %d is %s, documented as %s", d.file, d.key, want, d.name)
		}
		if d.min != a.min || d.max != a.max {
			t.Errorf("%s: %s documents versions %d-%d; the table advertises %d-%d", d.file, d.name, d.min, d.max, a.min, a.max)
		}
		if inBroker && filepath.Base(d.file) != snake(d.name) {
			t.Errorf("%s is documented in %s; one file per API: %s", d.name, d.file, snake(d.name))
		}
	}
	for _, d := range apiHeaders(t, ".") {
		check(d, true)
	}
	for _, d := range apiHeaders(t, filepath.Join("..", "group")) {
		check(d, false)
	}
	for _, a := range apis {
		if documented[a.key] == 0 {
			t.Errorf("%s (key %d) has no documented version range", a.key.Name(), a.key)
		}
	}
}
