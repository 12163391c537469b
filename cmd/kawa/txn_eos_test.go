package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kawa-broker/kawa/internal/acl"
	"github.com/kawa-broker/kawa/internal/kawatest"
	"github.com/kawa-broker/kawa/internal/kawatest/wait"
)

// eosWorker is one consume-transform-produce instance: a franz-go
// GroupTransactSession with a fixed transactional.id, so a restarted worker
// fences its killed predecessor (a zombie with an open transaction).
type eosWorker struct {
	id       int
	addr     string
	in, out  string
	group    string
	kill     atomic.Bool // abandon the current transaction and restart
	restarts atomic.Int64
	done     *atomic.Int64   // records in transactions End reported committed, all workers
	progress chan<- struct{} // signalled (without blocking) after each committed transaction
	extra    []kgo.Opt       // more session options (the group protocol)
}

// run processes until ctx ends. Each transaction copies the polled records
// to out as "value@partition:offset". Any error, or a kill, drops the
// session without ending its transaction and starts a new one.
func (w *eosWorker) run(ctx context.Context) {
	for ctx.Err() == nil {
		opts := append([]kgo.Opt{kgo.SeedBrokers(w.addr),
			kgo.TransactionalID(fmt.Sprintf("%s-worker-%d", w.group, w.id)),
			kgo.ConsumerGroup(w.group), kgo.ConsumeTopics(w.in), kgo.DefaultProduceTopic(w.out),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100 * time.Millisecond),
			kgo.SessionTimeout(6 * time.Second), kgo.RebalanceTimeout(3 * time.Second), kgo.HeartbeatInterval(300 * time.Millisecond),
			kgo.RetryTimeout(5 * time.Second), kgo.TransactionTimeout(10 * time.Second)}, w.extra...)
		s, err := kgo.NewGroupTransactSession(opts...)
		if err == nil {
			w.loop(ctx, s)
			s.Close()
		}
		w.restarts.Add(1)
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (w *eosWorker) loop(ctx context.Context, s *kgo.GroupTransactSession) {
	for ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fs := s.PollRecords(pctx, 20)
		cancel()
		recs := fs.Records()
		if len(recs) == 0 {
			continue
		}
		if err := s.Begin(); err != nil {
			return
		}
		for _, r := range recs {
			v := fmt.Sprintf("%s@%d:%d", r.Value, r.Partition, r.Offset)
			s.Produce(ctx, &kgo.Record{Value: []byte(v)}, nil)
		}
		time.Sleep(10 * time.Millisecond) // the "transform" work; lets the chaos land mid-stream
		if w.kill.Swap(false) {
			return // crash mid-transaction: the next instance must fence it
		}
		committed, err := s.End(ctx, kgo.TryCommit)
		if err != nil {
			return
		}
		if committed {
			w.done.Add(int64(len(recs)))
			select {
			case w.progress <- struct{}{}:
			default:
			}
		}
	}
}

// TestExactlyOnceConsumeTransformProduce: 3 franz-go GroupTransactSession
// workers copy topic A (6 partitions) to topic B while workers are killed
// mid-transaction and restarted and the broker (a real kawa process) is
// SIGKILLed and restarted once. B then holds every input record exactly
// once, and the group's committed offsets on A cover exactly what reached B.
func TestExactlyOnceConsumeTransformProduce(t *testing.T) {
	t.Parallel()
	runExactlyOnce(t, "eos", plainEOSBroker(t))
}

// TestExactlyOnceConsumeTransformProduce848 is the same with the workers in a
// KIP-848 consumer group (kgo.ServerSideBalancer, "uniform"): TxnOffsetCommit
// is checked by member epoch, and after the broker's SIGKILL the members
// (unknown to the restarted coordinator) rejoin with epoch 0.
func TestExactlyOnceConsumeTransformProduce848(t *testing.T) {
	t.Parallel()
	runExactlyOnce(t, "eos848", plainEOSBroker(t), kgo.ServerSideBalancer(), kgo.Balancers(kgo.StickyBalancer()))
}

