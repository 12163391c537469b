package broker_test

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/kawa-broker/kawa/internal/kawatest"
	"github.com/kawa-broker/kawa/internal/kawatest/wait"
)

// TestGroupSaramaAndKcat (issue 4 acceptance): a sarama.NewConsumerGroup
// member and a kcat -G (librdkafka) balanced consumer share one group with
// the cooperative-sticky protocol. Both get partitions, every record
// produced after they joined is consumed, and at the end the group's
// committed offsets are exactly the end offsets.
func TestGroupSaramaAndKcat(t *testing.T) {
	t.Parallel()
	kcat := kcatPath(t)
	k := kawatest.NewBroker(t)
	const topic, group, perPartition = "mix", "mixed", 100
	const partitions = 6
	k.CreateTopic(topic, partitions, nil)
	seen := newSeenSet()
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()

	stopSarama := startSaramaMember(t, ctx, k.Addr, group, topic, seen)
	stopKcat := startKcatMember(t, kcat, k.Addr, group, topic, seen)
	adm := k.Admin()
	wait.Until(t, 20*time.Second, "a Stable group with the sarama and kcat members both assigned", func() bool {
		g := describeGroup(t, adm, group)
		if g.State != "Stable" || len(g.Members) != 2 || g.Protocol != "cooperative-sticky" {
			return false
		}
		ids := map[string]bool{}
		for _, m := range g.Members {
			if c, ok := m.Assigned.AsConsumer(); ok && len(c.Topics) > 0 {
				ids[m.ClientID] = true
			}
		}
		return ids["sarama-member"] && ids["kcat-member"]
	})

	for p := int32(0); p < partitions; p++ {
		produceValues(t, k, topic, p, perPartition)
	}
	wait.Until(t, 20*time.Second, "every record consumed", func() bool { return seen.count() == partitions*perPartition })
	// kcat's autocommit timer stays at librdkafka's 5 s (kcat's -X sets the
	// topic-level auto.commit.interval.ms); its close commits and leaves.
	stopKcat()
	wait.Until(t, 10*time.Second, "committed offsets at the end offsets", func() bool {
		got := fetchCommitted(t, k.Client(), group, topic, 0, 1, 2, 3, 4, 5)
		for p := int32(0); p < partitions; p++ {
			if got[p] != perPartition {
				return false
			}
		}
		return true
	})
	stopSarama()
	if g := describeGroup(t, adm, group); g.State != "Empty" {
		t.Errorf("after both left the group is %s, want Empty", g.State)
	}

	seen.mu.Lock()
	defer seen.mu.Unlock()
	for p := int32(0); p < partitions; p++ {
		for o := int64(0); o < perPartition; o++ {
			if len(seen.by[[2]int64{int64(p), o}]) == 0 {
				t.Errorf("record %d/%d never consumed", p, o)
			}
		}
	}
	if seen.perClient["sarama"] == 0 || seen.perClient["kcat"] == 0 {
		t.Errorf("consumed per client: %v, want both > 0", seen.perClient)
	}
	t.Logf("consumed per client: %v", seen.perClient)
}

// seenSet records which client consumed each partition/offset.
type seenSet struct {
	mu        sync.Mutex
	by        map[[2]int64][]string
	perClient map[string]int
}

func newSeenSet() *seenSet {
	return &seenSet{by: map[[2]int64][]string{}, perClient: map[string]int{}}
}

func (s *seenSet) add(client string, p int32, o int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.by[[2]int64{int64(p), o}] = append(s.by[[2]int64{int64(p), o}], client)
	s.perClient[client]++
}

func (s *seenSet) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.by)
}

// saramaHandler marks every message; sarama autocommits the marks.
type saramaHandler struct{ seen *seenSet }

func (saramaHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (saramaHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h saramaHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for msg := range claim.Messages() {
		h.seen.add("sarama", msg.Partition, msg.Offset)
		sess.MarkMessage(msg, "")
	}
	return nil
}

func startSaramaMember(t *testing.T, ctx context.Context, addr, group, topic string, seen *seenSet) (stop func()) {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_8_0_0
	cfg.ClientID = "sarama-member"
	cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyCooperativeSticky()}
	cfg.Consumer.Group.Session.Timeout = groupSession
	cfg.Consumer.Group.Heartbeat.Interval = groupHeartbeat
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Interval = 100 * time.Millisecond
	cfg.Consumer.Group.Rebalance.Retry.Backoff = 100 * time.Millisecond
	cfg.Consumer.MaxWaitTime = 100 * time.Millisecond
	cg, err := sarama.NewConsumerGroup([]string{addr}, group, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for cctx.Err() == nil {
			if err := cg.Consume(cctx, []string{topic}, saramaHandler{seen}); err != nil && cctx.Err() == nil {
				t.Errorf("sarama Consume: %v", err)
				return
			}
		}
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			<-done
			if err := cg.Close(); err != nil {
				t.Errorf("sarama close: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// startKcatMember runs `kcat -G` printing "partition offset" per message
// (librdkafka autocommits, and commits on close).
func startKcatMember(t *testing.T, kcat, addr, group, topic string, seen *seenSet) (stop func()) {
	cmd := exec.Command(kcat, "-b", addr, "-G", group, topic, "-q", "-u", "-f", "%p %o\n",
		"-X", "client.id=kcat-member", "-X", "partition.assignment.strategy=cooperative-sticky",
		"-X", "auto.offset.reset=earliest", "-X", "enable.auto.commit=true", "-X", "fetch.wait.max.ms=100",
		"-X", fmt.Sprintf("session.timeout.ms=%d", groupSession.Milliseconds()),
		"-X", fmt.Sprintf("heartbeat.interval.ms=%d", groupHeartbeat.Milliseconds()))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var p int32
			var o int64
			if _, err := fmt.Sscanf(sc.Text(), "%d %d", &p, &o); err == nil {
				seen.add("kcat", p, o)
			}
		}
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM) // kcat commits and leaves on SIGTERM
			<-read
			if err := cmd.Wait(); err != nil && !killedBySignal(err) {
				t.Errorf("kcat -G: %v\n%s", err, stderr.String())
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func killedBySignal(err error) bool {
	ee, ok := err.(*exec.ExitError)
	return ok && !ee.Exited()
}
