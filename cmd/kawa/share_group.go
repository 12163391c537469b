package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/kawa-broker/kawa/cmd/internal/cli"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

const shareGroupUsage = `usage: kawa share-group <list|describe|reset-offsets> [flags]

  kawa share-group list
  kawa share-group describe GROUP
  kawa share-group reset-offsets GROUP --topic T[:P,P...] (--to-earliest | --to-latest |
      --to-offset N | --to-datetime RFC3339) [--execute]

Share groups are KIP-932's queues. describe shows the members with their
assignments and, per partition, the share-partition start offset (every
record below it is acknowledged or archived), the log end offset and the
lag the broker reports. reset-offsets moves the start offsets
(AlterShareGroupOffsets, like Kafka's kafka-share-groups.sh); it works only
on an Empty group (no members), and without --execute prints the plan and
changes nothing.

Every form takes --brokers (default ` + cli.DefaultBrokers + `), --command-config and --timeout (default 10s).
`

func shareGroupCommands() []adminCmd {
	return []adminCmd{
		{"list", "kawa share-group list", 0, noFlags(shareGroupList), nil},
		{"describe", "kawa share-group describe GROUP", 1, noFlags(shareGroupDescribe), nil},
		{"reset-offsets", "kawa share-group reset-offsets GROUP --topic T[:P,P...] (--to-earliest | --to-latest | --to-offset N | --to-datetime RFC3339) [--execute]", 1, setupShareReset, nil},
	}
}

// runShareGroup implements `kawa share-group`: share-group administration
// through kadm (ListGroups with the "share" type filter, ShareGroupDescribe,
// DescribeShareGroupOffsets, AlterShareGroupOffsets).
func runShareGroup(args []string, _ io.Reader, stdout io.Writer) error {
	return runAdmin("share-group", shareGroupUsage, shareGroupCommands(), args, stdout)
}

// shareGroupList prints every share group with its state, by name.
func shareGroupList(ctx context.Context, adm *kadm.Client, _ []string, w io.Writer) error {
	groups, err := adm.ListGroupsByType(ctx, []string{"share"})
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tSTATE")
	for _, g := range groups.Sorted() {
		fmt.Fprintf(tw, "%s\t%s\n", g.Group, dash(g.State))
	}
	return tw.Flush()
}

// describeShareGroup describes one share group. Errors: the group's
// (GROUP_ID_NOT_FOUND when it is no share group).
func describeShareGroup(ctx context.Context, adm *kadm.Client, name string) (kadm.DescribedShareGroup, error) {
	ds, err := adm.DescribeShareGroups(ctx, name)
	if err != nil {
		return kadm.DescribedShareGroup{}, err
	}
	d, ok := ds[name]
	switch {
	case !ok:
		return d, fmt.Errorf("%s: not in the ShareGroupDescribe response", name)
	case d.Err != nil:
		return d, fmt.Errorf("%s: %w", name, d.Err)
	}
	return d, nil
}

// shareGroupDescribe prints the group's state and epochs, its members and
// per partition its share-partition start offset, end offset and lag.
func shareGroupDescribe(ctx context.Context, adm *kadm.Client, args []string, w io.Writer) error {
	name := args[0]
	d, err := describeShareGroup(ctx, adm, name)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "group: %s\nstate: %s\ngroup-epoch: %d\nassignment-epoch: %d\nassignor: %s\nmembers: %d\n",
		name, d.GroupState, d.GroupEpoch, d.AssignmentEpoch, dash(d.Assignor), len(d.Members))
	if len(d.Members) > 0 {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "MEMBER-ID\tEPOCH\tCLIENT-ID\tHOST\tASSIGNMENT")
		for _, m := range d.Members {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", m.MemberID, m.MemberEpoch, dash(m.ClientID), dash(m.ClientHost), topicsSet(m.Assignment))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	offs, err := shareStartOffsets(ctx, adm, name)
	if err != nil {
		return err
	}
	var topics []string
	for t := range offs {
		topics = append(topics, t)
	}
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tSTART\tEND\tLAG")
	var rows []kadm.ShareOffset
	for _, ps := range offs {
		for _, o := range ps {
			rows = append(rows, o)
		}
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].Topic != rows[j].Topic {
			return rows[i].Topic < rows[j].Topic
		}
		return rows[i].Partition < rows[j].Partition
	})
	for _, o := range rows {
		start, end, lag := "-", "-", "-"
		if o.Err != nil {
			start = errName(o.Err)
		} else if o.StartOffset >= 0 {
			start = fmt.Sprint(o.StartOffset)
		}
		if e, ok := ends.Lookup(o.Topic, o.Partition); ok && e.Err == nil {
			end = fmt.Sprint(e.Offset)
		}
		if o.Lag >= 0 {
			lag = fmt.Sprint(o.Lag)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", o.Topic, o.Partition, start, end, lag)
	}
	return tw.Flush()
}