// eosBroker is the broker runExactlyOnce runs against: start starts it on
// the same data dir and address each time (again after its SIGKILL); admin
// are the options of the setup and checking clients, workers those the
// workers add to theirs (their principal's credentials).
type eosBroker struct {
	addr           string
	start          func() *kawaProc
	admin, workers []kgo.Opt
	// grant, if set, is called once the topics exist, before the workers
	// start, with the topics and group (ACLs for the workers).
	grant func(ctx context.Context, adm *kadm.Client, in, out, group string)
}

// plainEOSBroker is kawa serve on one PLAINTEXT listener.
func plainEOSBroker(t *testing.T) eosBroker {
	dir, addr := t.TempDir(), freeAddr(t)
	return eosBroker{addr: addr, start: func() *kawaProc { return startKawa(t, dir, "--listen", addr) }}
}

// runExactlyOnce runs the scenario above for group on eb with the workers'
// extra session options.
func runExactlyOnce(t *testing.T, group string, eb eosBroker, extra ...kgo.Opt) {
	addr := eb.addr
	p := eb.start()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const in, out, n = "eos-in", "eos-out", 1200
	adm := kadm.NewClient(newClient(t, addr, eb.admin...))
	if _, err := adm.CreateTopic(ctx, 6, 1, nil, in); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, out); err != nil {
		t.Fatal(err)
	}
	if eb.grant != nil {
		eb.grant(ctx, adm, in, out, group)
	}
	prod := newClient(t, addr, append([]kgo.Opt{kgo.DefaultProduceTopic(in), kgo.RecordPartitioner(kgo.RoundRobinPartitioner())}, eb.admin...)...)
	for i := 0; i < n; i++ {
		prod.Produce(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("id-%04d", i))}, nil)
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var done atomic.Int64
	progress := make(chan struct{}, 1)
	workers := make([]*eosWorker, 3)
	for i := range workers {
		workers[i] = &eosWorker{id: i, addr: addr, in: in, out: out, group: group, done: &done, progress: progress, extra: append(slices.Clone(eb.workers), extra...)}
		wg.Add(1)
		go func() { defer wg.Done(); workers[i].run(wctx) }()
	}
	// Chaos as the output grows, on each committed transaction: kill a
	// worker mid-transaction three times and SIGKILL the broker once, half
	// way. Then done when the group's committed offsets cover all of A (a
	// transaction committed just before the broker's SIGKILL may never be
	// reported committed, so the workers' own count cannot end the test).
	restarted := false
	kills := 0
	for kills < 3 || !restarted {
		select {
		case <-ctx.Done():
			stop()
			wg.Wait()
			t.Fatalf("chaos incomplete (%d kills, restarted %v): only %d of %d records committed", kills, restarted, done.Load(), n)
		case <-progress:
		}
		got := done.Load()
		if kills < 3 && got > int64(kills+1)*n/6 {
			workers[kills%3].kill.Store(true)
			kills++
		}
		if !restarted && got > n/2 {
			p.Kill()
			p = eb.start()
			restarted = true
		}
	}
	deadline, _ := ctx.Deadline()
	wait.Until(t, time.Until(deadline), "the group's committed offsets to cover all of "+in, func() bool {
		return committedSum(ctx, adm, group, in) == n
	})
	stop()
	wg.Wait()
	checkExactlyOnce(t, addr, in, out, group, n, eb.admin...)
	var restarts int64
	for _, w := range workers {
		restarts += w.restarts.Load()
	}
	t.Logf("worker restarts: %d", restarts)
}

// committedSum is the sum of group's committed offsets on topic (0 on error).
func committedSum(ctx context.Context, adm *kadm.Client, group, topic string) int64 {
	offsets, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return 0
	}
	var sum int64
	offsets.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic && o.Err == nil {
			sum += o.At
		}
	})
	return sum
}

