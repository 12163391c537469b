package verify

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// admin is the controller's own client, for setup and the end-of-run steps.
type admin struct {
	cl  *kgo.Client
	adm *kadm.Client
}

func newAdmin(brokers []string) (*admin, error) {
	// Not idempotent: the fences need no dedup, and only a non-idempotent
	// producer gives up on an in-flight record when its context ends.
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ClientID("kawa-verify-controller"),
		kgo.MetadataMinAge(250*time.Millisecond), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.DisableIdempotentWrite())
	if err != nil {
		return nil, err
	}
	return &admin{cl: cl, adm: kadm.NewClient(cl)}, nil
}

func (a *admin) close() { a.cl.Close() }

// createTopics creates the plan's topics with the broker's default
// replication factor.
func (a *admin) createTopics(ctx context.Context, plan *Plan) error {
	for _, t := range plan.Topics {
		resp, err := a.adm.CreateTopic(ctx, t.Partitions, -1, nil, t.Name)
		if err == nil {
			err = resp.Err
		}
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("create topic %s: %w", t.Name, err)
		}
	}
	return nil
}

// stallTimeout is how long a group's committed offsets may stand still
// before waitDrained stops waiting for it (a workload the broker refuses,
// say, never commits at all).
const stallTimeout = 10 * time.Second

// waitDrained waits until every group has committed up to the end of its
// input topic, a group stalls, or ctx ends; it returns the groups that did
// not get there.
func (a *admin) waitDrained(ctx context.Context, groups []GroupPlan) []string {
	type state struct {
		sum   int64
		moved time.Time
	}
	st := map[string]*state{}
	for _, g := range groups {
		st[g.Name] = &state{sum: -1, moved: time.Now()}
	}
	var pending, gaveUp []GroupPlan
	pending = append(pending, groups...)
	for len(pending) > 0 {
		var still []GroupPlan
		for _, g := range pending {
			done, sum := a.groupCaughtUp(ctx, g)
			s := st[g.Name]
			if sum != s.sum {
				s.sum, s.moved = sum, time.Now()
			}
			switch {
			case done:
			case time.Since(s.moved) >= stallTimeout:
				gaveUp = append(gaveUp, g)
			default:
				still = append(still, g)
			}
		}
		pending = still
		if len(pending) > 0 && !sleepCtx(ctx, 250*time.Millisecond) {
			break
		}
	}
	return names(append(gaveUp, pending...))
}

func names(gs []GroupPlan) []string {
	var out []string
	for _, g := range gs {
		out = append(out, g.Name)
	}
	return out
}

// groupCaughtUp reports whether g committed up to the end of every
// non-empty partition, and the sum of its committed offsets (to see it move).
func (a *admin) groupCaughtUp(ctx context.Context, g GroupPlan) (bool, int64) {
	ends, err := a.adm.ListEndOffsets(ctx, g.Topic)
	if err != nil || ends.Error() != nil {
		return false, -1
	}
	committed, err := a.adm.FetchOffsets(ctx, g.Name)
	if err != nil {
		return false, -1
	}
	ok, sum := true, int64(0)
	ends.Each(func(e kadm.ListedOffset) {
		c, found := committed.Lookup(e.Topic, e.Partition)
		if found {
			sum += c.At
		}
		if e.Offset > 0 && (!found || c.At < e.Offset) {
			ok = false
		}
	})
	return ok, sum
}

// endOffsets emits the log end offset of every partition and the committed
// offsets of every group.
func (a *admin) endOffsets(ctx context.Context, plan *Plan, emit Emit) error {
	var topics []string
	for _, t := range plan.Topics {
		topics = append(topics, t.Name)
	}
	ends, err := a.adm.ListEndOffsets(ctx, topics...)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return fmt.Errorf("list end offsets: %w", err)
	}
	var evs []Event
	ends.Each(func(e kadm.ListedOffset) {
		evs = append(evs, Event{Kind: KindEnd, Topic: e.Topic, Part: e.Partition, Off: e.Offset})
	})
	for _, g := range plan.Groups {
		offs, err := a.adm.FetchOffsets(ctx, g.Name)
		if err != nil {
			return fmt.Errorf("fetch offsets of %s: %w", g.Name, err)
		}
		offs.Each(func(o kadm.OffsetResponse) {
			evs = append(evs, Event{Kind: KindGroup, W: g.Name, Topic: o.Topic, Part: o.Partition, Off: o.At})
		})
	}
	emit(evs...)
	return nil
}

// writeFences appends a fence record to every partition of every topic; the
// readers and the final scan read until they have seen all of them. A
// read_committed reader sees a fence only once every transaction before it
// has ended, which is itself a check that the LSO moves.
func (a *admin) writeFences(ctx context.Context, plan *Plan) error {
	var recs []*kgo.Record
	for _, t := range plan.Topics {
		for p := range t.Partitions {
			recs = append(recs, &kgo.Record{Topic: t.Name, Partition: p, Value: []byte(fenceID)})
		}
	}
	return a.cl.ProduceSync(ctx, recs...).FirstErr()
}

// finalScan reads every topic read_uncommitted and the transactional ones
// read_committed, up to the fences, emitting scan events. A scan ends with an
// error when it reads nothing for stall: it is bounded by progress, not by a
// total time, so a long run's large log is read to the end however long that
// takes (a 30-minute soak writes millions of records).
func finalScan(ctx context.Context, stall time.Duration, brokers []string, plan *Plan, emit Emit) error {
	// One scan per partition count and isolation: a reader waits for a
	// fence in every partition of its topics.
	type group struct {
		parts int32
		iso   Isolation
	}
	var order []group
	topics := map[group][]string{}
	for _, iso := range []Isolation{ReadUncommitted, ReadCommitted} {
		for _, t := range plan.Topics {
			if iso == ReadCommitted && t.Role != RoleTxn && t.Role != RoleOut {
				continue
			}
			g := group{t.Partitions, iso}
			if _, ok := topics[g]; !ok {
				order = append(order, g)
			}
			topics[g] = append(topics[g], t.Name)
		}
	}
	for _, g := range order {
		if err := scanUntilFence(ctx, stall, brokers, topics[g], g.parts, g.iso, emit); err != nil {
			return err
		}
	}
	return nil
}

// errScanStalled ends a final scan that read nothing for its stall time.
var errScanStalled = errors.New("no record read")

func scanUntilFence(ctx context.Context, stall time.Duration, brokers, topics []string, parts int32, iso Isolation, emit Emit) error {
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// Re-armed after every batch of records; fires only after stall without
	// one. It is stopped while the batch is recorded: with millions of events
	// in memory the history's own appends (and the GC they cause) can take
	// seconds, and that is the verifier's time, not the broker's.
	watchdog := time.AfterFunc(stall, func() { cancel(fmt.Errorf("%w for %v", errScanStalled, stall)) })
	defer watchdog.Stop()
	drained := false
	err := readUntilFence(sctx, brokers, topics, parts, iso, "scan-"+iso.String(), KindScan, func(evs ...Event) {
		watchdog.Stop()
		defer watchdog.Reset(stall)
		stamp(evs)
		for i := range evs {
			evs[i].W = "scan-" + iso.String()
			drained = drained || evs[i].Kind == KindDrained
		}
		emit(evs...)
	})
	if err == nil && !drained {
		err = fmt.Errorf("final %s scan did not reach the fences: %w", iso, context.Cause(sctx))
	}
	return err
}
