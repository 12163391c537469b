package group

import (
	"cmp"
	"slices"
	"time"
)

// Offset retention (offsets.retention.minutes, KIP-211), checked every OffsetsRetentionCheckInterval:
//
//   - an Empty group's offsets expire OffsetsRetention after the group became Empty;
//   - a simple group's (no protocol type) offsets expire OffsetsRetention after their commit;
//   - a Stable consumer group's offsets of topics no member subscribes to expire after their commit;
//   - an offset committed with an explicit retention time (OffsetCommit v2-v4) expires at that time.
//
// Expiry writes tombstones. An Empty group left with nothing is then deleted too (group tombstone).

func (c *Coordinator) scheduleSweepLocked() {
	c.schedule(&c.sweep, c.cfg.OffsetsRetentionCheckInterval, func() {
		c.expireOffsetsLocked()
		c.scheduleSweepLocked()
	})
}

// expireOffsetsLocked queues tombstones for expired offsets and idle groups. It does not wait.
func (c *Coordinator) expireOffsetsLocked() {
	if c.loading {
		return
	}
	now := c.now()
	for _, g := range c.groups {
		if g.state == stateDead {
			continue
		}
		if expired := c.expiredLocked(g, now); len(expired) > 0 {
			c.expireLocked(g, expired)
		}
		if g.idle() {
			c.dropIdleLocked(g)
		}
	}
}

// expiredLocked lists g's expired offsets, skipping keys with writes still queued (a commit about to
// land must not be deleted by a tombstone computed before it).
func (c *Coordinator) expiredLocked(g *group, now time.Time) []topicPartition {
	base, ok := c.retentionBase(g)
	if !ok {
		return nil
	}
	var out []topicPartition
	for tp, o := range g.offsets {
		if g.inflight[string(offsetKey(g.name, tp))] > 0 {
			continue
		}
		if g.state == stateStable && g.subscribedTo(tp.topic) {
			continue
		}
		if g.cg != nil && g.cg.subscribedBySome(tp.topic) {
			continue // a live consumer group's topic (KIP-211: only unsubscribed topics expire)
		}
		if expired(o, base(o), c.cfg.OffsetsRetention, now) {
			out = append(out, tp)
		}
	}
	slices.SortFunc(out, func(a, b topicPartition) int {
		return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition))
	})
	return out
}

// retentionBase is Kafka's offsetExpirationCondition: the time an offset's retention counts from, or
// false if g's offsets do not expire now.
func (c *Coordinator) retentionBase(g *group) (func(offset) time.Time, bool) {
	switch {
	case g.cg != nil && len(g.cg.members) > 0:
		return func(o offset) time.Time { return o.commitTime }, true // for topics no member subscribes to
	case g.protocolType == "":
		return func(o offset) time.Time { return o.commitTime }, true
	case g.state == stateEmpty:
		since := g.stateSince
		return func(offset) time.Time { return since }, true
	case g.protocolType == consumerProtocol && g.subscribed != nil && g.state == stateStable:
		return func(o offset) time.Time { return o.commitTime }, true
	}
	return nil, false
}

func expired(o offset, base time.Time, retention time.Duration, now time.Time) bool {
	if !o.expireTime.IsZero() {
		return !now.Before(o.expireTime)
	}
	return now.Sub(base) >= retention
}

func (c *Coordinator) expireLocked(g *group, tps []topicPartition) {
	recs := make([]Record, 0, len(tps))
	for _, tp := range tps {
		recs = append(recs, Record{Key: offsetKey(g.name, tp)})
	}
	c.cfg.Logger.Info("group: expiring offsets", "group", g.name, "partitions", len(tps))
	c.enqueueLocked(g, recs, func(int64) {
		for _, tp := range tps {
			delete(g.offsets, tp)
		}
	}, nil)
}

// dropIdleLocked forgets an Empty group that holds nothing, with a tombstone if its record was stored.
func (c *Coordinator) dropIdleLocked(g *group) {
	if !g.persisted && len(g.cgWritten) == 0 {
		delete(c.groups, g.name)
		return
	}
	c.removeGroupLocked(g)
}
