package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kawa-broker/kawa/cmd/internal/cli"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

const resetSynopsis = "kawa group reset-offsets GROUP --topic T[:P,P...] (--to-earliest | --to-latest | --to-offset N | --to-datetime RFC3339) [--execute]"

// topicSpec is one --topic value: a topic and optionally some of its
// partitions (nil: all of them), Kafka's "topic:0,1" form.
type topicSpec struct {
	topic      string
	partitions []int32
}

// topicSpecs is the repeatable --topic flag.
type topicSpecs []topicSpec

func (s *topicSpecs) String() string {
	if s == nil {
		return ""
	}
	var parts []string
	for _, t := range *s {
		parts = append(parts, t.topic)
	}
	return strings.Join(parts, ",")
}

func (s *topicSpecs) Set(v string) error {
	topic, list, hasList := strings.Cut(v, ":")
	if topic == "" {
		return fmt.Errorf("empty topic in %q", v)
	}
	spec := topicSpec{topic: topic}
	if hasList {
		for _, p := range strings.Split(list, ",") {
			n, err := strconv.ParseInt(strings.TrimSpace(p), 10, 32)
			if err != nil || n < 0 {
				return fmt.Errorf("bad partition %q in %q", p, v)
			}
			spec.partitions = append(spec.partitions, int32(n))
		}
	}
	*s = append(*s, spec)
	return nil
}

// resetPlan is one partition's reset: its committed offset now (-1: none)
// and the offset to commit.
type resetPlan struct {
	topic     string
	partition int32
	current   int64
	target    int64
}

// resetTarget picks the new offset for a partition from its start and end
// offsets (and the by-time lookup for --to-datetime).
type resetTarget func(topic string, p int32, start, end int64) (int64, error)

// resetFlags are reset-offsets' flags shared by `kawa group` and `kawa
// share-group`: the partitions and where to move them.
type resetFlags struct {
	fs       *cli.FlagSet
	topics   topicSpecs
	earliest *bool
	latest   *bool
	toOffset *int64
	datetime *string
	execute  *bool
}

func declareResetFlags(fs *cli.FlagSet, what string) *resetFlags {
	f := &resetFlags{fs: fs}
	fs.Var(&f.topics, "topic", "topic to reset, optionally with partitions: `T` or T:0,2 (repeatable)")
	f.earliest = fs.Bool("to-earliest", false, "reset to each partition's log start offset")
	f.latest = fs.Bool("to-latest", false, "reset to each partition's log end offset")
	f.toOffset = fs.Int64("to-offset", 0, "reset to offset `N`, clamped to [log start, log end]")
	f.datetime = fs.String("to-datetime", "", "reset to the first offset with a timestamp at or after `TIME` (RFC 3339)")
	f.execute = fs.Bool("execute", false, what+" (default: print the plan only)")
	return f
}

// target checks the flags (a usage error unless --topic and exactly one
// --to-* are given) and returns how to pick each partition's new offset.
func (f *resetFlags) target(ctx context.Context, adm *kadm.Client) (resetTarget, error) {
	fs := f.fs
	if len(f.topics) == 0 {
		return nil, fs.UsageErr("--topic is required")
	}
	n := 0
	for _, given := range []bool{*f.earliest, *f.latest, cli.IsSet(fs, "to-offset"), cli.IsSet(fs, "to-datetime")} {
		if given {
			n++
		}
	}
	if n != 1 {
		return nil, fs.UsageErr("give exactly one of --to-earliest, --to-latest, --to-offset, --to-datetime")
	}
	switch {
	case *f.earliest:
		return func(_ string, _ int32, start, _ int64) (int64, error) { return start, nil }, nil
	case *f.latest:
		return func(_ string, _ int32, _, end int64) (int64, error) { return end, nil }, nil
	case cli.IsSet(fs, "to-offset"):
		if *f.toOffset < 0 {
			return nil, fs.UsageErr("--to-offset must be >= 0, got %d", *f.toOffset)
		}
		to := *f.toOffset
		return func(_ string, _ int32, start, end int64) (int64, error) { return min(max(to, start), end), nil }, nil
	}
	at, err := time.Parse(time.RFC3339Nano, *f.datetime)
	if err != nil {
		return nil, fs.UsageErr("--to-datetime: %v", err)
	}
	byTime, err := adm.ListOffsetsAfterMilli(ctx, at.UnixMilli(), specTopics(f.topics)...)
	if err != nil {
		return nil, err
	}
	return listedTarget(byTime), nil
}

