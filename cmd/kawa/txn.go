package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/kawa-broker/kawa/cmd/internal/cli"
	"github.com/twmb/franz-go/pkg/kadm"
)

const txnUsage = `usage: kawa txn <list|describe|abort> [flags]

  kawa txn list     [--brokers host:port,...] [--state S,...] [--producer-id ID]
  kawa txn describe TXNID [--brokers host:port,...]
  kawa txn abort    --topic T --partition P --producer-id ID --producer-epoch E
                    [--coordinator-epoch N] [--brokers host:port,...]

list and describe show the transaction coordinator's view (ListTransactions
and DescribeTransactions, KIP-664). abort closes a hanging transaction on one
partition by writing an ABORT marker for the producer ID and epoch
(WriteTxnMarkers, like kafka-transactions.sh abort); find them with
'kawa producers describe TOPIC' (the producer whose TXN-START-OFFSET pins the
partition's last stable offset). Transactional produce throughput is measured
by 'kawa-bench txn'.

Run 'kawa txn <subcommand> -h' for every flag.
`

// txnCmds are the subcommands of `kawa txn`.
var txnCmds = []adminCmd{
	{name: "list", synopsis: "kawa txn list [--brokers host:port,...] [--state S,...] [--producer-id ID]", setup: txnList},
	{name: "describe", synopsis: "kawa txn describe TXNID [--brokers host:port,...]", nargs: 1, setup: noFlags(txnDescribe)},
	{name: "abort", synopsis: "kawa txn abort --topic T --partition P --producer-id ID --producer-epoch E [--coordinator-epoch N]", setup: txnAbort},
}

// runTxn implements `kawa txn`.
func runTxn(args []string, _ io.Reader, stdout io.Writer) error {
	return runAdmin("txn", txnUsage, txnCmds, args, stdout)
}

func txnList(fs *cli.FlagSet) adminFunc {
	states := fs.String("state", "", "only these comma-separated states (Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort, PrepareEpochFence)")
	pid := fs.Int64("producer-id", -1, "only this producer ID")
	return func(ctx context.Context, adm *kadm.Client, _ []string, stdout io.Writer) error {
		var filterStates []string
		for _, s := range strings.Split(*states, ",") {
			if s = strings.TrimSpace(s); s != "" {
				filterStates = append(filterStates, s)
			}
		}
		var pids []int64
		if *pid >= 0 {
			pids = []int64{*pid}
		}
		listed, err := adm.ListTransactions(ctx, pids, filterStates)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TRANSACTIONAL-ID\tPRODUCER-ID\tSTATE")
		for _, l := range listed.Sorted() {
			fmt.Fprintf(tw, "%s\t%d\t%s\n", l.TxnID, l.ProducerID, l.State)
		}
		return tw.Flush()
	}
}

func txnDescribe(ctx context.Context, adm *kadm.Client, pos []string, stdout io.Writer) error {
	described, err := adm.DescribeTransactions(ctx, pos[0])
	if err != nil {
		return err
	}
	d, ok := described[pos[0]]
	if !ok {
		return fmt.Errorf("%s: not in the response", pos[0])
	}
	if d.Err != nil {
		return fmt.Errorf("%s: %w", pos[0], d.Err)
	}
	var parts []string
	for _, tp := range d.Topics.Sorted() {
		for _, p := range tp.Partitions {
			parts = append(parts, tp.Topic+"-"+strconv.Itoa(int(p)))
		}
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TRANSACTIONAL-ID\tSTATE\tPRODUCER-ID\tEPOCH\tTIMEOUT-MS\tSTART\tPARTITIONS")
	fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%s\n", d.TxnID, d.State, d.ProducerID, d.ProducerEpoch,
		d.TimeoutMillis, msTime(d.StartTimestamp), strings.Join(parts, ","))
	return tw.Flush()
}

func txnAbort(fs *cli.FlagSet) adminFunc {
	topic := fs.String("topic", "", "topic of the hanging transaction")
	part := fs.Int("partition", -1, "partition of the hanging transaction")
	pid := fs.Int64("producer-id", -1, "producer ID of the hanging transaction")
	epoch := fs.Int("producer-epoch", -1, "producer epoch of the hanging transaction")
	coordEpoch := fs.Int("coordinator-epoch", -1, "coordinator epoch for the marker (default: the producer's last one on the partition, or 0)")
	return func(ctx context.Context, adm *kadm.Client, _ []string, stdout io.Writer) error {
		switch {
		case *topic == "":
			return fs.UsageErr("--topic is required")
		case *part < 0 || *pid < 0 || *epoch < 0:
			return fs.UsageErr("--partition, --producer-id and --producer-epoch are required")
		case *epoch > 32767:
			return fs.UsageErr("--producer-epoch %d is above 32767", *epoch)
		}
		ce := int32(*coordEpoch)
		if ce < 0 {
			var err error
			if ce, err = lastCoordinatorEpoch(ctx, adm, *topic, int32(*part), *pid); err != nil {
				return err
			}
		}
		m := kadm.TxnMarkers{ProducerID: *pid, ProducerEpoch: int16(*epoch), CoordinatorEpoch: ce, Topics: kadm.TopicsSet{}}
		m.Topics.Add(*topic, int32(*part))
		resps, err := adm.WriteTxnMarkers(ctx, m)
		if err != nil {
			return err
		}
		for _, p := range resps.SortedPartitions() {
			if p.Err != nil {
				return fmt.Errorf("%s-%d: %w", p.Topic, p.Partition, p.Err)
			}
		}
		fmt.Fprintf(stdout, "aborted producer %d epoch %d on %s-%d\n", *pid, *epoch, *topic, *part)
		return nil
	}
}

// lastCoordinatorEpoch is the coordinator epoch of the last marker written
// for pid on topic/part (DescribeProducers), or 0 if none.
func lastCoordinatorEpoch(ctx context.Context, adm *kadm.Client, topic string, part int32, pid int64) (int32, error) {
	described, err := adm.DescribeProducers(ctx, kadm.TopicsSet{topic: {part: {}}})
	if err != nil {
		return 0, err
	}
	p, ok := described[topic].Partitions[part]
	if !ok {
		return 0, fmt.Errorf("%s-%d: not in the DescribeProducers response", topic, part)
	}
	if p.Err != nil {
		return 0, fmt.Errorf("%s-%d: %w", topic, part, p.Err)
	}
	if d, ok := p.ActiveProducers[pid]; ok && d.CoordinatorEpoch >= 0 {
		return d.CoordinatorEpoch, nil
	}
	return 0, nil
}
