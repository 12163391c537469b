package cli

import (
	"reflect"
	"strings"
	"testing"
)

// TestParseProperties: java.util.Properties.load's syntax as Kafka's
// server.properties uses it, with the line each entry starts on.
func TestParseProperties(t *testing.T) {
	in := strings.Join([]string{
		"# comment",
		"! also a comment",
		"",
		"a=1",
		"  b : two words ",
		"c three",
		"list=x,\\",
		"     y,\\",
		"  z",
		`path=C:\\kafka\\logs`,
		`esc=tab\there\u0041`,
		`key\=with\:seps=v`,
		"empty=",
		"bare",
		"a=again",
		"cr=1\rnext=2",
		"trailing=\\\\",
	}, "\n")
	got, err := ParseProperties([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []Property{
		{"a", "again", 15},
		{"b", "two words ", 5},
		{"c", "three", 6},
		{"list", "x,y,z", 7},
		{"path", `C:\kafka\logs`, 10},
		{"esc", "tab\thereA", 11},
		{"key=with:seps", "v", 12},
		{"empty", "", 13},
		{"bare", "", 14},
		{"cr", "1", 16},
		{"next", "2", 17},
		{"trailing", `\`, 18},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got\n%+v\nwant\n%+v", got, want)
	}
	crlf, err := ParseProperties([]byte("x=1\r\ny=2\r\n"))
	if err != nil || !reflect.DeepEqual(crlf, []Property{{"x", "1", 1}, {"y", "2", 2}}) {
		t.Fatalf("CRLF file: %+v, %v", crlf, err)
	}
	for _, bad := range []string{"=value", `k=\u12`, `k=\uZZZZ`} {
		if _, err := ParseProperties([]byte("ok=1\n" + bad)); err == nil || !strings.Contains(err.Error(), "line 2") {
			t.Errorf("%q: err %v, want an error naming line 2", bad, err)
		}
	}
}
