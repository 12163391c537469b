package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/kawa-broker/kawa/cmd/internal/cli"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

const groupUsage = `usage: kawa group <list|describe|delete|reset-offsets> [flags]

  kawa group list
  kawa group describe GROUP
  kawa group delete GROUP
  kawa group reset-offsets GROUP --topic T[:P,P...] (--to-earliest | --to-latest |
      --to-offset N | --to-datetime RFC3339) [--execute]

reset-offsets works only on an Empty group (no members), like Kafka's
kafka-consumer-groups.sh: without --execute it prints the plan and commits
nothing.

Every form takes --brokers (default ` + cli.DefaultBrokers + `) and --timeout (default 10s).
`

func groupCommands() []adminCmd {
	return []adminCmd{
		{"list", "kawa group list", 0, noFlags(groupList), nil},
		{"describe", "kawa group describe GROUP", 1, noFlags(groupDescribe), nil},
		{"delete", "kawa group delete GROUP", 1, noFlags(groupDelete), nil},
		{"reset-offsets", resetSynopsis, 1, setupResetOffsets, nil},
	}
}

// runGroup implements `kawa group`: consumer-group administration through kadm.
func runGroup(args []string, _ io.Reader, stdout io.Writer) error {
	return runAdmin("group", groupUsage, groupCommands(), args, stdout)
}

