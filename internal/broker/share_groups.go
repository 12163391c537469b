package broker

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/group"
	"github.com/kawa-broker/kawa/internal/share"
)

// shareStore is the share coordinator's state log: partition 0 of the
// internal topic __share_group_state (Kafka's name), written like
// __consumer_offsets (offsetsStore) but answering before the fsync with a
// wait, so the coordinator can append under its lock and wait outside it.
// Unlike __consumer_offsets it is not compacted (cleanup.policy=delete, as
// Kafka's): update records only make sense after the snapshot before them,
// so the coordinator prunes it instead (Prune: the log start offset
// advances, whole segments below it are deleted).
type shareStore struct{ s offsetsStore }

// Append implements share.Store.
func (st shareStore) Append(recs []share.Record) (int64, func(context.Context) error, error) {
	if len(recs) == 0 {
		return 0, nil, nil
	}
	out := make([]group.Record, len(recs))
	for i, r := range recs {
		out[i] = group.Record{Key: r.Key, Value: r.Value}
	}
	next, err := st.s.appendBatch(out)
	if err != nil {
		return 0, nil, err
	}
	return next - int64(len(recs)), func(ctx context.Context) error { return st.s.p.WaitDurable(ctx, next) }, nil
}

// Prune implements share.Store (DeleteRecords on the state log).
func (st shareStore) Prune(offset int64) error {
	_, err := st.s.p.DeleteRecords(offset)
	return err
}

// openShares creates __share_group_state if needed, replays it from its
// log start and starts the share coordinator.
func (b *Broker) openShares() error {
	p, err := b.internalPartitionWith(shareStateTopic, "delete")
	if err != nil {
		return err
	}
	var srecs []share.Record
	if err := scanRecords(p, func(off int64, key, value []byte) {
		srecs = append(srecs, share.Record{Key: key, Value: value, Offset: off})
	}); err != nil {
		return fmt.Errorf("broker: replay %s: %w", shareStateTopic, err)
	}
	b.shares = share.New(shareStore{offsetsStore{p: p}}, time.Now, share.Limits{
		MaxRecordLocks:        b.cfg.ShareMaxRecordLocks,
		MaxShareSessions:      b.cfg.ShareMaxSessions,
		SnapshotUpdateRecords: b.cfg.ShareSnapshotUpdateRecords,
		PruneInterval:         b.cfg.SharePruneInterval,
	})
	if err := b.shares.Load(srecs); err != nil {
		return fmt.Errorf("broker: load share groups: %w", err)
	}
	b.lg.Info("share coordinator loaded", "records", len(srecs), "log_start", p.LogStart())
	return nil
}

// shareTopics resolves a subscribed topic for the share coordinator's
// assignment: internal topics are never assigned.
func (b *Broker) shareTopics() share.Topics {
	return func(name string) (int32, bool) {
		t, ok := b.catalog.Get(name)
		if !ok || t.Internal {
			return 0, false
		}
		return t.Partitions, true
	}
}

// setShareGroupConfigs applies an IncrementalAlterConfigs GROUP resource:
// every change is validated before any is stored. Errors: INVALID_CONFIG
// (unknown name, bad value), INVALID_REQUEST (APPEND/SUBTRACT, unknown op).
func (b *Broker) setShareGroupConfigs(ctx context.Context, rr kmsg.IncrementalAlterConfigsRequestResource, validateOnly bool) error {
	if rr.ResourceName == "" {
		return fmt.Errorf("%w: a GROUP resource needs a group ID", kerr.InvalidRequest)
	}
	for pass := 0; pass < 2; pass++ {
		for _, c := range rr.Configs {
			var v *string
			switch c.Op {
			case 0:
				if c.Value == nil {
					return fmt.Errorf("%w: SET of %q needs a value", kerr.InvalidConfig, c.Name)
				}
				v = c.Value
			case 1:
			default:
				return fmt.Errorf("%w: operation %d does not apply to group configs", kerr.InvalidRequest, c.Op)
			}
			if err := b.shares.SetConfig(ctx, rr.ResourceName, c.Name, v, validateOnly || pass == 0); err != nil {
				return err
			}
		}
	}
	return nil
}

// deleteShareGroups completes a DeleteGroups answer of the classic/consumer
// group coordinator: a group it does not know that is a share group is
// deleted here (KIP-932: DeleteGroups deletes share groups too, with their
// state; NON_EMPTY_GROUP while members remain).
func (b *Broker) deleteShareGroups(ctx context.Context, resp kmsg.Response) {
	dr, ok := resp.(*kmsg.DeleteGroupsResponse)
	if !ok {
		return
	}
	for i := range dr.Groups {
		g := &dr.Groups[i]
		if g.ErrorCode != kerr.GroupIDNotFound.Code || !b.shares.Has(g.Group) {
			continue
		}
		err := b.shares.Delete(ctx, g.Group)
		g.ErrorCode, g.ErrorMessage = errCode(err), errMsg(err)
	}
}

// listShareGroups completes a ListGroups answer of the classic/consumer
// group coordinator with the share groups (KIP-932: group type and
// protocol type "share", state Empty or Stable), under the request's type
// and state filters (matched case-insensitively, as for the other groups),
// keeping the answer in name order. A coordinator error answers alone.
func (b *Broker) listShareGroups(r *kmsg.ListGroupsRequest, resp *kmsg.ListGroupsResponse) {
	if resp.ErrorCode != 0 {
		return
	}
	match := func(filter []string, v string) bool {
		return len(filter) == 0 || slices.ContainsFunc(filter, func(f string) bool { return strings.EqualFold(f, v) })
	}
	if !match(r.TypesFilter, "share") {
		return
	}
	listed := make(map[string]bool, len(resp.Groups))
	for _, g := range resp.Groups {
		listed[g.Group] = true
	}
	for _, g := range b.shares.List() {
		if listed[g.ID] || !match(r.StatesFilter, g.State) {
			continue
		}
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group, lg.ProtocolType, lg.GroupState, lg.GroupType = g.ID, "share", g.State, "share"
		resp.Groups = append(resp.Groups, lg)
	}
	slices.SortFunc(resp.Groups, func(a, b kmsg.ListGroupsResponseGroup) int { return cmp.Compare(a.Group, b.Group) })
}
