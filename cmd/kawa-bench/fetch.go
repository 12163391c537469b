package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/kawa-broker/kawa/cmd/internal/cli"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// fetchBench is a parsed `kawa-bench fetch` invocation.
type fetchBench struct {
	brokers           string
	topic             string
	idle              time.Duration
	fetchMaxBytes     int
	partitionMaxBytes int
	brokerPID         int
	json              bool
	onRecord          func(*kgo.Record) // if set, sees every record read (W6's duplicate count)
}

// fetchResult is one fetch run's report.
type fetchResult struct {
	Bench       string       `json:"bench"` // "fetch"
	Topic       string       `json:"topic"`
	Partitions  int          `json:"partitions"`
	Expected    int64        `json:"expected_records"` // end - start offsets summed
	Records     int64        `json:"records"`
	Bytes       int64        `json:"bytes"` // key + value bytes
	ElapsedS    float64      `json:"elapsed_s"`
	RecordsPerS float64      `json:"records_per_s"`
	MBPerS      float64      `json:"mb_per_s"`
	MiBPerS     float64      `json:"mib_per_s"`
	Complete    bool         `json:"complete"` // every partition read to its end offset
	Broker      *brokerUsage `json:"broker,omitempty"`
}

func runBenchFetch(args []string, stdout io.Writer) error {
	fs := cli.NewFlagSet("fetch", "kawa-bench fetch --topic T [flags]")
	b := &fetchBench{}
	fs.StringVar(&b.brokers, "brokers", cli.DefaultBrokers, "comma-separated `host:port` list of seed brokers")
	fs.StringVar(&b.topic, "topic", "bench", "topic to read from its log start to its current end")
	fs.DurationVar(&b.idle, "idle-timeout", 5*time.Second, "give up after this long without a record")
	fs.IntVar(&b.fetchMaxBytes, "fetch-max-bytes", 50<<20, "fetch.max.bytes per request")
	fs.IntVar(&b.partitionMaxBytes, "partition-max-bytes", 1<<20, "max.partition.fetch.bytes")
	fs.IntVar(&b.brokerPID, "broker-pid", 0, "broker process to sample for CPU and peak RSS")
	fs.BoolVar(&b.json, "json", false, "print one JSON object")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if b.topic == "" || b.idle <= 0 || b.fetchMaxBytes <= 0 || b.partitionMaxBytes <= 0 || b.brokerPID < 0 {
		return fs.UsageErr("--topic must be set and sizes, --idle-timeout and --broker-pid positive")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res := &fetchResult{Bench: "fetch", Topic: b.topic}
	runErr := b.run(ctx, fs, res)
	if res.Expected > 0 {
		if err := b.report(stdout, res); err != nil {
			return err
		}
	}
	if runErr != nil {
		return fmt.Errorf("bench fetch: %w", runErr)
	}
	return nil
}

// run reads every partition from its start offset to the end offset listed
// before the first fetch.
func (b *fetchBench) run(ctx context.Context, fs *cli.FlagSet, res *fetchResult) error {
	cl, err := cli.ClientFor(fs, b.brokers,
		kgo.FetchMaxBytes(int32(b.fetchMaxBytes)),
		kgo.FetchMaxPartitionBytes(int32(b.partitionMaxBytes)))
	if err != nil {
		return err
	}
	defer cl.Close()
	ends, err := b.listRange(ctx, cl, res)
	if err != nil {
		return err
	}
	s := &brokerSampler{pid: b.brokerPID}
	if err := s.start(); err != nil {
		return fmt.Errorf("broker pid %d: %w", b.brokerPID, err)
	}
	start := time.Now()
	last, err := b.drain(ctx, cl, ends, res)
	if last.After(start) {
		elapsed := last.Sub(start)
		res.ElapsedS = roundTo(elapsed.Seconds(), 3)
		res.RecordsPerS, res.MBPerS, res.MiBPerS = rates(res.Records, res.Bytes, elapsed)
	}
	u, uerr := s.stop(res.Bytes)
	res.Broker = u
	return errors.Join(err, uerr)
}

// listRange lists start and end offsets, fills Partitions and Expected, and
// points the client at the start offsets.
func (b *fetchBench) listRange(ctx context.Context, cl *kgo.Client, res *fetchResult) (map[int32]int64, error) {
	lctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	adm := kadm.NewClient(cl)
	starts, err := adm.ListStartOffsets(lctx, b.topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("list start offsets of %s: %w", b.topic, err)
	}
	endOffsets, err := adm.ListEndOffsets(lctx, b.topic)
	if err == nil {
		err = endOffsets.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("list end offsets of %s: %w", b.topic, err)
	}
	ends := make(map[int32]int64)
	from := make(map[int32]kgo.Offset)
	starts.Each(func(o kadm.ListedOffset) {
		end, _ := endOffsets.Lookup(o.Topic, o.Partition)
		if end.Offset > o.Offset {
			ends[o.Partition] = end.Offset
			from[o.Partition] = kgo.NewOffset().At(o.Offset)
			res.Expected += end.Offset - o.Offset
		}
		res.Partitions++
	})
	if res.Expected == 0 {
		return nil, fmt.Errorf("topic %s has no records to fetch (%d partitions)", b.topic, res.Partitions)
	}
	cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{b.topic: from})
	return ends, nil
}

// drain polls until every partition reached its end offset, the idle timeout
// passes, or ctx ends, and returns when the last record arrived.
func (b *fetchBench) drain(ctx context.Context, cl *kgo.Client, ends map[int32]int64, res *fetchResult) (time.Time, error) {
	var last time.Time
	for len(ends) > 0 {
		pctx, cancel := context.WithTimeout(ctx, b.idle)
		fetches := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return last, nil
		}
		if err := cli.FetchError(fetches); err != nil {
			return last, err
		}
		if fetches.NumRecords() == 0 && pctx.Err() != nil {
			return last, fmt.Errorf("no record for %v with %d of %d records read", b.idle, res.Records, res.Expected)
		}
		fetches.EachPartition(func(p kgo.FetchTopicPartition) {
			for _, r := range p.Records {
				if b.onRecord != nil {
					b.onRecord(r)
				}
				res.Records++
				res.Bytes += int64(len(r.Key) + len(r.Value))
			}
			if n := len(p.Records); n > 0 && p.Records[n-1].Offset+1 >= ends[p.Partition] {
				delete(ends, p.Partition)
			}
		})
		if fetches.NumRecords() > 0 {
			last = time.Now()
		}
	}
	res.Complete = true
	return last, nil
}

func (b *fetchBench) report(w io.Writer, r *fetchResult) error {
	if b.json {
		return writeJSON(w, r)
	}
	state := "complete"
	if !r.Complete {
		state = fmt.Sprintf("incomplete: %d of %d records", r.Records, r.Expected)
	}
	fmt.Fprintf(w, "bench fetch %s: %d partitions, %d records, %.1f MB in %.3fs (%s)\n",
		r.Topic, r.Partitions, r.Records, float64(r.Bytes)/1e6, r.ElapsedS, state)
	fmt.Fprintf(w, "  %.0f records/s  %.2f MB/s\n", r.RecordsPerS, r.MBPerS)
	writeBrokerUsage(w, r.Broker)
	return nil
}
