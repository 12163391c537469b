package verify

import (
	"fmt"
	"strings"
	"time"
)

// Semantic is a delivery guarantee under test.
type Semantic string

// The three delivery semantics.
const (
	AtMostOnce  Semantic = "at-most-once"
	AtLeastOnce Semantic = "at-least-once"
	ExactlyOnce Semantic = "exactly-once"
	// Share is KIP-932 share-group (queue) delivery: every record
	// acknowledged (accepted or rejected) or archived after
	// share.delivery.count.limit deliveries, never delivered after a
	// confirmed accept or reject.
	Share Semantic = "share"
)

// AllSemantics lists the semantics "all" runs, in report order. Share is
// not among them: it is selected by name (--semantics share, or a list).
var AllSemantics = []Semantic{AtMostOnce, AtLeastOnce, ExactlyOnce}

// ParseSemantics parses a comma-separated list of at-most-once,
// at-least-once, exactly-once, share and all (the first three).
func ParseSemantics(s string) ([]Semantic, error) {
	var out []Semantic
	seen := map[Semantic]bool{}
	for _, p := range strings.Split(s, ",") {
		sems := []Semantic{Semantic(strings.TrimSpace(p))}
		switch sems[0] {
		case "all":
			sems = AllSemantics
		case AtMostOnce, AtLeastOnce, ExactlyOnce, Share:
		default:
			return nil, fmt.Errorf("unknown semantic %q (want at-most-once, at-least-once, exactly-once, share or all)", p)
		}
		for _, sem := range sems {
			if !seen[sem] {
				seen[sem] = true
				out = append(out, sem)
			}
		}
	}
	return out, nil
}

// short is the tag used in topic, group and worker names.
func (s Semantic) short() string {
	switch s {
	case AtMostOnce:
		return "amo"
	case AtLeastOnce:
		return "alo"
	case Share:
		return "shr"
	}
	return "eos"
}

// TopicRole says how a topic is written and read, which decides its checks.
type TopicRole string

// Topic roles.
const (
	RoleQueue TopicRole = "queue" // producers → consumer group (workload a)
	RoleIn    TopicRole = "in"    // idempotent producers → EOS pipeline (workload b)
	RoleOut   TopicRole = "out"   // EOS pipeline output, transactional (workload b)
	RoleTxn   TopicRole = "txn"   // transactional multi-partition writes (workload c)
	RoleShare TopicRole = "share" // idempotent producers → share group (workload d)
)

// TopicPlan is one topic of a run.
type TopicPlan struct {
	Name       string    `json:"name"`
	Semantic   Semantic  `json:"semantic"`
	Role       TopicRole `json:"role"`
	Partitions int32     `json:"partitions"`
}

// GroupPlan is one consumer group of a run.
type GroupPlan struct {
	Name     string   `json:"name"`
	Semantic Semantic `json:"semantic"`
	Topic    string   `json:"topic"`
}

// ShareGroupPlan is one share group (KIP-932) of a run and the group
// configs the run sets on it (IncrementalAlterConfigs, GROUP resource).
type ShareGroupPlan struct {
	Name  string `json:"name"`
	Topic string `json:"topic"`
	// DeliveryLimit is share.delivery.count.limit: acquisitions of a
	// record before it is archived.
	DeliveryLimit int `json:"delivery_limit"`
	// Lock is share.record.lock.duration.ms.
	Lock time.Duration `json:"lock"`
}

// Plan is the static shape of a run: topics, groups and worker slots. The
// checkers need it to interpret the history.
type Plan struct {
	RunID       string           `json:"run_id"`
	Topics      []TopicPlan      `json:"topics"`
	Groups      []GroupPlan      `json:"groups"`
	ShareGroups []ShareGroupPlan `json:"share_groups,omitempty"`
	Slots       []WorkerSpec     `json:"slots"`
}

