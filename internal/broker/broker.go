package broker

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/acl"
	"github.com/kawa-broker/kawa/internal/auth"
	"github.com/kawa-broker/kawa/internal/cleaner"
	"github.com/kawa-broker/kawa/internal/config"
	"github.com/kawa-broker/kawa/internal/fetchsession"
	"github.com/kawa-broker/kawa/internal/group"
	"github.com/kawa-broker/kawa/internal/log"
	"github.com/kawa-broker/kawa/internal/meta"
	"github.com/kawa-broker/kawa/internal/partition"
	"github.com/kawa-broker/kawa/internal/producer"
	"github.com/kawa-broker/kawa/internal/share"
	"github.com/kawa-broker/kawa/internal/txn"
	"github.com/kawa-broker/kawa/internal/vfs"
	"github.com/kawa-broker/kawa/internal/wire"
)

// Broker is one Kawa node. Create with Open, serve through Handle, stop with
// Close.
type Broker struct {
	cfg       config.Broker
	defaults  config.Topic                     // a topic's configs without overrides: Kafka's defaults and cfg.TopicDefaults
	fs        vfs.FS                           // every file and directory under cfg.DataDir goes through it
	apiKeys   []kmsg.ApiVersionsResponseApiKey // the handler table as ApiVersions advertises it; read-only
	lg        *slog.Logger
	host      string
	port      int32
	clusterID string

	catalog  *meta.Catalog
	creds    *auth.Store     // SCRAM credentials (KIP-554), in the data dir
	authz    *acl.Authorizer // nil when no authorizer is configured (authorize.go)
	denials  rateLog         // rate-limited log of denied requests (authorize.go)
	aclLog   rateLog         // rate-limited log of ACL changes
	pids     *producer.Allocator
	metrics  *Metrics
	parked   atomic.Int64        // fetches waiting in a long poll (Kafka's Fetch purgatory size)
	fileSent atomic.Int64        // record bytes fetches left in the segment files for sendfile (FetchedFromFiles)
	sessions *fetchsession.Cache // KIP-227 incremental fetch sessions (fetch_session.go)
	files    *log.FileCache      // bounds the segment files' descriptors over all partitions
	groups   *group.Coordinator
	shares   *share.Coordinator // KIP-932 share groups (share_groups.go)
	txn      *txn.Coordinator
	cleaner  *cleaner.Cleaner // compacts the logs of compacted topics; stopped first by Close
	// cleanStart is set while Open loads the catalog's partitions after a
	// clean shutdown (cleanShutdownFile was there); see log.Options.CleanShutdown.
	cleanStart bool
	loaded     bool // Open completed: only then may Close mark a clean shutdown

	mu    sync.RWMutex
	parts map[string][]*partition.Partition

	stop chan struct{}
	wg   sync.WaitGroup
}

// Open loads the catalog and every partition under cfg.DataDir in fsys
// (vfs.OS in production; tests pass the crash-clone vfs.MemFS or a
// vfs.ErrorFS; nil means vfs.OS). It creates the data dir durably (its
// parent is fsynced). host and port are what Metadata advertises to a
// connection whose listener sets no address of its own (wire.RequestInfo.AdvertisedHost).
func Open(fsys vfs.FS, cfg config.Broker, host string, port int32, lg *slog.Logger, m *Metrics) (*Broker, error) {
	cfg = cfg.WithDefaults()
	if fsys == nil {
		fsys = vfs.OS
	}
	if lg == nil {
		lg = slog.Default()
	}
	if m == nil {
		m = NewMetrics(nil)
	}
	defaults, err := cfg.TopicDefaultsConfig()
	if err != nil {
		return nil, fmt.Errorf("broker: topic config defaults: %w", err)
	}
	if err := vfs.MkdirAllDurable(fsys, cfg.DataDir); err != nil {
		return nil, fmt.Errorf("broker: data dir: %w", err)
	}
	cat, err := meta.Open(fsys, cfg.DataDir)
	if err != nil {
		return nil, err
	}
	pids, err := producer.NewAllocator(fsys, filepath.Join(cfg.DataDir, "producer-ids"), 1000)
	if err != nil {
		return nil, err
	}
	creds, err := auth.OpenStore(fsys, cfg.DataDir)
	if err != nil {
		return nil, err
	}
	authz, err := openAuthorizer(fsys, cfg)
	if err != nil {
		return nil, err
	}
	b := &Broker{
		cfg: cfg, defaults: defaults, fs: fsys, lg: lg, host: host, port: port,
		catalog: cat, pids: pids, metrics: m, creds: creds, authz: authz,
		files:   log.NewFileCache(cfg.MaxOpenLogFiles),
		apiKeys: apiKeys(),
		parts:   map[string][]*partition.Partition{},
		stop:    make(chan struct{}),
	}
	if b.clusterID, err = loadClusterID(fsys, cfg.DataDir); err != nil {
		return nil, err
	}
	if b.cleanStart, err = takeCleanShutdown(fsys, cfg.DataDir); err != nil {
		return nil, err
	}
	for _, t := range cat.List() {
		if err := b.openTopic(t); err != nil {
			b.Close()
			return nil, err
		}
	}
	b.cleanStart = false // partitions created from here on are new
	if err := b.openGroups(); err != nil {
		b.Close()
		return nil, err
	}
	b.sessions = fetchsession.New(max(cfg.FetchSessionCacheSlots, 0), 0)
	if err := b.openShares(); err != nil {
		b.Close()
		return nil, err
	}
	if err := b.openTxn(); err != nil {
		b.Close()
		return nil, err
	}
	b.cleaner = cleaner.New(cleaner.Options{
		Targets: b.cleanerTargets, MapEntries: cfg.CleanerMapEntries, Backoff: cfg.CleanerBackoff, Logger: lg,
	})
	b.cleaner.Start()
	b.wg.Add(1)
	go b.retentionLoop()
	b.loaded = true
	return b, nil
}

