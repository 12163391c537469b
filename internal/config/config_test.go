package config

import "testing"

func TestApplyValidates(t *testing.T) {
	d := DefaultTopic()
	got, err := Apply(d, map[string]string{"retention.ms": "-1", "max.message.bytes": "2048", "message.timestamp.type": "LogAppendTime"})
	if err != nil || got.RetentionMs != -1 || got.MaxMessageBytes != 2048 || got.TimestampType != "LogAppendTime" {
		t.Fatalf("Apply = %+v, %v", got, err)
	}
	for _, bad := range []map[string]string{
		{"retention.ms": "x"}, {"retention.ms": "-2"}, {"segment.bytes": "1"},
		{"segment.bytes": "1048575"}, {"segment.bytes": "2147483648"}, {"internal.segment.bytes": "13"},
		{"cleanup.policy": "compact,nope"}, {"min.cleanable.dirty.ratio": "1.5"}, {"min.cleanable.dirty.ratio": "NaN"}, {"min.cleanable.dirty.ratio": "-Inf"}, {"max.compaction.lag.ms": "0"}, {"delete.retention.ms": "-1"}, {"max.message.bytes": "99999999999"}, {"nope": "1"},
	} {
		if out, err := Apply(d, bad); err == nil || out != d {
			t.Errorf("Apply(%v) = %+v, %v; want an error and the input unchanged", bad, out, err)
		}
	}
	// KIP-1030: segment.bytes' minimum is 1 MiB; internal.segment.bytes overrides it for tests.
	got, err = Apply(d, map[string]string{"segment.bytes": "1048576", "internal.segment.bytes": "4096"})
	if err != nil || got.SegmentBytes != 1<<20 || got.SegmentSize() != 4096 {
		t.Fatalf("Apply(segment sizes) = %+v (size %d), %v", got, got.SegmentSize(), err)
	}
	if got, _ := Apply(d, map[string]string{"segment.bytes": "2147483647"}); got.SegmentSize() != 2147483647 {
		t.Fatalf("segment.bytes 2147483647: size %d", got.SegmentSize())
	}
	for in, want := range map[string]string{"compact": "compact", "delete,compact": "compact,delete", "delete": "delete"} {
		got, err := Apply(d, map[string]string{"cleanup.policy": in})
		if err != nil || got.CleanupPolicy != want || got.Compact() != (want != "delete") || !got.Delete() != (want == "compact") {
			t.Errorf("cleanup.policy=%s: %q (compact %v delete %v), %v; want %q", in, got.CleanupPolicy, got.Compact(), got.Delete(), err, want)
		}
	}
	if _, err := ParseFsync("sometimes"); err == nil {
		t.Error("ParseFsync accepted an unknown policy")
	}
}
