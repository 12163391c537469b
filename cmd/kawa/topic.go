package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kawa-broker/kawa/cmd/internal/cli"
	"github.com/twmb/franz-go/pkg/kadm"
)

const topicUsage = `usage: kawa topic <create|list|describe|alter-config|delete> [flags]

  kawa topic create NAME [--partitions N] [--replication-factor R] [--config k=v ...]
  kawa topic list
  kawa topic describe NAME
  kawa topic alter-config NAME [--set k=v ...] [--delete k ...]
  kawa topic delete NAME

Every form takes --brokers (default ` + cli.DefaultBrokers + `) and --timeout (default 10s; for
create, 10s plus 10ms per partition).
`

func topicCommands() []adminCmd {
	return []adminCmd{
		{"create", "kawa topic create NAME [--partitions N] [--replication-factor R] [--config k=v ...]", 1, setupTopicCreate, createTime},
		{"list", "kawa topic list", 0, noFlags(topicList), nil},
		{"describe", "kawa topic describe NAME", 1, noFlags(topicDescribe), nil},
		{"alter-config", "kawa topic alter-config NAME [--set k=v ...] [--delete k ...]", 1, setupTopicAlterConfig, nil},
		{"delete", "kawa topic delete NAME", 1, noFlags(topicDelete), nil},
	}
}

// runTopic implements `kawa topic`: topic administration through kadm.
func runTopic(args []string, _ io.Reader, stdout io.Writer) error {
	return runAdmin("topic", topicUsage, topicCommands(), args, stdout)
}

// createTime is the time `topic create` adds to the default --timeout: 10 ms
// per partition (each is a directory and segment files made durable; 2,000
// took 11 s on a shared 2-core machine before partitions were opened in
// parallel).
func createTime(fs *cli.FlagSet) time.Duration {
	n, _ := fs.Lookup("partitions").Value.(flag.Getter).Get().(int)
	return time.Duration(max(n, 0)) * 10 * time.Millisecond
}

func setupTopicCreate(fs *cli.FlagSet) func(context.Context, *kadm.Client, []string, io.Writer) error {
	partitions := fs.Int("partitions", 1, "number of partitions")
	replication := fs.Int("replication-factor", 1, "replicas per partition (-1: broker default)")
	var configs cli.KVList
	fs.Var(&configs, "config", "topic config `key=value` (repeatable)")
	return func(ctx context.Context, adm *kadm.Client, args []string, w io.Writer) error {
		if *partitions < 1 || *partitions > 1<<20 {
			return fs.UsageErr("--partitions must be between 1 and %d, got %d", 1<<20, *partitions)
		}
		if *replication == 0 || *replication < -1 || *replication > 1<<15-1 {
			return fs.UsageErr("--replication-factor must be -1 or positive, got %d", *replication)
		}
		resp, err := adm.CreateTopic(ctx, int32(*partitions), int16(*replication), configs.Configs(), args[0])
		if resp.Err != nil {
			// kadm returns resp.Err as err too; add the broker's message.
			err = cli.WithMessage(resp.Err, resp.ErrMessage)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", args[0], err)
		}
		fmt.Fprintf(w, "created topic %s with %d partitions\n", args[0], *partitions)
		return nil
	}
}

// setupTopicAlterConfig: `kawa topic alter-config` sets and deletes topic overrides with one
// IncrementalAlterConfigs request (KIP-339), which the broker applies all or nothing, then prints the
// resulting configs as describe does.
func setupTopicAlterConfig(fs *cli.FlagSet) func(context.Context, *kadm.Client, []string, io.Writer) error {
	var set cli.KVList
	var del cli.StringList
	fs.Var(&set, "set", "override `key=value` to set (repeatable)")
	fs.Var(&del, "delete", "override `key` to delete, back to the broker's default (repeatable)")
	return func(ctx context.Context, adm *kadm.Client, args []string, w io.Writer) error {
		var ops []kadm.AlterConfig
		for k, v := range set.Configs() {
			ops = append(ops, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: v})
		}
		for _, k := range del {
			ops = append(ops, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
		}
		if len(ops) == 0 {
			return fs.UsageErr("nothing to change: give --set k=v or --delete k")
		}
		resp, err := adm.AlterTopicConfigs(ctx, ops, args[0])
		if err == nil {
			var r kadm.AlterConfigsResponse
			if r, err = resp.On(args[0], nil); err == nil {
				err = cli.WithMessage(r.Err, r.ErrMessage)
			}
		}
		if err != nil {
			return fmt.Errorf("%s: %w", args[0], err)
		}
		configs, err := adm.DescribeTopicConfigs(ctx, args[0])
		if err != nil {
			return err
		}
		rc, err := configs.On(args[0], nil)
		if err == nil {
			err = rc.Err
		}
		if err != nil {
			return cli.WithMessage(fmt.Errorf("%s configs: %w", args[0], err), rc.ErrMessage)
		}
		return writeConfigs(w, rc.Configs)
	}
}

