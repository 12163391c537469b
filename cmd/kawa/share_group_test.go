package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kawa-broker/kawa/internal/kawatest"
)

// `kawa share-group`: reset-offsets creates the share group with the start
// offsets it plans (dry run first), list and describe show it Empty with
// the exact offsets, a share consumer then gets exactly the records from
// the start offset on, and a reset is refused while it is a member.
func TestShareGroupCLI(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	k.CreateTopic("t", 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	prod := k.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic("t"))
	for i := range 10 {
		for p := int32(0); p < 2; p++ {
			if err := prod.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte{byte('0' + i)}}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	b := "--brokers=" + k.Addr

	if out := mustRun(t, runShareGroup, "", "list", b); out != "GROUP  STATE\n" {
		t.Errorf("list with no share group:\n%q", out)
	}
	if _, err := runCmd(t, runShareGroup, "", "describe", "sg", b); !errors.Is(err, kerr.GroupIDNotFound) {
		t.Errorf("describe of a share group that does not exist: %v, want GROUP_ID_NOT_FOUND", err)
	}
	out := mustRun(t, runShareGroup, "", "reset-offsets", "sg", "--topic", "t:0", "--to-offset", "7", b)
	if want := "TOPIC  PARTITION  CURRENT  NEW\nt      0          -        7\ndry run: nothing altered; add --execute to move these start offsets\n"; out != want {
		t.Errorf("dry run:\n%s\nwant\n%s", out, want)
	}
	if _, err := runCmd(t, runShareGroup, "", "describe", "sg", b); !errors.Is(err, kerr.GroupIDNotFound) {
		t.Errorf("describe after the dry run: %v, want GROUP_ID_NOT_FOUND (nothing created)", err)
	}
	out = mustRun(t, runShareGroup, "", "reset-offsets", "sg", "--topic", "t:0", "--to-offset", "7", "--execute", b)
	if !strings.HasSuffix(out, "moved 1 start offsets of share group sg\n") {
		t.Errorf("execute:\n%s", out)
	}
	if out := mustRun(t, runShareGroup, "", "list", b); out != "GROUP  STATE\nsg     Empty\n" {
		t.Errorf("list:\n%q", out)
	}
	want := "group: sg\nstate: Empty\ngroup-epoch: 0\nassignment-epoch: 0\nassignor: simple\nmembers: 0\n\n" +
		"TOPIC  PARTITION  START  END  LAG\n" +
		"t      0          7      10   3\n"
	if out := mustRun(t, runShareGroup, "", "describe", "sg", b); out != want {
		t.Errorf("describe:\n%s\nwant\n%s", out, want)
	}

	c := k.Client(kgo.ConsumeTopics("t"), kgo.ShareGroup("sg"), kgo.ClientID("share-cli"))
	var got []string
	for len(got) < 3 && ctx.Err() == nil {
		c.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			got = append(got, string(r.Value)+"@"+string('0'+byte(r.Partition)))
			r.Ack(kgo.AckAccept)
		})
	}
	if strings.Join(got, " ") != "7@0 8@0 9@0" {
		t.Errorf("share consumer after the reset got %v, want 7..9 of partition 0 only", got)
	}
	if err := c.FlushAcks(ctx); err != nil {
		t.Fatal(err)
	}
	out = mustRun(t, runShareGroup, "", "describe", "sg", b)
	if !strings.Contains(out, "t      0          10     10   0\n") {
		t.Errorf("describe after 7..9 were accepted: want start 10, lag 0 on partition 0:\n%s", out)
	}
	if !strings.Contains(out, "state: Stable\n") || !strings.Contains(out, "members: 1\n") || !strings.Contains(out, "share-cli") || !strings.Contains(out, "t:0,1") {
		t.Errorf("describe with a member:\n%s", out)
	}
	if _, err := runCmd(t, runShareGroup, "", "reset-offsets", "sg", "--topic", "t", "--to-earliest", "--execute", b); err == nil || !strings.Contains(err.Error(), "Empty") {
		t.Errorf("reset of a Stable share group: %v, want a refusal", err)
	}
	c.Close() // leaves: Empty at once

	out = mustRun(t, runShareGroup, "", "reset-offsets", "sg", "--topic", "t", "--to-earliest", "--execute", b)
	if want := "TOPIC  PARTITION  CURRENT  NEW\nt      0          10       0\nt      1          10       0\nmoved 2 start offsets of share group sg\n"; out != want {
		t.Errorf("reset to earliest:\n%s\nwant\n%s", out, want)
	}
	if _, err := runCmd(t, runShareGroup, "", "reset-offsets", "sg", b); err == nil {
		t.Error("reset-offsets without --topic: no error")
	}
}