// loadClusterID reads or creates the cluster ID (a base64 UUID, as Kafka's).
func loadClusterID(fsys vfs.FS, dir string) (string, error) {
	p := filepath.Join(dir, "cluster-id")
	if b, err := vfs.ReadFile(fsys, p); err == nil && len(strings.TrimSpace(string(b))) > 0 {
		return strings.TrimSpace(string(b)), nil
	}
	var u [16]byte
	_, _ = rand.Read(u[:])
	id := base64.RawURLEncoding.EncodeToString(u[:])
	if err := vfs.WriteFileAtomic(fsys, p, []byte(id+"\n")); err != nil {
		return "", fmt.Errorf("broker: cluster ID: %w", err)
	}
	return id, nil
}

// topicConfig returns the effective config of t: broker defaults plus t's
// overrides (validated when they were stored). A stored value today's rules
// refuse (segment.bytes below KIP-1030's 1 MiB, stored by an older Kawa) is
// skipped with a warning, alone, so the topic keeps its other configs and
// the broker starts.
func (b *Broker) topicConfig(t meta.Topic) config.Topic {
	tc, err := config.Apply(b.defaults, t.Configs)
	if err == nil {
		return tc
	}
	tc = b.defaults
	for k, v := range t.Configs {
		next, err := config.Apply(tc, map[string]string{k: v})
		if err != nil {
			b.lg.Warn("ignoring invalid stored topic config", "topic", t.Name, "err", err)
			continue
		}
		tc = next
	}
	return tc
}

func (b *Broker) logOptions(tc config.Topic) log.Options {
	retMs, retBytes := tc.RetentionLimits()
	o := log.Options{
		SegmentBytes:   tc.SegmentSize(),
		SegmentMs:      tc.SegmentMs,
		RetentionMs:    retMs,
		RetentionBytes: retBytes,
		FsyncInterval:  b.cfg.FsyncInterval,
		// index.interval.bytes and file.delete.delay.ms take effect when a partition opens.
		// index.interval.bytes=0 (an entry per batch) is 1 here: the log's 0 means its default.
		IndexIntervalBytes: max(int(tc.IndexIntervalBytes), 1),
		FileDeleteDelay:    fileDeleteDelay(tc.FileDeleteDelayMs),
		Preallocate:        tc.Preallocate,
		// flush.messages and flush.ms matter only with --fsync=never or interval (always fsyncs every
		// write); their defaults (Long.MAX_VALUE) mean never, as in Kafka.
		FlushMessages: flushSetting(tc.FlushMessages),
		FlushAfter:    time.Duration(flushSetting(tc.FlushMs)) * time.Millisecond,
		Logger:        b.lg,
		FS:            b.fs,
		Files:         b.files,
		OnSwapStep:    b.cfg.OnSegmentSwap,
		CleanShutdown: b.cleanStart,
	}
	switch b.cfg.Fsync {
	case config.FsyncNever:
		o.Fsync = log.FsyncNever
	case config.FsyncInterval:
		o.Fsync = log.FsyncInterval
	default:
		o.Fsync = log.FsyncAlways
	}
	return o
}

// fileDeleteDelay maps file.delete.delay.ms onto log.Options.FileDeleteDelay, where 0 means the default
// and a negative value "close at once".
func fileDeleteDelay(ms int64) time.Duration {
	if ms == 0 {
		return -1
	}
	return time.Duration(min(ms, int64(math.MaxInt64/time.Millisecond))) * time.Millisecond
}

