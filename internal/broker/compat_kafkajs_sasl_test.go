package broker_test

import (
	"context"
	"crypto/tls"
	"os/exec"
	"testing"
	"time"

	"github.com/kawa-broker/kawa/internal/server"
)

// TestKafkaJSSASL runs test/compat/kafkajs/sasl.js: kafkajs 2.2.4 logs in
// with PLAIN and SCRAM-SHA-512 and produces, and gets
// SASL_AUTHENTICATION_FAILED (KafkaJSSASLAuthenticationError) with a wrong
// password. Skipped without node/npm unless KAWA_REQUIRE_NODE is set.
func TestKafkaJSSASL(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 80*time.Second)
	defer cancel()
	node := kafkajsNode(ctx, t)
	s := startSecure(t, server.SASLPlaintext, tls.NoClientCert)
	run := exec.CommandContext(ctx, node, "sasl.js", s.b.Addr, "alice", "alice-secret")
	run.Dir = kafkajsDir
	out, err := run.CombinedOutput()
	t.Logf("node sasl.js:\n%s", out)
	if err != nil {
		t.Fatalf("kafkajs SASL script failed: %v", err)
	}
}
