package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/kawa-broker/kawa/cmd/internal/cli"
	"github.com/twmb/franz-go/pkg/kgo"
)

// runProduce implements `kawa produce`: every stdin line (without its "\n")
// becomes one record; with --key-separator the text before the first SEP is
// the key and the rest the value, and a line without SEP has a null key. It
// waits for every acknowledgement, prints "produced N records", and fails if
// any record failed.
func runProduce(args []string, stdin io.Reader, stdout io.Writer) error {
	fs := cli.NewFlagSet("produce", "kawa produce --topic T [--key-separator SEP] [--acks all|1|0] [--idempotent=true] < lines")
	brokers := cli.BrokersFlag(fs)
	topic := fs.String("topic", "", "topic to produce to (required)")
	sep := fs.String("key-separator", "", "split each line into key and value at the first `SEP`")
	acks := fs.String("acks", "all", "acknowledgements to wait for: all, 1 or 0")
	idempotent := fs.Bool("idempotent", true, "idempotent producer (KIP-98); needs --acks all")
	timeout := fs.Duration("timeout", 30*time.Second, "fail a record not acknowledged within this long (delivery timeout)")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if *topic == "" {
		return fs.UsageErr("--topic is required")
	}
	if *timeout <= 0 {
		return fs.UsageErr("--timeout must be positive")
	}
	opts, err := cli.ProducerOpts(fs, *acks, *idempotent)
	if err != nil {
		return err
	}
	opts = append(opts, kgo.DefaultProduceTopic(*topic), kgo.RecordDeliveryTimeout(*timeout))
	cl, err := cli.ClientFor(fs, *brokers, opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ok, err := produceLines(cl, stdin, []byte(*sep), *timeout)
	fmt.Fprintf(stdout, "produced %d records\n", ok)
	if err != nil {
		return fmt.Errorf("produce to %s: %w", *topic, err)
	}
	return nil
}

// produceTally counts acknowledgements; promises run on kgo's goroutines.
type produceTally struct {
	mu     sync.Mutex
	ok     int64
	failed int64
	first  error
}

func (t *produceTally) promise(_ *kgo.Record, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err == nil {
		t.ok++
		return
	}
	t.failed++
	if t.first == nil {
		t.first = err
	}
}

// produceLines sends one record per line of r, flushes, and returns the
// number of acknowledged records and an error if any record failed.
func produceLines(cl *kgo.Client, r io.Reader, sep []byte, timeout time.Duration) (int64, error) {
	var tally produceTally
	br := bufio.NewReaderSize(r, 1<<16)
	var readErr error
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			cl.Produce(context.Background(), lineRecord(bytes.TrimSuffix(line, []byte("\n")), sep), tally.promise)
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				readErr = fmt.Errorf("read stdin: %w", err)
			}
			break
		}
	}
	// Records already have a delivery timeout; this bounds a flush stuck on
	// something else (a broker that accepts connections but never answers).
	ctx, cancel := context.WithTimeout(context.Background(), timeout+5*time.Second)
	defer cancel()
	flushErr := cl.Flush(ctx)
	tally.mu.Lock()
	defer tally.mu.Unlock()
	switch {
	case tally.failed > 0:
		return tally.ok, fmt.Errorf("%d of %d records failed, first: %w", tally.failed, tally.failed+tally.ok, tally.first)
	case flushErr != nil:
		return tally.ok, fmt.Errorf("flush: %w", flushErr)
	}
	return tally.ok, readErr
}

// lineRecord builds the record for one input line (without its newline).
func lineRecord(line, sep []byte) *kgo.Record {
	if len(sep) > 0 {
		if k, v, ok := bytes.Cut(line, sep); ok {
			return &kgo.Record{Key: k, Value: v}
		}
	}
	return &kgo.Record{Value: line}
}
