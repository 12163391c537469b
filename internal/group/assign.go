package group

import (
	"cmp"
	"slices"
)

// The server-side assignors of KIP-848 consumer groups (group.consumer.assignors): "uniform"
// (Kafka's UniformAssignor: balanced over the members subscribed to each topic, sticky: a member
// keeps what it has as long as the balance allows) and "range" (Kafka's RangeAssignor: per topic,
// members in member-ID order get contiguous ranges, the first ones one partition more).

const (
	assignorUniform = "uniform"
	assignorRange   = "range"
)

// TopicInfo is one topic the consumer-group assignors may assign: its name, topic ID and
// partition count.
type TopicInfo struct {
	Name       string
	ID         [16]byte
	Partitions int32
}

// assignInput is one member as an assignor sees it.
type assignInput struct {
	id      string
	topics  map[string]bool         // subscribed topics that exist
	current map[topicPartition]bool // its current target assignment (stickiness)
}

// assign computes the target assignment of members over topics (name -> partition count) with the
// named assignor. Every partition of a topic with at least one subscriber is assigned to exactly one
// subscriber.
func assign(assignor string, members []assignInput, topics map[string]int32) map[string]map[topicPartition]bool {
	out := make(map[string]map[topicPartition]bool, len(members))
	for _, m := range members {
		out[m.id] = map[topicPartition]bool{}
	}
	names := make([]string, 0, len(topics))
	for t := range topics {
		names = append(names, t)
	}
	slices.Sort(names)
	for _, t := range names {
		var subs []assignInput
		for _, m := range members {
			if m.topics[t] {
				subs = append(subs, m)
			}
		}
		if len(subs) == 0 {
			continue
		}
		slices.SortFunc(subs, func(a, b assignInput) int { return cmp.Compare(a.id, b.id) })
		n := topics[t]
		if assignor == assignorRange {
			assignRange(t, n, subs, out)
		} else {
			assignUniform(t, n, subs, out)
		}
	}
	return out
}

// assignRange gives subscriber i of k the partitions [i*q+min(i,r), ...) of n = q*k + r.
func assignRange(topic string, n int32, subs []assignInput, out map[string]map[topicPartition]bool) {
	k := int32(len(subs))
	q, r := n/k, n%k
	p := int32(0)
	for i, m := range subs {
		cnt := q
		if int32(i) < r {
			cnt++
		}
		for range cnt {
			out[m.id][topicPartition{topic, p}] = true
			p++
		}
	}
}

// assignUniform balances topic's n partitions over subs (each gets n/k or n/k+1) keeping every
// partition a member already holds while that member is under its quota.
func assignUniform(topic string, n int32, subs []assignInput, out map[string]map[topicPartition]bool) {
	k := int32(len(subs))
	q, r := n/k, n%k
	quota := make(map[string]int32, len(subs))
	for i, m := range subs {
		quota[m.id] = q
		if int32(i) < r {
			quota[m.id]++
		}
	}
	// Members that already hold more partitions of the topic get the larger quotas, so fewer move.
	held := func(m assignInput) int32 {
		var c int32
		for tp := range m.current {
			if tp.topic == topic && tp.partition < n {
				c++
			}
		}
		return c
	}
	byHeld := slices.Clone(subs)
	slices.SortStableFunc(byHeld, func(a, b assignInput) int { return cmp.Compare(held(b), held(a)) })
	for i, m := range byHeld {
		quota[m.id] = q
		if int32(i) < r {
			quota[m.id]++
		}
	}
	taken := make([]bool, n)
	for _, m := range byHeld {
		var mine []int32
		for tp := range m.current {
			if tp.topic == topic && tp.partition < n && !taken[tp.partition] {
				mine = append(mine, tp.partition)
			}
		}
		slices.Sort(mine)
		for _, p := range mine {
			if int32(len(out[m.id]))-countOther(out[m.id], topic) >= quota[m.id] {
				break
			}
			out[m.id][topicPartition{topic, p}] = true
			taken[p] = true
		}
	}
	p := int32(0)
	for _, m := range subs {
		for int32(len(out[m.id]))-countOther(out[m.id], topic) < quota[m.id] {
			for taken[p] {
				p++
			}
			out[m.id][topicPartition{topic, p}] = true
			taken[p] = true
		}
	}
}

// countOther counts the partitions of set that are not of topic.
func countOther(set map[topicPartition]bool, topic string) int32 {
	var c int32
	for tp := range set {
		if tp.topic != topic {
			c++
		}
	}
	return c
}
