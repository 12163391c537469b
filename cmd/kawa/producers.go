package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/kawa-broker/kawa/cmd/internal/cli"
	"github.com/twmb/franz-go/pkg/kadm"
)

const producersUsage = `usage: kawa producers describe TOPIC [--brokers host:port,...] [--timeout 10s]

Prints, per partition, every producer the broker holds idempotence state for
(DescribeProducers, KIP-664): producer ID, epoch, last sequence, last
timestamp, coordinator epoch and the first offset of its open transaction
(-1 when none).
`

// runProducers implements `kawa producers`; describe is its one subcommand.
func runProducers(args []string, _ io.Reader, stdout io.Writer) error {
	if len(args) == 0 {
		return cli.UsageErrorf("producers", producersUsage, "missing producers subcommand")
	}
	switch args[0] {
	case "-h", "--help", "help":
		return cli.Help(producersUsage)
	case "describe":
		return producersDescribe(args[1:], stdout)
	}
	return cli.UsageErrorf("producers", producersUsage, "unknown producers subcommand %q", args[0])
}

func producersDescribe(args []string, stdout io.Writer) error {
	fs := cli.NewFlagSet("producers describe", "kawa producers describe TOPIC [--brokers host:port,...] [--timeout 10s]")
	brokers := cli.BrokersFlag(fs)
	timeout := fs.Duration("timeout", 10*time.Second, "give up on the broker after this long")
	pos, err := cli.ParseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fs.UsageErr("want 1 argument (TOPIC), got %d", len(pos))
	}
	cl, err := cli.ClientFor(fs, *brokers)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := describeProducers(ctx, kadm.NewClient(cl), pos[0], stdout); err != nil {
		return fmt.Errorf("producers describe: %w", err)
	}
	return nil
}

// describeProducers looks the topic up (so an unknown topic is an error,
// not an empty table) and prints one row per producer and partition, sorted
// by partition then producer ID; a partition that failed prints its error.
func describeProducers(ctx context.Context, adm *kadm.Client, topic string, w io.Writer) error {
	topics, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return err
	}
	t, ok := topics[topic]
	if !ok {
		return fmt.Errorf("%s: not in the metadata response", topic)
	}
	if t.Err != nil {
		return fmt.Errorf("%s: %w", topic, t.Err)
	}
	set := kadm.TopicsSet{}
	set.Add(topic, t.Partitions.Numbers()...)
	described, err := adm.DescribeProducers(ctx, set)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PARTITION\tPRODUCER-ID\tEPOCH\tLAST-SEQUENCE\tLAST-TIMESTAMP\tCOORDINATOR-EPOCH\tTXN-START-OFFSET")
	for _, p := range described[topic].Partitions.Sorted() {
		if p.Err != nil {
			fmt.Fprintf(tw, "%d\t%s\t\t\t\t\t\n", p.Partition, errName(p.Err))
			continue
		}
		for _, d := range p.ActiveProducers.Sorted() {
			fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%s\t%d\t%d\n", d.Partition, d.ProducerID, d.ProducerEpoch,
				d.LastSequence, msTime(d.LastTimestamp), d.CoordinatorEpoch, d.CurrentTxnStartOffset)
		}
	}
	return tw.Flush()
}

// msTime renders a Kafka millisecond timestamp in UTC, or -1 as "-".
func msTime(ms int64) string {
	if ms < 0 {
		return "-"
	}
	return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano)
}
