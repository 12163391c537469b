package verify

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// setShareGroupConfigs sets every share group's configs before its members
// start: IncrementalAlterConfigs (KIP-339) on the GROUP resource (type 32,
// KIP-848/KIP-932 group configs) with share.auto.offset.reset=earliest
// (members start before the first record, but nothing may be skipped),
// share.delivery.count.limit and share.record.lock.duration.ms.
func (a *admin) setShareGroupConfigs(ctx context.Context, plan *Plan) error {
	for _, g := range plan.ShareGroups {
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		res := kmsg.NewIncrementalAlterConfigsRequestResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, g.Name
		for _, kv := range [][2]string{
			{"share.auto.offset.reset", "earliest"},
			{"share.delivery.count.limit", strconv.Itoa(g.DeliveryLimit)},
			{"share.record.lock.duration.ms", strconv.FormatInt(g.Lock.Milliseconds(), 10)},
		} {
			c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			c.Name, c.Value = kv[0], kmsg.StringPtr(kv[1])
			res.Configs = append(res.Configs, c)
		}
		req.Resources = append(req.Resources, res)
		resp, err := req.RequestWith(ctx, a.cl)
		if err == nil && len(resp.Resources) != 1 {
			err = fmt.Errorf("%d resources in the response", len(resp.Resources))
		}
		if err == nil {
			err = kerr.ErrorForCode(resp.Resources[0].ErrorCode)
		}
		if err != nil {
			return fmt.Errorf("share group %s configs: %w", g.Name, err)
		}
	}
	return nil
}

// shareStarts returns the share-partition start offsets of g
// (DescribeShareGroupOffsets, KIP-932) and the sum of the gaps to ends.
func (a *admin) shareStarts(ctx context.Context, g ShareGroupPlan, ends kadm.ListedOffsets) (map[int32]int64, int64, error) {
	d, err := a.adm.DescribeShareGroupOffsets(ctx, g.Name)
	if err == nil {
		err = d.Error()
	}
	if err != nil {
		return nil, 0, err
	}
	starts := map[int32]int64{}
	var behind int64
	var perr error
	ends.Each(func(e kadm.ListedOffset) {
		if e.Topic != g.Topic {
			return
		}
		o, ok := d[g.Name].Offsets.Lookup(g.Topic, e.Partition)
		switch {
		case ok && o.Err != nil:
			perr = fmt.Errorf("partition %d: %w", e.Partition, o.Err)
		case ok && o.StartOffset >= 0:
			starts[e.Partition] = o.StartOffset
			behind += max(e.Offset-o.StartOffset, 0)
		default:
			// No share-partition state yet: nothing was delivered.
			behind += e.Offset
		}
	})
	return starts, behind, perr
}

// waitShareResolved waits, while the run's own members still consume,
// until every share group's start offsets reach the log end, or a group's
// stand still for stall; it returns the groups that did not get there.
// Stopping members only then means no record is left available for a
// stopping member's last fetch to acquire unseen.
func waitShareResolved(ctx context.Context, stall time.Duration, plan *Plan, adm *admin) []ShareGroupPlan {
	var pending []ShareGroupPlan
	for _, g := range plan.ShareGroups {
		if shareResolved(ctx, stall, g, adm) != nil {
			pending = append(pending, g)
		}
	}
	return pending
}

// drainShare runs the end-of-run drain of the share groups the run's
// members left unresolved: one more member (in this process, named
// "<group>-drain") that accepts every record but the poison ones, until
// every share-partition start offset reaches the log end. Like the final
// scan it is bounded by progress, not a total time: it gives up once the
// start offsets stand still for stall (records a crashed member held come
// back when their lock ends, well within it). It returns the groups it
// gave up on.
func drainShare(ctx context.Context, stall time.Duration, brokers []string, groups []ShareGroupPlan, adm *admin, emit Emit) []string {
	var gaveUp []string
	for _, g := range groups {
		if err := drainShareGroup(ctx, stall, brokers, g, adm, emit); err != nil {
			gaveUp = append(gaveUp, fmt.Sprintf("%s: %v", g.Name, err))
		}
	}
	return gaveUp
}

// errShareStalled ends a share drain whose start offsets stood still.
var errShareStalled = errors.New("share-partition start offsets stood still")

func drainShareGroup(ctx context.Context, stall time.Duration, brokers []string, g ShareGroupPlan, adm *admin, emit Emit) error {
	spec := WorkerSpec{Slot: g.Name + "-drain", Name: g.Name + "-drain", Role: WorkerShare, Semantic: Share,
		Brokers: brokers, Topics: []string{g.Topic}, Group: g.Name, Drain: true}
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- RunWorker(ctx, spec, stop, stamped(emit)) }()
	defer func() {
		close(stop)
		<-done
	}()
	return shareResolved(ctx, stall, g, adm)
}

// shareResolved waits until g's start offsets reach the log end, failing
// once they stand still for stall.
func shareResolved(ctx context.Context, stall time.Duration, g ShareGroupPlan, adm *admin) error {
	ends, err := adm.adm.ListEndOffsets(ctx, g.Topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return fmt.Errorf("list end offsets: %w", err)
	}
	last, moved := int64(-1), time.Now()
	for {
		_, behind, err := adm.shareStarts(ctx, g, ends)
		if err == nil && behind == 0 {
			return nil
		}
		if behind != last {
			last, moved = behind, time.Now()
		}
		if time.Since(moved) >= stall {
			if err != nil {
				return fmt.Errorf("%w for %v: %v", errShareStalled, stall, err)
			}
			return fmt.Errorf("%w for %v, %d records short of the log end", errShareStalled, stall, behind)
		}
		if !sleepCtx(ctx, 250*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// shareOffsets emits every share group's start offsets (KindShareStart).
func (a *admin) shareOffsets(ctx context.Context, plan *Plan, emit Emit) error {
	for _, g := range plan.ShareGroups {
		ends, err := a.adm.ListEndOffsets(ctx, g.Topic)
		if err == nil {
			err = ends.Error()
		}
		if err != nil {
			return fmt.Errorf("list end offsets of %s: %w", g.Topic, err)
		}
		starts, _, err := a.shareStarts(ctx, g, ends)
		if err != nil {
			return fmt.Errorf("describe share group offsets of %s: %w", g.Name, err)
		}
		var evs []Event
		for p, off := range starts {
			evs = append(evs, Event{Kind: KindShareStart, W: g.Name, Topic: g.Topic, Part: p, Off: off})
		}
		emit(evs...)
	}
	return nil
}
