package raftnet

import (
	"maps"
	"strings"
	"testing"
)

func TestParseVoters(t *testing.T) {
	got, err := ParseVoters("1@10.0.0.1:9093, 2@host-b:9093,3@[::1]:19093")
	if err != nil {
		t.Fatal(err)
	}
	want := map[uint64]string{1: "10.0.0.1:9093", 2: "host-b:9093", 3: "[::1]:19093"}
	if !maps.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for in, wantErr := range map[string]string{
		"":                          "empty list",
		"1@a:1,":                    `"": want id@host:port`,
		"a:9093":                    `"a:9093": want id@host:port`,
		"0@a:9093":                  `node ID "0" is not a positive integer`,
		"x@a:9093":                  `node ID "x" is not a positive integer`,
		"1@a":                       `address "a": address a: missing port in address`,
		"1@:9093":                   `address ":9093" has no host`,
		"1@a:0":                     `port "0" is not in 1-65535`,
		"1@a:65536":                 `port "65536" is not in 1-65535`,
		"1@a:1,1@b:1":               "node ID 1 given twice",
		"1@a:1,2@a:1":               "nodes 1 and 2 both at a:1",
		"1@a:1,2@b:1,3@c:1,4@d:1,x": `"x": want id@host:port`,
	} {
		if _, err := ParseVoters(in); err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("ParseVoters(%q) = %v, want an error containing %q", in, err, wantErr)
		}
	}
}
