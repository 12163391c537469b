package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestBinaryLinksNoBenchPeer: the built kawa binary's module list (`go
// version -m`) names neither kfake nor nats-server; the benchmark peers live
// in cmd/kawa-bench (issue 12).
func TestBinaryLinksNoBenchPeer(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "version", "-m", kawaBinary(t)).CombinedOutput()
	if err != nil {
		t.Fatalf("go version -m: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "\tgithub.com/twmb/franz-go\t") {
		t.Fatalf("go version -m lists no franz-go module; output:\n%s", out)
	}
	for _, peer := range []string{"github.com/twmb/franz-go/pkg/kfake", "github.com/nats-io/nats-server"} {
		if strings.Contains(string(out), peer) {
			t.Errorf("kawa links %s:\n%s", peer, out)
		}
	}
}
