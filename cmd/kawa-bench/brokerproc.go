package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kawa-broker/kawa/cmd/internal/cli"
	"github.com/twmb/franz-go/pkg/kgo"
)

// brokerProc is one system under test running as its own process on
// 127.0.0.1, with its data in a directory removed when it stops.
type brokerProc struct {
	cmd  *exec.Cmd
	dir  string
	addr string // host:port
	// metrics is Kawa's Prometheus address (--metrics-addr), empty for the
	// peers: the source of fsyncs and bytes per fsync.
	metrics string
	exited  chan struct{}
	err     error // cmd.Wait's, valid after exited closes
}

func (b *brokerProc) pid() int    { return b.cmd.Process.Pid }
func (b *brokerProc) url() string { return "nats://" + b.addr }

// freePort returns a loopback port nothing listens on right now.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// startBroker starts s in a fresh directory under c.workDir and returns once
// it accepts connections.
func (c *compareConfig) startBroker(ctx context.Context, s system) (*brokerProc, error) {
	dir, err := os.MkdirTemp(c.workDir, s.name+"-")
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	b := &brokerProc{dir: dir, addr: "127.0.0.1:" + strconv.Itoa(port), exited: make(chan struct{})}
	data := filepath.Join(dir, "data")
	var args []string
	bin := c.kawaBin
	if s == sysBaseAlways || s == sysBaseNever {
		bin = c.baseBin
	}
	switch s.kind {
	case "kawa":
		fsync := "never"
		if s.durable {
			fsync = "always"
		}
		mport, err := freePort()
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		b.metrics = "127.0.0.1:" + strconv.Itoa(mport)
		args = []string{"serve", "--listen", b.addr, "--data-dir", data, "--fsync", fsync, "--log-level", "warn",
			"--metrics-addr", b.metrics}
	case "kfake":
		bin = c.selfBin
		args = []string{"peer-kfake", "--port", strconv.Itoa(port), "--data-dir", data}
		if s.durable {
			args = append(args, "--sync-writes")
		}
	case "nats":
		bin = c.natsBin
		conf := filepath.Join(dir, "nats.conf")
		// sync_interval: always fsyncs every write before the ack; without
		// it JetStream syncs every 2 minutes and acks from the page cache.
		text := fmt.Sprintf("listen: %q\njetstream {\n  store_dir: %q\n", b.addr, data)
		if s.durable {
			text += "  sync_interval: always\n"
		}
		text += "}\n"
		if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		args = []string{"-c", conf}
	default:
		return nil, fmt.Errorf("unknown system kind %q", s.kind)
	}
	logf, err := os.Create(filepath.Join(dir, "broker.log"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	b.cmd = exec.Command(bin, args...)
	b.cmd.Stdout, b.cmd.Stderr = logf, logf
	if err := b.cmd.Start(); err != nil {
		logf.Close()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start %s: %w", s.name, err)
	}
	// This goroutine is the process's reaper; it ends when the process does,
	// and stop always ends the process.
	go func() {
		b.err = b.cmd.Wait()
		logf.Close()
		close(b.exited)
	}()
	if err := b.waitReady(ctx, s.kind, 30*time.Second); err != nil {
		tail := b.logTail()
		b.stop()
		return nil, fmt.Errorf("%s not ready: %w; log: %s", s.name, err, tail)
	}
	return b, nil
}

// waitReady dials until the broker answers: a Kafka ApiVersions round trip,
// or a TCP connect for NATS (its INFO line is sent on connect). It gives up
// when the process exits or after timeout.
func (b *brokerProc) waitReady(ctx context.Context, kind string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	retry := time.NewTicker(20 * time.Millisecond)
	defer retry.Stop()
	for {
		if err := b.probe(ctx, kind); err == nil {
			return nil
		} else if time.Now().After(deadline) {
			return err
		}
		select {
		case <-b.exited:
			return fmt.Errorf("exited: %v", b.err)
		case <-ctx.Done():
			return ctx.Err()
		case <-retry.C:
		}
	}
}

func (b *brokerProc) probe(ctx context.Context, kind string) error {
	if kind == "nats" {
		conn, err := net.DialTimeout("tcp", b.addr, time.Second)
		if err == nil {
			conn.Close()
		}
		return err
	}
	cl, err := cli.ClientFor(cli.NewFlagSet("probe", ""), b.addr, kgo.RetryTimeout(time.Second))
	if err != nil {
		return err
	}
	defer cl.Close()
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return cl.Ping(pctx)
}

// stop sends SIGTERM, waits up to 20 s for a clean exit (then SIGKILL) and
// removes the data directory. An unclean exit is an error.
func (b *brokerProc) stop() error {
	var err error
	if b.cmd.Process.Signal(syscall.SIGTERM) == nil {
		timer := time.NewTimer(20 * time.Second)
		select {
		case <-b.exited:
		case <-timer.C:
			b.cmd.Process.Kill()
			<-b.exited
			err = errors.New("did not stop within 20s of SIGTERM")
		}
		timer.Stop()
	} else {
		<-b.exited
	}
	os.RemoveAll(b.dir)
	return err
}

// logTail is the end of the broker's log, for error messages.
func (b *brokerProc) logTail() string {
	data, _ := os.ReadFile(filepath.Join(b.dir, "broker.log"))
	if len(data) > 600 {
		data = data[len(data)-600:]
	}
	return string(data)
}

// kafkaFill writes records records of size bytes to topic bench (1
// partition) as fast as one idempotent producer can, for a fetch backlog.
func kafkaFill(ctx context.Context, addr string, records int64, size int) error {
	pb := &produceBench{brokers: addr, topic: "bench", partitions: 1, partitionsSet: true}
	if _, err := pb.ensureTopic(ctx); err != nil {
		return err
	}
	cl, err := cli.ClientFor(cli.NewFlagSet("fill", ""), addr, kgo.DefaultProduceTopic("bench"),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		return err
	}
	defer cl.Close()
	payload := make([]byte, size)
	errs := make(chan error, 1) // the first failure; later ones are dropped
	promise := func(_ *kgo.Record, err error) {
		if err != nil {
			select {
			case errs <- err:
			default:
			}
		}
	}
	for range records {
		cl.Produce(ctx, &kgo.Record{Value: payload}, promise)
	}
	fctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := cl.Flush(fctx); err != nil {
		return fmt.Errorf("fill: %w", err)
	}
	select {
	case err := <-errs:
		return fmt.Errorf("fill: %w", err)
	default:
		return nil
	}
}

// fsyncStats scrapes Kawa's kawa_log_fsyncs and kawa_log_fsynced_bytes
// gauges (zeros for a peer, which exports none).
func (b *brokerProc) fsyncStats(ctx context.Context) (fsyncs, bytes float64, err error) {
	if b.metrics == "" {
		return 0, 0, nil
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, "http://"+b.metrics+"/metrics", nil)
	if err != nil {
		return 0, 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, fmt.Errorf("scrape kawa metrics: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return 0, 0, err
	}
	return parseFsyncMetrics(string(body))
}

// parseFsyncMetrics reads the two gauges from Prometheus text exposition.
func parseFsyncMetrics(text string) (fsyncs, bytes float64, err error) {
	found := 0
	for line := range strings.Lines(text) {
		name, value, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok {
			continue
		}
		var dst *float64
		switch name {
		case "kawa_log_fsyncs":
			dst = &fsyncs
		case "kawa_log_fsynced_bytes":
			dst = &bytes
		default:
			continue
		}
		if *dst, err = strconv.ParseFloat(value, 64); err != nil {
			return 0, 0, fmt.Errorf("%s: %w", name, err)
		}
		found++
	}
	if found != 2 {
		return 0, 0, errors.New("kawa metrics lack kawa_log_fsyncs or kawa_log_fsynced_bytes")
	}
	return fsyncs, bytes, nil
}
