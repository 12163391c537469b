package main

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestSecondBrokerOnDataDirRefused: a second `kawa serve` on a data dir a
// running broker holds exits 1 saying the dir is in use, and leaves the
// first broker's data alone; once the first is SIGKILLed (no clean unlock)
// a new broker starts on the dir and serves the acknowledged record.
func TestSecondBrokerOnDataDirRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := startKawa(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := newClient(t, p.Addr, kgo.DefaultProduceTopic("locked"), kgo.AllowAutoTopicCreation())
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v0")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl.Close()

	out, err := exec.CommandContext(ctx, kawaBinary(t), "serve", "--listen", "127.0.0.1:0", "--data-dir", dir).CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 1 {
		t.Fatalf("second kawa serve on %s: err %v, want exit status 1; output:\n%s", dir, err, out)
	}
	if !strings.Contains(string(out), "in use by another kawa process") {
		t.Fatalf("second kawa serve output does not say the data dir is in use:\n%s", out)
	}
	if strings.Contains(string(out), "kawa listening") {
		t.Fatalf("second kawa serve listened before refusing:\n%s", out)
	}

	p.Kill()
	p2 := startKawa(t, dir)
	c2 := newClient(t, p2.Addr, kgo.ConsumeTopics("locked"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for {
		fs := c2.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal("record not read back after the restart")
		}
		var got []string
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
		if len(got) > 0 {
			if len(got) != 1 || got[0] != "v0" {
				t.Fatalf("after restart read %q, want [v0]", got)
			}
			return
		}
	}
}