func setupResetOffsets(fs *cli.FlagSet) func(context.Context, *kadm.Client, []string, io.Writer) error {
	f := declareResetFlags(fs, "commit the plan")
	return func(ctx context.Context, adm *kadm.Client, args []string, w io.Writer) error {
		pick, err := f.target(ctx, adm)
		if err != nil {
			return err
		}
		return resetOffsets(ctx, adm, args[0], f.topics, pick, *f.execute, w)
	}
}

// listedTarget answers from a by-time ListOffsets result (kadm already maps
// "no record at or after the time" to the end offset).
func listedTarget(l kadm.ListedOffsets) resetTarget {
	return func(topic string, p int32, _, _ int64) (int64, error) {
		o, ok := l.Lookup(topic, p)
		switch {
		case !ok:
			return 0, fmt.Errorf("%s[%d]: no offset for the time", topic, p)
		case o.Err != nil:
			return 0, fmt.Errorf("%s[%d]: %w", topic, p, o.Err)
		}
		return o.Offset, nil
	}
}

func specTopics(specs topicSpecs) []string {
	var out []string
	for _, s := range specs {
		if !slices.Contains(out, s.topic) {
			out = append(out, s.topic)
		}
	}
	return out
}

// resetOffsets checks the group is Empty, builds the plan, prints it and,
// with execute, commits it as an admin commit (generation -1, no member),
// which the coordinator accepts only while the group has no members.
func resetOffsets(ctx context.Context, adm *kadm.Client, group string, specs topicSpecs, pick resetTarget, execute bool, w io.Writer) error {
	described, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return err
	}
	d, err := described.On(group, nil)
	if err == nil {
		err = d.Err
	}
	if errors.Is(err, kerr.GroupIDNotFound) {
		// DescribeGroups v6+ (KIP-1043) reports a group that does not exist
		// this way; older versions answer Dead. Both may be given offsets.
		d.State, err = "Dead", nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w", group, err)
	}
	if d.State != "Empty" && d.State != "Dead" {
		return fmt.Errorf("%s: offsets can only be reset while the group is Empty, but it is %s (stop its consumers first)", group, d.State)
	}
	committed, err := adm.FetchOffsets(ctx, group)
	if err == nil {
		err = committed.Error()
	}
	if err != nil {
		return fmt.Errorf("%s: fetch offsets: %w", group, err)
	}
	return applyPlan(ctx, adm, specs, pick, execute, w, "nothing committed; add --execute to commit these offsets",
		func(topic string, p int32) int64 {
			if c, ok := committed.Lookup(topic, p); ok && c.Err == nil {
				return c.At
			}
			return -1
		},
		func(offsets kadm.Offsets) (string, error) {
			resp, err := adm.CommitOffsets(ctx, group, offsets)
			if err == nil {
				err = resp.Error()
			}
			if err != nil {
				return "", fmt.Errorf("%s: commit: %w", group, err)
			}
			return fmt.Sprintf("committed %d offsets for group %s", len(offsets.Sorted()), group), nil
		})
}