// Topic returns the plan of the named topic.
func (p *Plan) Topic(name string) (TopicPlan, bool) {
	for _, t := range p.Topics {
		if t.Name == name {
			return t, true
		}
	}
	return TopicPlan{}, false
}

// topicOf returns the name of the topic with the given semantic and role.
func (p *Plan) topicOf(sem Semantic, role TopicRole) string {
	for _, t := range p.Topics {
		if t.Semantic == sem && t.Role == role {
			return t.Name
		}
	}
	return ""
}

// Worker roles.
const (
	WorkerProducer = "producer"
	WorkerConsumer = "consumer"
	WorkerPipeline = "pipeline"
	WorkerTxn      = "txnwriter"
	WorkerReader   = "reader"
	WorkerShare    = "share"
)

// WorkerSpec tells a worker what to do. The controller passes it as JSON to
// `kawa verify worker`; one slot's spec is reused, with a new Name, each time
// the slot's worker is restarted.
type WorkerSpec struct {
	Slot       string        `json:"slot"`
	Name       string        `json:"name,omitempty"` // instance: "<slot>.<incarnation>"
	Role       string        `json:"role"`
	Semantic   Semantic      `json:"semantic"`
	Brokers    []string      `json:"brokers,omitempty"`
	Topics     []string      `json:"topics"`
	Group      string        `json:"group,omitempty"`
	TxnID      string        `json:"txn_id,omitempty"`
	Iso        Isolation     `json:"iso,omitempty"`
	Rate       int           `json:"rate,omitempty"` // records (or transactions) per second
	Seed       uint64        `json:"seed,omitempty"`
	Partitions int32         `json:"partitions,omitempty"`
	ProcDelay  time.Duration `json:"proc_delay,omitempty"`
	Session    time.Duration `json:"session_timeout,omitempty"`
	TxnTimeout time.Duration `json:"txn_timeout,omitempty"`
	// Drain makes a share member accept every record but the poison ones
	// (the end-of-run drain).
	Drain bool `json:"drain,omitempty"`
}

// crashable reports whether the client-crash fault may pick this slot.
// Readers only observe, so crashing them tests nothing.
func (w WorkerSpec) crashable() bool { return w.Role != WorkerReader }

// PlanOptions sizes a run.
type PlanOptions struct {
	RunID      string
	Semantics  []Semantic
	Partitions int32         // per topic; default 3
	Rate       int           // records per second per producer; default 200
	ProcDelay  time.Duration // simulated processing time per batch; default 20ms
	Session    time.Duration // consumer group session timeout; default 6s
	TxnTimeout time.Duration // transaction timeout; default 10s
	Seed       uint64
}

func (o *PlanOptions) defaults() {
	if o.Partitions <= 0 {
		o.Partitions = 3
	}
	if o.Rate <= 0 {
		o.Rate = 200
	}
	if o.ProcDelay <= 0 {
		o.ProcDelay = 20 * time.Millisecond
	}
	if o.Session <= 0 {
		o.Session = 6 * time.Second
	}
	if o.TxnTimeout <= 0 {
		o.TxnTimeout = 10 * time.Second
	}
}

// The share workload's shape: few partitions and more members than
// partitions, so members share partitions (KIP-932's point); a low
// delivery-count limit and a short lock, so poison records reach the limit
// and a crashed member's records come back within a run.
const (
	sharePartitions    = 2
	shareMembers       = 3
	shareDeliveryLimit = 4
	shareLock          = 3 * time.Second
)

