package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

const producersUsage = `usage: kawa producers describe TOPIC [--brokers host:port,...] [--timeout 10s]

Prints, per partition, every producer the broker holds idempotence state for
(DescribeProducers, KIP-664): producer ID, epoch, last sequence, last
timestamp, coordinator epoch and the first offset of its open transaction
(-1 when none).
`

// producersCmds are the subcommands of `kawa producers`.
var producersCmds = []adminCmd{
	{name: "describe", synopsis: "kawa producers describe TOPIC [--brokers host:port,...] [--timeout 10s]", nargs: 1,
		setup: noFlags(func(ctx context.Context, adm *kadm.Client, pos []string, w io.Writer) error {
			return describeProducers(ctx, adm, pos[0], w)
		})},
}

// runProducers implements `kawa producers`; describe is its one subcommand.
func runProducers(args []string, _ io.Reader, stdout io.Writer) error {
	return runAdmin("producers", producersUsage, producersCmds, args, stdout)
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
