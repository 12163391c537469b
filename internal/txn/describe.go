package txn

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Description is one transactional.id as DescribeTransactions reports it
// (KIP-664).
type Description struct {
	TransactionalID string
	Metadata
}

// Describe returns id's current state. Errors: TRANSACTIONAL_ID_NOT_FOUND,
// COORDINATOR_NOT_AVAILABLE.
func (c *Coordinator) Describe(id string) (Description, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return Description{}, kerr.CoordinatorNotAvailable
	}
	t := c.txns[id]
	if t == nil || t.cur.Epoch < 0 || t.cur.State == Dead {
		return Description{}, kerr.TransactionalIDNotFound
	}
	return Description{TransactionalID: id, Metadata: t.cur.clone()}, nil
}

// Filter selects transactions for List; zero fields select everything.
type Filter struct {
	States      []State
	ProducerIDs []int64
	// MinDuration keeps only transactions open at least this long
	// (ListTransactions v1, KIP-994); 0 keeps all.
	MinDuration time.Duration
	// Pattern keeps only transactional.ids it matches (ListTransactions v2,
	// KIP-1152; RE2 syntax). Empty keeps all.
	Pattern string
}

// List answers ListTransactions (KIP-664): the transactions matching f, by
// transactional.id. Errors: INVALID_REGULAR_EXPRESSION,
// COORDINATOR_NOT_AVAILABLE.
func (c *Coordinator) List(f Filter) ([]Description, error) {
	var re *regexp.Regexp
	if f.Pattern != "" {
		var err error
		if re, err = regexp.Compile(f.Pattern); err != nil {
			return nil, fmt.Errorf("%w: %v", kerr.InvalidRegularExpression, err)
		}
	}
	now := c.nowMs()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, kerr.CoordinatorNotAvailable
	}
	var out []Description
	for id, t := range c.txns {
		m := t.cur
		switch {
		case m.Epoch < 0 || m.State == Dead,
			len(f.States) > 0 && !slices.Contains(f.States, m.State),
			len(f.ProducerIDs) > 0 && !slices.Contains(f.ProducerIDs, m.ProducerID),
			f.MinDuration > 0 && (m.StartMs < 0 || now-m.StartMs < f.MinDuration.Milliseconds()),
			re != nil && !re.MatchString(id):
			continue
		}
		out = append(out, Description{TransactionalID: id, Metadata: m.clone()})
	}
	slices.SortFunc(out, func(a, b Description) int { return cmp.Compare(a.TransactionalID, b.TransactionalID) })
	return out, nil
}

// expirationLoop removes transactional.ids idle for Config.IDExpiration.
func (c *Coordinator) expirationLoop() {
	defer c.wg.Done()
	tk := time.NewTicker(c.cfg.ExpirationCheck)
	defer tk.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-tk.C:
			c.ExpireIDs()
		}
	}
}

// ExpireIDs removes every transactional.id with no open transaction whose
// last transition is older than Config.IDExpiration (Kafka's
// transactional.id.expiration.ms): a tombstone is written, then it is
// forgotten. It runs periodically; tests may call it.
func (c *Coordinator) ExpireIDs() {
	cutoff := c.nowMs() - c.cfg.IDExpiration.Milliseconds()
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, t := range c.txns {
		if t.busy() || t.pins > 0 || !canTransit(t.cur.State, Dead) || t.cur.UpdateMs > cutoff || c.closed {
			continue
		}
		t.pending = Dead
		c.mu.Unlock()
		err := c.store.Append(c.ctx, []Record{{Key: encodeKey(id)}})
		c.mu.Lock()
		t.pending = noState
		if err == nil && c.txns[id] == t {
			delete(c.txns, id)
			c.lg.Info("transactional.id expired", "transactional_id", id, "producer_id", t.cur.ProducerID)
		}
		t.notifyLocked()
	}
}

// ForceEpoch is a test hook: it durably sets id's epoch (state unchanged),
// so a test can start near epoch exhaustion (BL-13) without 32 000
// transactions. The transactional.id must exist and be idle.
func (c *Coordinator) ForceEpoch(id string, epoch int16) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.txns[id]
	if t == nil || t.busy() {
		return fmt.Errorf("txn: %q unknown or busy", id)
	}
	next := t.cur.clone()
	next.Epoch, next.LastEpoch = epoch, -1
	return c.transitLocked(t, next.State, next)
}