// shareStartOffsets is DescribeShareGroupOffsets of every initialised
// share-partition of group.
func shareStartOffsets(ctx context.Context, adm *kadm.Client, group string) (kadm.ShareOffsets, error) {
	ds, err := adm.DescribeShareGroupOffsets(ctx, group)
	if err != nil {
		return nil, err
	}
	d, ok := ds[group]
	switch {
	case !ok:
		return nil, fmt.Errorf("%s: not in the DescribeShareGroupOffsets response", group)
	case d.Err != nil:
		return nil, fmt.Errorf("%s: %w", group, d.Err)
	}
	return d.Offsets, nil
}

// topicsSet renders an assignment as "t:0,1;u:2", topics sorted; "-" when
// empty.
func topicsSet(ts kadm.TopicsSet) string {
	if len(ts) == 0 {
		return "-"
	}
	var parts []string
	for t, ps := range ts {
		var nums []int32
		for p := range ps {
			nums = append(nums, p)
		}
		sort.Slice(nums, func(i, j int) bool { return nums[i] < nums[j] })
		parts = append(parts, t+":"+joinInt32(nums))
	}
	sort.Strings(parts)
	return strings.Join(parts, ";")
}

func setupShareReset(fs *cli.FlagSet) adminFunc {
	f := declareResetFlags(fs, "alter the start offsets")
	return func(ctx context.Context, adm *kadm.Client, args []string, w io.Writer) error {
		pick, err := f.target(ctx, adm)
		if err != nil {
			return err
		}
		return shareResetOffsets(ctx, adm, args[0], f.topics, pick, *f.execute, w)
	}
}

// shareResetOffsets checks the share group is Empty (or does not exist yet:
// AlterShareGroupOffsets creates it), builds the plan from the current
// share-partition start offsets, prints it and, with execute, alters them.
func shareResetOffsets(ctx context.Context, adm *kadm.Client, group string, specs topicSpecs, pick resetTarget, execute bool, w io.Writer) error {
	d, err := describeShareGroup(ctx, adm, group)
	exists := true
	switch {
	case errors.Is(err, kerr.GroupIDNotFound):
		exists = false
	case err != nil:
		return err
	case d.GroupState != "Empty":
		return fmt.Errorf("%s: start offsets can only be reset while the share group is Empty, but it is %s (stop its consumers first)", group, d.GroupState)
	}
	var current kadm.ShareOffsets
	if exists {
		if current, err = shareStartOffsets(ctx, adm, group); err != nil {
			return err
		}
	}
	return applyPlan(ctx, adm, specs, pick, execute, w, "nothing altered; add --execute to move these start offsets",
		func(topic string, p int32) int64 {
			if o, ok := current.Lookup(topic, p); ok && o.Err == nil {
				return o.StartOffset
			}
			return -1
		},
		func(offsets kadm.Offsets) (string, error) {
			resp, err := adm.AlterShareGroupOffsets(ctx, group, offsets)
			if err == nil {
				err = resp.Error()
			}
			if err != nil {
				return "", fmt.Errorf("%s: alter: %w", group, err)
			}
			return fmt.Sprintf("moved %d start offsets of share group %s", len(offsets.Sorted()), group), nil
		})
}
