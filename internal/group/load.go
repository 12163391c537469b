package group

import (
	"errors"
	"fmt"
	"time"
)

// Load replays the __consumer_offsets log, oldest record first, and replaces the coordinator's groups
// with what it describes: the last value per key wins and a tombstone deletes its key. Groups come
// back Empty with their protocol type, generation, committed offsets and staged transactional offsets
// (whose markers the transaction coordinator re-sends); members rejoin. Requests that arrive while
// Load runs get COORDINATOR_LOAD_IN_PROGRESS. Records that do not decode are skipped and reported in
// the returned error (ErrCorrupt); everything else is still loaded. Call Load before serving.
func (c *Coordinator) Load(recs []Record) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	c.loading = true
	c.mu.Unlock()

	groups, err := replay(recs, c.now())

	c.mu.Lock()
	defer c.mu.Unlock()
	for _, g := range c.groups {
		c.unloadGroupLocked(g)
	}
	c.groups = groups
	c.loading = false
	c.cfg.Logger.Info("group: loaded __consumer_offsets", "records", len(recs), "groups", len(groups))
	return err
}

// replay builds groups from the log. Only the surviving value of each key matters, so it first keeps
// the last value per key, then decodes those.
func replay(recs []Record, now time.Time) (map[string]*group, error) {
	latest := make(map[string][]byte, len(recs))
	var order []string // first-seen order, for a deterministic build
	for _, r := range recs {
		k := string(r.Key)
		if _, seen := latest[k]; !seen {
			order = append(order, k)
		}
		latest[k] = r.Value
	}
	groups := make(map[string]*group)
	get := func(name string) *group {
		if g := groups[name]; g != nil {
			return g
		}
		g := newGroup(name, now)
		groups[name] = g
		return g
	}
	var errs []error
	for _, k := range order {
		v := latest[k]
		if v == nil {
			continue
		}
		if err := replayOne([]byte(k), v, get, now); err != nil {
			errs = append(errs, err)
		}
	}
	for _, g := range groups {
		g.subscribed = g.computeSubscribed()
	}
	if len(errs) > 0 {
		return groups, fmt.Errorf("group: %d records not loaded: %w", len(errs), errors.Join(errs...))
	}
	return groups, nil
}

func replayOne(key, value []byte, get func(string) *group, now time.Time) error {
	k, err := decodeKey(key)
	if err != nil {
		return err
	}
	switch k.kind {
	case kindOffset:
		o, err := decodeOffsetValue(value)
		if err != nil {
			return err
		}
		get(k.group).offsets[k.tp] = o
	case kindStaged:
		epoch, o, err := decodeStagedValue(value)
		if err != nil {
			return err
		}
		g := get(k.group)
		st := g.txn[k.producerID]
		if st == nil {
			st = &staged{offsets: make(map[topicPartition]offset)}
			g.txn[k.producerID] = st
		}
		st.epoch = max(st.epoch, epoch)
		st.offsets[k.tp] = o
	case kindGroup:
		v, err := decodeGroupValue(value)
		if err != nil {
			return err
		}
		g := get(k.group)
		g.persisted = true
		g.protocolType, g.generation = v.protocolType, v.generation
		g.stateSince = v.stateSince
		if v.members > 0 {
			g.stateSince = now // it had members when the broker stopped: Empty from now on
		}
	}
	return nil
}