// applyPlan builds the plan (current gives each partition's offset now,
// -1: none), prints it and, with execute, hands its offsets to apply,
// printing what apply reports; without, it says dry.
func applyPlan(ctx context.Context, adm *kadm.Client, specs topicSpecs, pick resetTarget, execute bool, w io.Writer, dry string,
	current func(topic string, p int32) int64, apply func(kadm.Offsets) (string, error)) error {
	plan, err := buildPlan(ctx, adm, specs, pick, current)
	if err != nil {
		return err
	}
	if err := writePlan(w, plan); err != nil {
		return err
	}
	if !execute {
		fmt.Fprintln(w, "dry run: "+dry)
		return nil
	}
	offsets := make(kadm.Offsets)
	for _, p := range plan {
		offsets.Add(kadm.Offset{Topic: p.topic, Partition: p.partition, At: p.target, LeaderEpoch: -1})
	}
	done, err := apply(offsets)
	if err != nil {
		return err
	}
	fmt.Fprintln(w, done)
	return nil
}

// buildPlan resolves the specs to partitions (every partition of a topic
// without a list), and picks each target from the log start and end;
// current gives a partition's offset now (-1: none).
func buildPlan(ctx context.Context, adm *kadm.Client, specs topicSpecs, pick resetTarget, current func(topic string, p int32) int64) ([]resetPlan, error) {
	names := specTopics(specs)
	topics, err := adm.ListTopics(ctx, names...)
	if err != nil {
		return nil, err
	}
	starts, err := adm.ListStartOffsets(ctx, names...)
	if err != nil {
		return nil, err
	}
	ends, err := adm.ListEndOffsets(ctx, names...)
	if err != nil {
		return nil, err
	}
	var plan []resetPlan
	seen := make(map[resetPlan]bool)
	for _, s := range specs {
		parts, err := specPartitions(topics, s)
		if err != nil {
			return nil, err
		}
		for _, p := range parts {
			rp, err := planPartition(s.topic, p, starts, ends, pick)
			if err != nil {
				return nil, err
			}
			rp.current = current(s.topic, p)
			key := resetPlan{topic: rp.topic, partition: rp.partition}
			if !seen[key] {
				seen[key] = true
				plan = append(plan, rp)
			}
		}
	}
	return plan, nil
}

func specPartitions(topics kadm.TopicDetails, s topicSpec) ([]int32, error) {
	t, ok := topics[s.topic]
	if !ok {
		return nil, fmt.Errorf("%s: %w", s.topic, kerr.UnknownTopicOrPartition)
	}
	if t.Err != nil {
		return nil, fmt.Errorf("%s: %w", s.topic, t.Err)
	}
	if s.partitions == nil {
		return t.Partitions.Numbers(), nil
	}
	for _, p := range s.partitions {
		if _, ok := t.Partitions[p]; !ok {
			return nil, fmt.Errorf("%s[%d]: %w", s.topic, p, kerr.UnknownTopicOrPartition)
		}
	}
	return s.partitions, nil
}

func planPartition(topic string, p int32, starts, ends kadm.ListedOffsets, pick resetTarget) (resetPlan, error) {
	start, ok1 := starts.Lookup(topic, p)
	end, ok2 := ends.Lookup(topic, p)
	switch {
	case !ok1 || !ok2:
		return resetPlan{}, fmt.Errorf("%s[%d]: log offsets not listed", topic, p)
	case start.Err != nil:
		return resetPlan{}, fmt.Errorf("%s[%d]: %w", topic, p, start.Err)
	case end.Err != nil:
		return resetPlan{}, fmt.Errorf("%s[%d]: %w", topic, p, end.Err)
	}
	target, err := pick(topic, p, start.Offset, end.Offset)
	if err != nil {
		return resetPlan{}, err
	}
	return resetPlan{topic: topic, partition: p, target: target}, nil
}

func writePlan(w io.Writer, plan []resetPlan) error {
	slices.SortFunc(plan, func(a, b resetPlan) int {
		if c := strings.Compare(a.topic, b.topic); c != 0 {
			return c
		}
		return int(a.partition - b.partition)
	})
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tCURRENT\tNEW")
	for _, p := range plan {
		cur := "-"
		if p.current >= 0 {
			cur = fmt.Sprint(p.current)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\n", p.topic, p.partition, cur, p.target)
	}
	return tw.Flush()
}