// checkExactlyOnce reads out with read_committed and checks every id-i
// (i < n) appears exactly once, and that the (partition, offset) sources in
// out are exactly the offsets below the group's committed offset on in.
func checkExactlyOnce(t *testing.T, addr, in, out, group string, n int, opts ...kgo.Opt) {
	t.Helper()
	got := readCommitted(t, addr, out, n, opts...)
	seen := map[string]int{}
	sources := map[int32]map[int64]int{}
	for _, v := range got {
		id, src, ok := strings.Cut(v, "@")
		ps, os, ok2 := strings.Cut(src, ":")
		part, err1 := strconv.Atoi(ps)
		off, err2 := strconv.ParseInt(os, 10, 64)
		if !ok || !ok2 || err1 != nil || err2 != nil {
			t.Fatalf("malformed output %q", v)
		}
		seen[id]++
		if sources[int32(part)] == nil {
			sources[int32(part)] = map[int64]int{}
		}
		sources[int32(part)][off]++
	}
	for i := 0; i < n; i++ {
		if c := seen[fmt.Sprintf("id-%04d", i)]; c != 1 {
			t.Errorf("id-%04d in %s %d times, want exactly once", i, out, c)
		}
	}
	if len(seen) != n || len(got) != n {
		t.Fatalf("%d records (%d distinct ids) in %s, want %d", len(got), len(seen), out, n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl := newClient(t, addr, opts...)
	offsets, err := kadm.NewClient(cl).FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	for part := int32(0); part < 6; part++ {
		o, ok := offsets.Lookup(in, part)
		if !ok || o.At != int64(len(sources[part])) {
			t.Errorf("%s-%d: committed offset %+v, but %d of its records reached %s", in, part, o.At, len(sources[part]), out)
		}
		for off := int64(0); off < o.At; off++ {
			if sources[part][off] != 1 {
				t.Errorf("%s-%d offset %d reached %s %d times", in, part, off, out, sources[part][off])
			}
		}
	}
}

// TestExactlyOnceSASLSSLWithACLs is the same scenario over SASL_SSL
// (SCRAM-SHA-512) with the authorizer on (issue 14's acceptance): the
// workers log in as User:eos, which holds exactly what a franz-go
// consume-transform-produce needs, READ on the input topic and the group,
// WRITE on the output topic and on the workers' transactional IDs (prefixed);
// DESCRIBE comes implied. Setup and checks run as the super user admin.
func TestExactlyOnceSASLSSLWithACLs(t *testing.T) {
	t.Parallel()
	dir, data, addr := t.TempDir(), t.TempDir(), freeAddr(t)
	mustRun(t, runUser, "", "set", "admin", "--password", "admin-pw", "--data-dir", data)
	mustRun(t, runUser, "", "set", "eos", "--password", "eos-pw", "--data-dir", data)
	ca := kawatest.NewCA(t, "eos CA")
	chain, key := kawatest.PEMFiles(t, ca.Issue("localhost", ""))
	ks := filepath.Join(dir, "server.pem")
	if err := os.WriteFile(ks, append(key, chain...), 0o600); err != nil {
		t.Fatal(err)
	}
	tlsOpt := kgo.DialTLSConfig(&tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"})
	login := func(user string) kgo.Opt {
		return kgo.SASL(scram.Auth{User: user, Pass: user + "-pw"}.AsSha512Mechanism())
	}
	eb := eosBroker{
		addr: addr,
		start: func() *kawaProc {
			return startKawa(t, data, "--listeners", "SASL_SSL://"+addr, "--ssl-keystore-location", ks,
				"--authorizer-class-name", acl.ClassName, "--super-users", "User:admin")
		},
		admin:   []kgo.Opt{tlsOpt, login("admin")},
		workers: []kgo.Opt{tlsOpt, login("eos")},
		grant: func(ctx context.Context, adm *kadm.Client, in, out, group string) {
			for _, b := range []*kadm.ACLBuilder{
				kadm.NewACLs().Allow("User:eos").Topics(in).Groups(group).Operations(kadm.OpRead),
				kadm.NewACLs().Allow("User:eos").Topics(out).Operations(kadm.OpWrite),
				kadm.NewACLs().Allow("User:eos").TransactionalIDs(group + "-worker-").Operations(kadm.OpWrite).ResourcePatternType(kadm.ACLPatternPrefixed),
			} {
				rs, err := adm.CreateACLs(ctx, b)
				if err == nil {
					for _, r := range rs {
						err = errors.Join(err, r.Err)
					}
				}
				if err != nil {
					t.Fatalf("CreateACLs: %v", err)
				}
			}
		},
	}
	runExactlyOnce(t, "eos-acl", eb)
}