// topicList prints every non-internal topic, sorted by name.
func topicList(ctx context.Context, adm *kadm.Client, _ []string, w io.Writer) error {
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITIONS\tREPLICATION")
	for _, t := range topics.Sorted() {
		if t.Err != nil {
			return fmt.Errorf("%s: %w", t.Topic, t.Err)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\n", t.Topic, len(t.Partitions), replicationFactor(t))
	}
	return tw.Flush()
}

func replicationFactor(t kadm.TopicDetail) int {
	if p, ok := t.Partitions[0]; ok {
		return len(p.Replicas)
	}
	return 0
}

// topicDescribe prints partitions (leader, replicas, ISR, log start and end
// offsets) and the topic's configs.
func topicDescribe(ctx context.Context, adm *kadm.Client, args []string, w io.Writer) error {
	name := args[0]
	topics, err := adm.ListTopics(ctx, name)
	if err != nil {
		return err
	}
	t, ok := topics[name]
	if !ok {
		return fmt.Errorf("%s: not in the metadata response", name)
	}
	if t.Err != nil {
		return fmt.Errorf("%s: %w", name, t.Err)
	}
	starts, err := adm.ListStartOffsets(ctx, name)
	if err != nil {
		return err
	}
	ends, err := adm.ListEndOffsets(ctx, name)
	if err != nil {
		return err
	}
	configs, err := adm.DescribeTopicConfigs(ctx, name)
	if err != nil {
		return err
	}
	rc, err := configs.On(name, nil)
	if err == nil {
		err = rc.Err
	}
	if err != nil {
		return cli.WithMessage(fmt.Errorf("%s configs: %w", name, err), rc.ErrMessage)
	}
	// Sizes need DESCRIBE on the cluster (DescribeLogDirs); without it, or on a broker without the API,
	// the SIZE cells say why instead of failing the whole describe.
	want := kadm.TopicsSet{}
	want.Add(name, t.Partitions.Numbers()...)
	dirs, dirsErr := adm.DescribeAllLogDirs(ctx, want)
	fmt.Fprintf(w, "topic: %s\nid: %s\npartitions: %d\n\n", name, t.ID, len(t.Partitions))
	if err := writePartitions(w, t, starts, ends, dirs, dirsErr); err != nil {
		return err
	}
	if compacted(rc.Configs) {
		// Kafka's protocol carries no per-partition cleaner state (its LogCleaner metrics are JMX only),
		// so the broker exports it as metrics rather than through a non-Kafka API.
		fmt.Fprintln(w, "\ncleaner progress: kawa_cleaner_dirty_ratio, kawa_cleaner_first_dirty_offset and kawa_cleaner_last_clean_timestamp_seconds{topic=\""+name+"\"} on the broker's --metrics-addr /metrics")
	}
	fmt.Fprintln(w)
	return writeConfigs(w, rc.Configs)
}

// compacted reports whether cleanup.policy includes compact.
func compacted(configs []kadm.Config) bool {
	for _, c := range configs {
		if c.Key == "cleanup.policy" {
			return slices.Contains(strings.Split(c.MaybeValue(), ","), "compact")
		}
	}
	return false
}

func writePartitions(w io.Writer, t kadm.TopicDetail, starts, ends kadm.ListedOffsets, dirs kadm.DescribedAllLogDirs, dirsErr error) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PARTITION\tLEADER\tREPLICAS\tISR\tSTART\tEND\tSIZE")
	for _, p := range t.Partitions.Sorted() {
		start, end := offsetCell(starts, t.Topic, p.Partition), offsetCell(ends, t.Topic, p.Partition)
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%s\t%s\n", p.Partition, p.Leader, joinInt32(p.Replicas), joinInt32(p.ISR), start, end,
			sizeCell(dirs, dirsErr, t.Topic, p))
	}
	return tw.Flush()
}

// sizeCell renders the bytes of the partition's log on its leader, or the error name, or "?" when the
// leader did not list it.
func sizeCell(dirs kadm.DescribedAllLogDirs, err error, topic string, p kadm.PartitionDetail) string {
	if err != nil {
		return errName(err)
	}
	d, ok := dirs[p.Leader].LookupPartition(topic, p.Partition)
	if !ok {
		return "?"
	}
	return fmt.Sprint(d.Size)
}

// offsetCell renders a listed offset, or the partition's error name.
func offsetCell(l kadm.ListedOffsets, topic string, p int32) string {
	o, ok := l.Lookup(topic, p)
	switch {
	case !ok:
		return "?"
	case o.Err != nil:
		return errName(o.Err)
	}
	return fmt.Sprint(o.Offset)
}

func writeConfigs(w io.Writer, configs []kadm.Config) error {
	sort.Slice(configs, func(i, j int) bool { return configs[i].Key < configs[j].Key })
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CONFIG\tVALUE\tSOURCE")
	for _, c := range configs {
		v := c.MaybeValue()
		if c.Sensitive {
			v = "(sensitive)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Key, v, c.Source)
	}
	return tw.Flush()
}

func topicDelete(ctx context.Context, adm *kadm.Client, args []string, w io.Writer) error {
	resp, err := adm.DeleteTopic(ctx, args[0])
	if err == nil {
		err = cli.WithMessage(resp.Err, resp.ErrMessage)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", args[0], err)
	}
	fmt.Fprintf(w, "deleted topic %s\n", args[0])
	return nil
}

func joinInt32(xs []int32) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprint(x)
	}
	return strings.Join(parts, ",")
}

// errName shortens a kerr error ("UNKNOWN_TOPIC_OR_PARTITION: This server
// does not host...") to its Kafka name for table cells.
func errName(err error) string {
	s := err.Error()
	if i := strings.IndexByte(s, ':'); i > 0 {
		return s[:i]
	}
	return s
}
