package main

import (
	"context"
	"fmt"
	"io"
	"sort"
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
		{"list", "kawa group list", 0, noFlags(groupList)},
		{"describe", "kawa group describe GROUP", 1, noFlags(groupDescribe)},
		{"delete", "kawa group delete GROUP", 1, noFlags(groupDelete)},
		{"reset-offsets", resetSynopsis, 1, setupResetOffsets},
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
func groupDescribe(ctx context.Context, adm *kadm.Client, args []string, w io.Writer) error {
	name := args[0]
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
	if !ok || len(c.Topics) == 0 {
		return "-"
	}
	parts := make([]string, 0, len(c.Topics))
	for _, t := range c.Topics {
		ps := append([]int32(nil), t.Partitions...)
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
		parts = append(parts, t.Topic+":"+joinInt32(ps))
	}
	sort.Strings(parts)
	return strings.Join(parts, ";")
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