// flushSetting maps flush.messages or flush.ms onto the log's option: Kafka's default Long.MAX_VALUE is
// off (0); flush.ms=0 (flush at every flusher pass) is the shortest period, 1 ms.
func flushSetting(v int64) int64 {
	switch {
	case v == math.MaxInt64:
		return 0
	case v < 1:
		return 1
	case v > int64(math.MaxInt64/time.Millisecond):
		return 0 // beyond time.Duration: never, in effect
	}
	return v
}

func (b *Broker) partitionDir(topic string, i int32) string {
	return filepath.Join(b.cfg.DataDir, fmt.Sprintf("%s-%d", topic, i))
}

// openWorkers bounds the partitions opened (or closed) at once, as Kafka's
// num.recovery.threads.per.data.dir does: opening a partition is mostly
// fsyncs (segment files, directories), which overlap on the disk, so a
// restart or a CreateTopics of thousands of partitions waits for the disk's
// queue rather than for one fsync after another.
const openWorkers = 16

// forEachPartition runs f(i) for i in [from, to) on at most openWorkers
// goroutines and returns when every call has returned; the goroutines are
// owned by the call and end with it.
func forEachPartition(from, to int32, f func(i int32)) {
	next := make(chan int32)
	var wg sync.WaitGroup
	for range min(int(to-from), openWorkers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				f(i)
			}
		}()
	}
	for i := from; i < to; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
}

// openTopic opens partitions [len(current), t.Partitions) of t, on a bounded
// pool of workers (forEachPartition). A partition whose log is corrupt stays
// offline (nil); any other error closes the partitions this call opened and
// is returned, joined over the partitions that failed.
func (b *Broker) openTopic(t meta.Topic) error {
	tc := b.topicConfig(t)
	b.mu.RLock()
	have := int32(len(b.parts[t.Name]))
	b.mu.RUnlock()
	if have >= t.Partitions {
		return nil
	}
	if err := b.makePartitionDirs(t.Name, have, t.Partitions); err != nil {
		return err
	}
	opened := make([]*partition.Partition, t.Partitions-have)
	errs := make([]error, len(opened))
	forEachPartition(have, t.Partitions, func(i int32) {
		p, err := partition.Open(t.Name, i, b.partitionDir(t.Name, i), partition.Options{
			Log: b.logOptions(tc), ProducerExpiration: b.cfg.ProducerIDExpiration, Logger: b.lg,
		})
		if errors.Is(err, log.ErrCorruption) {
			// Corruption in the middle of the log: report it and keep the
			// partition offline (KAFKA_STORAGE_ERROR) rather than truncate or
			// renumber acknowledged records (BL-25). Other partitions serve.
			b.lg.Error("partition offline: log corruption", "topic", t.Name, "partition", i, "err", err)
			return
		}
		opened[i-have], errs[i-have] = p, err
	})
	if err := errors.Join(errs...); err != nil {
		for _, o := range opened {
			if o != nil {
				o.Close()
			}
		}
		return err
	}
	b.mu.Lock()
	b.parts[t.Name] = append(b.parts[t.Name], opened...)
	b.mu.Unlock()
	return nil
}

// makePartitionDirs creates the missing directories of partitions [from, to)
// of topic and makes them durable with one fsync of the data dir, instead of
// one per partition (log.Open's MkdirAllDurable then finds them there). A
// path that exists but is no directory is left for partition.Open to refuse.
func (b *Broker) makePartitionDirs(topic string, from, to int32) error {
	created := false
	for i := from; i < to; i++ {
		dir := b.partitionDir(topic, i)
		if _, err := b.fs.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err := b.fs.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("broker: partition %s-%d: mkdir: %w", topic, i, err)
		}
		created = true
	}
	if !created {
		return nil
	}
	if err := b.fs.SyncDir(b.cfg.DataDir); err != nil {
		return fmt.Errorf("broker: fsync %s: %w", b.cfg.DataDir, err)
	}
	return nil
}

// partition returns the live partition, or nil.
func (b *Broker) partition(topic string, i int32) *partition.Partition {
	b.mu.RLock()
	defer b.mu.RUnlock()
	ps := b.parts[topic]
	if i < 0 || int(i) >= len(ps) {
		return nil
	}
	return ps[i]
}

// lookup returns the live partition, or UNKNOWN_TOPIC_OR_PARTITION, or
// KAFKA_STORAGE_ERROR for a partition kept offline by corruption.
func (b *Broker) lookup(topic string, i int32) (*partition.Partition, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	ps := b.parts[topic]
	if i < 0 || int(i) >= len(ps) {
		return nil, kerr.UnknownTopicOrPartition
	}
	if ps[i] == nil {
		return nil, fmt.Errorf("%w: partition %s-%d is offline (log corruption; see the broker log)", kerr.KafkaStorageError, topic, i)
	}
	return ps[i], nil
}

