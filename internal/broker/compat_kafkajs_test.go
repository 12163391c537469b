package broker_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/kawa-broker/kawa/internal/kawatest"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kafkajsDir holds package.json/package-lock.json (kafkajs 2.2.4, no other
// dependencies) and script.js.
var kafkajsDir = filepath.Join("..", "..", "test", "compat", "kafkajs")

// TestKafkaJS runs test/compat/kafkajs/script.js (kafkajs 2.2.4 from npm)
// against an in-process broker: admin (topics, configs, partitions, offsets
// by time, deleteTopicRecords, groups, offsets), an idempotent gzip
// producer with acks -1, a consumer group with commits and seek, and a
// transactional producer once the broker advertises the transaction APIs.
// kafkajs negotiates min(its max, Kawa's max) per API without looking at
// Kawa's min: Produce v7, Fetch v11, ListOffsets v3, Metadata v6,
// OffsetCommit v5, OffsetFetch v4, FindCoordinator v2, JoinGroup v5,
// SyncGroup/Heartbeat/LeaveGroup v3, CreateTopics v3, DescribeConfigs v2,
// InitProducerId v1.
//
// Skipped when node or npm is missing unless KAWA_REQUIRE_NODE is set (CI).
func TestKafkaJS(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 80*time.Second)
	defer cancel()
	node := kafkajsNode(ctx, t)

	k := kawatest.NewBroker(t)
	run := exec.CommandContext(ctx, node, "script.js", k.Addr)
	run.Dir = kafkajsDir
	run.Env = os.Environ()
	if k.B.Supports(kmsg.AddPartitionsToTxn.Int16(), 1) && k.B.Supports(kmsg.EndTxn.Int16(), 1) && k.B.Supports(kmsg.TxnOffsetCommit.Int16(), 1) {
		run.Env = append(run.Env, "KAWA_TXN=1")
	}
	out, err := run.CombinedOutput()
	t.Logf("node script.js:\n%s", out)
	if err != nil {
		t.Fatalf("kafkajs script failed: %v", err)
	}
}

// kafkajsInstall serialises the npm ci of the tests that run kafkajs: two
// parallel tests each running npm ci in kafkajsDir remove each other's
// node_modules (CI saw ENOTEMPTY and a missing kafkajs/index.js).
var kafkajsInstall sync.Mutex

// kafkajsNode returns the node binary with kafkajs installed in kafkajsDir
// (npm ci when node_modules lacks it, one test at a time); it skips the test
// without node/npm unless KAWA_REQUIRE_NODE is set (CI).
func kafkajsNode(ctx context.Context, t *testing.T) string {
	t.Helper()
	node, errNode := exec.LookPath("node")
	npm, errNpm := exec.LookPath("npm")
	if errNode != nil || errNpm != nil {
		if os.Getenv("KAWA_REQUIRE_NODE") != "" {
			t.Fatalf("KAWA_REQUIRE_NODE is set but node/npm are missing: %v %v", errNode, errNpm)
		}
		t.Skip("node/npm not installed")
	}
	kafkajsInstall.Lock()
	defer kafkajsInstall.Unlock()
	if _, err := os.Stat(filepath.Join(kafkajsDir, "node_modules", "kafkajs", "package.json")); err != nil {
		install := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund", "--loglevel=error")
		install.Dir = kafkajsDir
		if out, err := install.CombinedOutput(); err != nil {
			t.Fatalf("npm ci: %v\n%s", err, out)
		}
	}
	return node
}