// groupList prints every group with its state and protocol type, by name.
func groupList(ctx context.Context, adm *kadm.Client, _ []string, w io.Writer) error {
	groups, err := adm.ListGroups(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tSTATE\tPROTOCOL-TYPE")
	for _, g := range groups.Sorted() {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", g.Group, g.State, dash(g.ProtocolType))
	}
	return tw.Flush()
}

// errNoGroup is what describe and reset-offsets say about a group the
// coordinator does not know (DescribeGroups before v6 reports it as Dead).
func errNoGroup(name string) error {
	return fmt.Errorf("%s: %w", name, kerr.GroupIDNotFound)
}

// groupDescribe prints the group's state and protocol, its members with
// their assignments, and per partition the committed offset, end offset and
// lag (kadm.Lag: Describe + OffsetFetch + ListOffsets).
//
// A KIP-848 consumer group (ConsumerGroupDescribe knows it) is shown with its group and assignment
// epochs, assignor, each member's epoch with its current and target assignment, and the same
// per-partition table.
func groupDescribe(ctx context.Context, adm *kadm.Client, args []string, w io.Writer) error {
	name := args[0]
	if ds, err := adm.DescribeConsumerGroups(ctx, name); err == nil && ds[name].Err == nil {
		return describeConsumerGroup(ctx, adm, ds[name], w)
	} // else a classic group, an unknown one, or a broker without ConsumerGroupDescribe
	lags, err := adm.Lag(ctx, name)
	if err != nil {
		return err
	}
	l, ok := lags[name]
	switch {
	case !ok:
		return fmt.Errorf("%s: not in the DescribeGroups response", name)
	case l.Error() != nil:
		return fmt.Errorf("%s: %w", name, l.Error())
	case l.State == "Dead":
		return errNoGroup(name)
	}
	fmt.Fprintf(w, "group: %s\nstate: %s\nprotocol-type: %s\nprotocol: %s\nmembers: %d\n",
		name, l.State, dash(l.ProtocolType), dash(l.Protocol), len(l.Members))
	if len(l.Members) > 0 {
		fmt.Fprintln(w)
		if err := writeMembers(w, l.Members); err != nil {
			return err
		}
	}
	fmt.Fprintln(w)
	return writeLag(w, l.Lag)
}

func describeConsumerGroup(ctx context.Context, adm *kadm.Client, d kadm.DescribedConsumerGroup, w io.Writer) error {
	fmt.Fprintf(w, "group: %s\ntype: consumer\nstate: %s\ngroup-epoch: %d\nassignment-epoch: %d\nassignor: %s\nmembers: %d\n",
		d.Group, d.State, d.Epoch, d.AssignmentEpoch, dash(d.AssignorName), len(d.Members))
	owner := map[string]map[int32]string{}
	if len(d.Members) > 0 {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "MEMBER-ID\tINSTANCE-ID\tCLIENT-ID\tHOST\tEPOCH\tASSIGNMENT\tTARGET")
		for _, m := range d.Members {
			inst := "-"
			if m.InstanceID != nil {
				inst = *m.InstanceID
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", m.MemberID, inst, dash(m.ClientID), dash(m.ClientHost),
				m.MemberEpoch, topicsCell(m.Assignment.Sorted()), topicsCell(m.TargetAssignment.Sorted()))
			m.Assignment.Each(func(t string, p int32) {
				if owner[t] == nil {
					owner[t] = map[int32]string{}
				}
				owner[t][p] = m.MemberID
			})
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	commits, err := adm.FetchOffsets(ctx, d.Group)
	if err != nil {
		return err
	}
	parts := d.AssignedPartitions()
	commits.Each(func(o kadm.OffsetResponse) { parts.Merge(kadm.TopicsSet{o.Topic: {o.Partition: {}}}) })
	var ends kadm.ListedOffsets
	if topics := parts.Topics(); len(topics) > 0 {
		if ends, err = adm.ListEndOffsets(ctx, topics...); err != nil {
			return err
		}
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tCOMMITTED\tEND\tLAG\tMEMBER-ID")
	for _, tp := range parts.Sorted() {
		for _, p := range tp.Partitions {
			committed, end, lag, member := "-", "-", "-", dash(owner[tp.Topic][p])
			c, cok := commits.Lookup(tp.Topic, p)
			e, eok := ends.Lookup(tp.Topic, p)
			if cok && c.Err == nil && c.At >= 0 {
				committed = fmt.Sprint(c.At)
			}
			if eok && e.Err == nil {
				end = fmt.Sprint(e.Offset)
				lag = fmt.Sprint(e.Offset) // nothing committed: all of it, as kadm.Lag counts
				if committed != "-" {
					lag = fmt.Sprint(max(e.Offset-c.At, 0))
				}
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", tp.Topic, p, committed, end, lag, member)
		}
	}
	return tw.Flush()
}

// topicsCell renders partitions as "t:0,1;u:2" (topics and partitions sorted), "-" for none.
func topicsCell(l kadm.TopicsList) string {
	parts := make([]string, 0, len(l))
	for _, t := range l {
		if len(t.Partitions) > 0 {
			parts = append(parts, t.Topic+":"+joinInt32(t.Partitions))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ";")
}

func writeMembers(w io.Writer, members []kadm.DescribedGroupMember) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMBER-ID\tINSTANCE-ID\tCLIENT-ID\tHOST\tASSIGNMENT")
	for _, m := range members {
		inst := "-"
		if m.InstanceID != nil {
			inst = *m.InstanceID
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", m.MemberID, inst, dash(m.ClientID), dash(m.ClientHost), assignment(m))
	}
	return tw.Flush()
}

// assignment renders a consumer member's partitions as "t:0,1;u:2", topics
// sorted; "-" when it has none or the group is not a consumer group.
func assignment(m kadm.DescribedGroupMember) string {
	c, ok := m.Assigned.AsConsumer()
	if !ok {
		return "-"
	}
	s := kadm.TopicsSet{}
	for _, t := range c.Topics {
		if s[t.Topic] == nil {
			s[t.Topic] = map[int32]struct{}{}
		}
		for _, p := range t.Partitions {
			s[t.Topic][p] = struct{}{}
		}
	}
	return topicsCell(s.Sorted())
}

// writeLag prints one row per partition the group is assigned or has
// committed: committed offset ("-" if none), log end offset, lag and owner.
func writeLag(w io.Writer, lag kadm.GroupLag) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tCOMMITTED\tEND\tLAG\tMEMBER-ID")
	for _, p := range lag.Sorted() {
		committed, end, lagCell, member := "-", "-", "-", "-"
		if p.Commit.At >= 0 {
			committed = fmt.Sprint(p.Commit.At)
		}
		if p.End.Err == nil {
			end = fmt.Sprint(p.End.Offset)
		}
		if p.Err != nil {
			lagCell = errName(p.Err)
		} else if p.Lag >= 0 {
			lagCell = fmt.Sprint(p.Lag)
		}
		if p.Member != nil {
			member = p.Member.MemberID
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", p.Topic, p.Partition, committed, end, lagCell, member)
	}
	return tw.Flush()
}

func groupDelete(ctx context.Context, adm *kadm.Client, args []string, w io.Writer) error {
	resp, err := adm.DeleteGroup(ctx, args[0])
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return fmt.Errorf("%s: %w", args[0], err)
	}
	fmt.Fprintf(w, "deleted group %s\n", args[0])
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