// partitions returns the partitions of topic (nil if unknown); offline
// partitions are nil entries.
func (b *Broker) partitions(topic string) []*partition.Partition {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.parts[topic]
}

// retentionLoop applies retention every RetentionCheck interval.
func (b *Broker) retentionLoop() {
	defer b.wg.Done()
	t := time.NewTicker(b.cfg.RetentionCheck)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case now := <-t.C:
			b.EnforceRetention(now)
		}
	}
}

// EnforceRetention runs retention on every partition now.
func (b *Broker) EnforceRetention(now time.Time) {
	b.mu.RLock()
	var all []*partition.Partition
	for _, ps := range b.parts {
		for _, p := range ps {
			if p != nil {
				all = append(all, p)
			}
		}
	}
	b.mu.RUnlock()
	for _, p := range all {
		if err := p.EnforceRetention(now); err != nil {
			b.lg.Warn("retention failed", "topic", p.Topic, "partition", p.Index, "err", err)
		}
	}
}

// Close flushes and closes every partition. Call after the server stopped
// handing requests to the broker.
func (b *Broker) Close() error {
	select {
	case <-b.stop:
		return nil
	default:
	}
	close(b.stop)
	b.wg.Wait()
	if b.cleaner != nil {
		b.cleaner.Stop() // before the partitions close under it
	}
	if b.txn != nil {
		b.txn.Close() // before groups and partitions: it writes markers to both
	}
	if b.groups != nil {
		b.groups.Close()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var errs []error
	offline := false // a partition went offline: its files may not be durable
	for _, ps := range b.parts {
		perr, poff := make([]error, len(ps)), make([]bool, len(ps))
		// Closing is fsyncs too (snapshot, index, active segment): as many at
		// once as opening.
		forEachPartition(0, int32(len(ps)), func(i int32) {
			p := ps[i]
			if p == nil {
				return
			}
			// An offline partition (sticky write or fsync error) reported
			// its error when it went offline; closing it repeats it.
			offline := p.Err()
			if err := p.Close(); err != nil && offline == nil {
				perr[i] = err
			}
			if offline != nil {
				poff[i] = true
			}
		})
		errs = append(errs, perr...)
		offline = offline || slices.Contains(poff, true)
	}
	b.parts = map[string][]*partition.Partition{}
	if err := errors.Join(errs...); err != nil || offline || !b.loaded {
		return err
	}
	// Every partition closed cleanly, so every file is durable: the next Open
	// may skip re-syncing them (takeCleanShutdown).
	if err := vfs.WriteFileAtomic(b.fs, filepath.Join(b.cfg.DataDir, cleanShutdownFile), nil); err != nil {
		return fmt.Errorf("broker: clean-shutdown marker: %w", err)
	}
	return nil
}

// cleanShutdownFile, in the data dir, marks a clean shutdown (Kafka's
// .kafka_cleanshutdown): Close writes it durably after every partition closed
// without error, and Open removes it durably before it opens any partition,
// so a crash at any later point leaves no marker and the next start re-syncs
// what it recovers.
const cleanShutdownFile = ".kawa_cleanshutdown"

// takeCleanShutdown reports whether dir holds the clean-shutdown marker and
// removes it durably (the directory is fsynced) before returning.
func takeCleanShutdown(fsys vfs.FS, dir string) (bool, error) {
	name := filepath.Join(dir, cleanShutdownFile)
	if _, err := fsys.Stat(name); errors.Is(err, os.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("broker: clean-shutdown marker: %w", err)
	}
	if err := fsys.Remove(name); err != nil {
		return false, fmt.Errorf("broker: remove clean-shutdown marker: %w", err)
	}
	if err := fsys.SyncDir(dir); err != nil {
		return false, fmt.Errorf("broker: remove clean-shutdown marker: fsync %s: %w", dir, err)
	}
	return true, nil
}

// advertised returns the address to tell the client of a request: its
// listener's advertised address, else the broker's.
func (b *Broker) advertised(info wire.RequestInfo) (string, int32) {
	if info.AdvertisedHost != "" {
		return info.AdvertisedHost, info.AdvertisedPort
	}
	return b.host, b.port
}

// Credentials returns the broker's SCRAM credential store (in the data dir,
// changed by AlterUserScramCredentials), which SASL listeners log in against.
func (b *Broker) Credentials() *auth.Store { return b.creds }
