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
		{"cleanup.policy": "compact"}, {"max.message.bytes": "99999999999"}, {"nope": "1"},
	} {
		if out, err := Apply(d, bad); err == nil || out != d {
			t.Errorf("Apply(%v) = %+v, %v; want an error and the input unchanged", bad, out, err)
		}
	}
	if _, err := ParseFsync("sometimes"); err == nil {
		t.Error("ParseFsync accepted an unknown policy")
	}
}