// NewPlan lays out topics, groups and worker slots for the semantics:
// at-most-once and at-least-once each get a queue (workload a: two producers,
// a group of two consumers); exactly-once gets the pipeline (workload b: two
// idempotent producers, two transactional consume-transform-produce members)
// and transactional writes (workload c: two writers, one read_committed and
// one read_uncommitted reader over the transactional topics); share gets
// its own topic of two partitions, two idempotent producers and a share
// group of three members (workload d).
func NewPlan(o PlanOptions) *Plan {
	o.defaults()
	p := &Plan{RunID: o.RunID}
	base := WorkerSpec{Partitions: o.Partitions, ProcDelay: o.ProcDelay, Session: o.Session, TxnTimeout: o.TxnTimeout, Rate: o.Rate}
	name := func(sem Semantic, s string) string { return "kv-" + o.RunID + "-" + sem.short() + s }
	add := func(w WorkerSpec) {
		w.Seed = o.Seed*1000 + uint64(len(p.Slots))
		p.Slots = append(p.Slots, w)
	}
	for _, sem := range o.Semantics {
		tag := sem.short()
		if sem == Share {
			topic := name(sem, "")
			p.Topics = append(p.Topics, TopicPlan{topic, sem, RoleShare, sharePartitions})
			p.ShareGroups = append(p.ShareGroups, ShareGroupPlan{Name: topic, Topic: topic,
				DeliveryLimit: shareDeliveryLimit, Lock: shareLock})
			for i := range 2 {
				w := base
				w.Slot, w.Role, w.Semantic, w.Topics = fmt.Sprintf("%s-p%d", tag, i), WorkerProducer, sem, []string{topic}
				w.Partitions = sharePartitions
				add(w)
			}
			for i := range shareMembers {
				w := base
				w.Slot, w.Role, w.Semantic, w.Topics, w.Group = fmt.Sprintf("%s-m%d", tag, i), WorkerShare, sem, []string{topic}, topic
				w.Partitions = sharePartitions
				add(w)
			}
			continue
		}
		if sem != ExactlyOnce {
			topic, group := name(sem, ""), name(sem, "")
			p.Topics = append(p.Topics, TopicPlan{topic, sem, RoleQueue, o.Partitions})
			p.Groups = append(p.Groups, GroupPlan{group, sem, topic})
			for i := range 2 {
				w := base
				w.Slot, w.Role, w.Semantic, w.Topics = fmt.Sprintf("%s-p%d", tag, i), WorkerProducer, sem, []string{topic}
				add(w)
			}
			for i := range 2 {
				w := base
				w.Slot, w.Role, w.Semantic, w.Topics, w.Group = fmt.Sprintf("%s-c%d", tag, i), WorkerConsumer, sem, []string{topic}, group
				add(w)
			}
			continue
		}
		in, out, txn, group := name(sem, "-in"), name(sem, "-out"), name(sem, "-txn"), name(sem, "")
		p.Topics = append(p.Topics,
			TopicPlan{in, sem, RoleIn, o.Partitions},
			TopicPlan{out, sem, RoleOut, o.Partitions},
			TopicPlan{txn, sem, RoleTxn, o.Partitions})
		p.Groups = append(p.Groups, GroupPlan{group, sem, in})
		for i := range 2 {
			w := base
			w.Slot, w.Role, w.Semantic, w.Topics = fmt.Sprintf("eos-p%d", i), WorkerProducer, sem, []string{in}
			add(w)
		}
		for i := range 2 {
			w := base
			w.Slot, w.Role, w.Semantic, w.Topics, w.Group = fmt.Sprintf("eos-x%d", i), WorkerPipeline, sem, []string{in, out}, group
			w.TxnID = "kv-" + o.RunID + "-" + w.Slot
			add(w)
		}
		for i := range 2 {
			w := base
			w.Slot, w.Role, w.Semantic, w.Topics = fmt.Sprintf("eos-t%d", i), WorkerTxn, sem, []string{txn}
			w.TxnID = "kv-" + o.RunID + "-" + w.Slot
			w.Rate = max(1, o.Rate/20)
			add(w)
		}
		for _, iso := range []Isolation{ReadCommitted, ReadUncommitted} {
			w := base
			w.Slot, w.Role, w.Semantic, w.Topics, w.Iso = "eos-r"+iso.String(), WorkerReader, sem, []string{txn, out}, iso
			add(w)
		}
	}
	return p
}
