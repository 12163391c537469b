package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kawa-broker/kawa/cmd/internal/cli"
	"github.com/kawa-broker/kawa/internal/acl"
	"github.com/kawa-broker/kawa/internal/auth"
	"github.com/kawa-broker/kawa/internal/broker"
	"github.com/kawa-broker/kawa/internal/config"
	"github.com/kawa-broker/kawa/internal/server"
	"github.com/kawa-broker/kawa/internal/share"
	"github.com/kawa-broker/kawa/internal/vfs"
)

// runServe runs the broker until SIGTERM/SIGINT, then shuts down gracefully:
// stop accepting, answer requests already read, flush and close segments.
func runServe(args []string) error {
	cfg, o, err := parseServe(args)
	if err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return serveUsage("--log-level: %w", err)
	}
	lg := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	for _, n := range o.noEffect {
		lg.Info("server.properties: accepted without effect", "property", n)
	}
	if err := setCrashPoint(&cfg, lg); err != nil {
		return serveUsage("%w", err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return serve(ctx, cfg, o.metricsAddr, lg, nil)
}

// serveOptions are the `kawa serve` settings outside config.Broker.
type serveOptions struct {
	metricsAddr, logLevel string
	noEffect              []string // properties of --config accepted without effect, for the log
}

// parseServe turns `kawa serve` arguments (flags, and the --config file
// under them) into the broker config. Errors are usage errors.
func parseServe(args []string) (config.Broker, serveOptions, error) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	var cfg config.Broker
	var o serveOptions
	fs.StringVar(&cfg.Listen, "listen", "127.0.0.1:9092", "address of the one PLAINTEXT listener when --listeners is not set")
	configFile := fs.String("config", "", "Kafka broker properties file (server.properties); flags given on the command line override it")
	fs.StringVar(&cfg.Listeners, "listeners", "", "Kafka's listeners: NAME://host:port,... where NAME is PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL or mapped by --listener-security-protocol-map (replaces --listen)")
	fs.StringVar(&cfg.ListenerSecurityProtocolMap, "listener-security-protocol-map", "", "listener name to security protocol, e.g. INTERNAL:SASL_SSL,EXTERNAL:SSL (listener.security.protocol.map)")
	fs.StringVar(&cfg.AdvertisedListeners, "advertised-listeners", "", "NAME://host:port clients are told per listener; port 0 = the bound port (advertised.listeners)")
	sslProtocols := fs.String("ssl-enabled-protocols", "TLSv1.2,TLSv1.3", "TLS versions of SSL/SASL_SSL listeners: TLSv1.2, TLSv1.3 (ssl.enabled.protocols)")
	fs.StringVar(&cfg.SSLKeystoreLocation, "ssl-keystore-location", "", "PEM file with the private key and certificate chain of SSL/SASL_SSL listeners (ssl.keystore.location)")
	fs.StringVar(&cfg.SSLTruststoreLocation, "ssl-truststore-location", "", "PEM file of CA certificates client certificates must chain to (ssl.truststore.location)")
	fs.StringVar(&cfg.SSLClientAuth, "ssl-client-auth", "none", "client certificates: required, requested or none (ssl.client.auth)")
	saslMechs := fs.String("sasl-enabled-mechanisms", "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512", "SASL mechanisms of SASL listeners: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER (unsecured JWTs, for tests) (sasl.enabled.mechanisms)")
	// Node 1, as in Kafka's own quickstart (KRaft server.properties): client
	// test suites (kafka-go's) assert broker ID 1 and treat node 0 as unset.
	nodeID := fs.Int("node-id", 1, "this broker's node ID (node.id)")
	fs.StringVar(&cfg.DataDir, "data-dir", "kawa-data", "directory for topics, segments and state")
	fs.StringVar(&cfg.AdvertisedHost, "advertised-host", "", "host advertised to clients (default: the listen host; localhost for 127.0.0.1 when localhost resolves only there)")
	fsync := fs.String("fsync", "always", "flush policy: always (fsync before acks=all is acknowledged), interval, never")
	fs.DurationVar(&cfg.FsyncInterval, "fsync-interval", time.Second, "fsync period for --fsync=interval")
	maxReq := fs.Int("max-request-bytes", 100<<20, "largest request frame accepted; larger ones close the connection")
	fs.BoolVar(&cfg.AutoCreateTopics, "auto-create-topics", true, "create unknown topics on Metadata requests (auto.create.topics.enable)")
	parts := fs.Int("num-partitions", 1, "partitions of auto-created topics")
	fs.StringVar(&o.metricsAddr, "metrics-addr", "", "serve Prometheus metrics on this address (e.g. 127.0.0.1:9100)")
	fs.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.DurationVar(&cfg.RetentionCheck, "retention-check-interval", 5*time.Minute, "how often retention runs")
	fs.Int64Var(&cfg.QueuedMaxRequestBytes, "queued-max-request-bytes", config.DefaultQueuedMaxRequestBytes, "cap on bytes of requests read but not yet answered, over all connections (queued.max.request.bytes); -1 = unbounded")
	fs.DurationVar(&cfg.RequestReadTimeout, "request-read-timeout", 30*time.Second, "a request frame must arrive whole within this time of its size prefix")
	fs.IntVar(&cfg.MaxConnections, "max-connections", math.MaxInt32, "cap on open client connections; at it, accepting pauses (max.connections)")
	fs.IntVar(&cfg.MaxConnectionsPerIP, "max-connections-per-ip", math.MaxInt32, "cap on open connections from one client IP; more are closed at once (max.connections.per.ip)")
	fs.IntVar(&cfg.MaxOpenLogFiles, "max-open-log-files", 0, "segment files held open over all partitions; idle ones are closed and reopened on use (0 = half the open-file limit)")
	fs.StringVar(&cfg.AuthorizerClassName, "authorizer-class-name", "", "switch the authorizer on: "+acl.ClassName+" (authorizer.class.name; off by default)")
	superUsers := fs.String("super-users", "", "principals allowed everything, semicolon-separated: User:admin;User:CN=ops (super.users)")
	fs.BoolVar(&cfg.AllowEveryoneIfNoACLFound, "allow-everyone-if-no-acl-found", false, "allow an operation on a resource no ACL names (allow.everyone.if.no.acl.found)")
	fs.IntVar(&cfg.FetchSessionCacheSlots, "max-incremental-fetch-session-cache-slots", 1000, "KIP-227 fetch sessions cached at once (max.incremental.fetch.session.cache.slots); 0 = none, every fetch is a full one")
	fs.DurationVar(&cfg.ConnectionsMaxIdle, "connections-max-idle", 10*time.Minute, "close connections that send no request for this long (connections.max.idle.ms)")
	fs.DurationVar(&cfg.ConsumerSessionTimeout, "group-consumer-session-timeout", 45*time.Second, "a KIP-848 consumer-group member silent this long is fenced (group.consumer.session.timeout.ms)")
	fs.IntVar(&cfg.ConsumerMaxSize, "group-consumer-max-size", math.MaxInt32, "members a KIP-848 consumer group may have; a join beyond is GROUP_MAX_SIZE_REACHED (group.consumer.max.size)")
	fs.IntVar(&cfg.ShareSnapshotUpdateRecords, "share-coordinator-snapshot-update-records-per-snapshot", share.DefaultSnapshotUpdateRecords, "update records __share_group_state gets for a share-partition between snapshots of it, 1-500 (share.coordinator.snapshot.update.records.per.snapshot)")
	fs.DurationVar(&cfg.SharePruneInterval, "share-coordinator-state-topic-prune-interval", share.DefaultPruneInterval, "time between prune rounds of __share_group_state: its log start advances past what newer snapshots replace (share.coordinator.state.topic.prune.interval.ms)")
	fs.IntVar(&cfg.ShareMaxSessions, "group-share-max-share-sessions", share.DefaultMaxShareSessions, "share sessions open at once; opening one more is SHARE_SESSION_LIMIT_REACHED (group.share.max.share.sessions)")
	fs.IntVar(&cfg.ShareMaxRecordLocks, "group-share-partition-max-record-locks", share.DefaultMaxRecordLocks, "in-flight records of one share-partition, so the records it holds acquired at most (group.share.partition.max.record.locks)")
	fs.DurationVar(&cfg.ConsumerHeartbeatInterval, "group-consumer-heartbeat-interval", 5*time.Second, "heartbeat interval KIP-848 consumer-group members are told (group.consumer.heartbeat.interval.ms)")
	fs.DurationVar(&cfg.FailedAuthenticationDelay, "connection-failed-authentication-delay", 100*time.Millisecond, "hold back the answer to a failed SASL login this long; 0 = none (connection.failed.authentication.delay.ms)")
	fs.DurationVar(&cfg.ConnectionsMaxReauth, "connections-max-reauth", 0, "lifetime of a SASL session; clients re-authenticate before it ends, else the connection closes (connections.max.reauth.ms, KIP-368); 0 = unlimited")
	cfg.TopicDefaults = map[string]string{}
	topicDefaultFlags(fs, cfg.TopicDefaults)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return cfg, o, err
		}
		return cfg, o, serveUsage("%v", err)
	}
	if fs.NArg() > 0 {
		return cfg, o, serveUsage("unexpected argument %q (serve takes only flags)", fs.Arg(0))
	}
	if *configFile != "" {
		var err error
		if o.noEffect, err = applyServerProperties(fs, &cfg, *configFile); err != nil {
			return cfg, o, serveUsage("%v", err)
		}
	}
	if cfg.FetchSessionCacheSlots == 0 {
		cfg.FetchSessionCacheSlots = -1 // config.Broker's zero means the default; the flag's 0 means none
	}
	if cfg.FsyncInterval <= 0 || cfg.RetentionCheck <= 0 || cfg.RequestReadTimeout <= 0 || cfg.ConnectionsMaxIdle <= 0 ||
		cfg.ConsumerSessionTimeout <= 0 || cfg.ConsumerHeartbeatInterval <= 0 {
		return cfg, o, serveUsage("--fsync-interval, --retention-check-interval, --request-read-timeout, --connections-max-idle and the --group-consumer-* durations must be positive")
	}
	if cfg.ConnectionsMaxReauth < 0 || cfg.FailedAuthenticationDelay < 0 {
		return cfg, o, serveUsage("--connections-max-reauth and --connection-failed-authentication-delay must be 0 or positive")
	}
	if cfg.MaxOpenLogFiles < 0 {
		return cfg, o, serveUsage("--max-open-log-files must be 0 (automatic) or positive")
	}
	if cfg.ConsumerMaxSize <= 0 {
		return cfg, o, serveUsage("--group-consumer-max-size must be positive")
	}
	if cfg.ShareMaxRecordLocks <= 0 || cfg.ShareMaxSessions <= 0 {
		return cfg, o, serveUsage("--group-share-partition-max-record-locks and --group-share-max-share-sessions must be positive")
	}
	if cfg.ShareSnapshotUpdateRecords < 1 || cfg.ShareSnapshotUpdateRecords > 500 || cfg.SharePruneInterval <= 0 {
		return cfg, o, serveUsage("--share-coordinator-snapshot-update-records-per-snapshot must be 1-500 and --share-coordinator-state-topic-prune-interval positive")
	}
	if cfg.MaxConnections <= 0 || cfg.MaxConnectionsPerIP <= 0 {
		return cfg, o, serveUsage("--max-connections and --max-connections-per-ip must be positive")
	}
	if _, err := cfg.TopicDefaultsConfig(); err != nil {
		return cfg, o, serveUsage("%v", err)
	}
	cfg.SASLEnabledMechanisms = splitList(*saslMechs)
	cfg.SSLEnabledProtocols = splitList(*sslProtocols)
	var err error
	if cfg.SuperUsers, err = acl.ParseSuperUsers(*superUsers); err != nil {
		return cfg, o, serveUsage("--super-users: %v", err)
	}
	if cfg.AuthorizerClassName != "" && cfg.AuthorizerClassName != acl.ClassName {
		return cfg, o, serveUsage("--authorizer-class-name %q is not supported (only %s)", cfg.AuthorizerClassName, acl.ClassName)
	}
	if cfg.Fsync, err = config.ParseFsync(*fsync); err != nil {
		return cfg, o, serveUsage("%v", err)
	}
	if *maxReq <= 0 || *maxReq > 1<<30 {
		return cfg, o, serveUsage("--max-request-bytes must be between 1 and 1073741824")
	}
	cfg.MaxRequestBytes = int32(*maxReq)
	if q := cfg.QueuedMaxRequestBytes; q != -1 && q < int64(*maxReq) {
		// As Kafka's KafkaConfig requires: one request of the largest size must fit.
		return cfg, o, serveUsage("--queued-max-request-bytes must be -1 (unbounded) or at least --max-request-bytes (%d)", *maxReq)
	}
	if *nodeID < 0 || *nodeID > 1<<31-1 {
		return cfg, o, serveUsage("--node-id must be between 0 and 2147483647")
	}
	cfg.NodeID = int32(*nodeID)
	if *parts <= 0 {
		return cfg, o, serveUsage("--num-partitions must be positive")
	}
	cfg.DefaultPartitions = int32(*parts)
	return cfg, o, nil
}

// serve runs a broker with cfg until ctx ends. ready, if non-nil, receives
// the bound address once the broker accepts connections.
func serve(ctx context.Context, cfg config.Broker, metricsAddr string, lg *slog.Logger, ready chan<- string) error {
	cfg = cfg.WithDefaults()
	// Listeners and their TLS material are built before the data dir is locked and loaded, so a bad
	// listener or a missing or unreadable keystore is a usage error (exit 2), like every other bad setting.
	specs, skipped, err := listenerSpecs(cfg)
	if err != nil {
		return serveUsage("%v", err)
	}
	tc, err := listenersTLS(cfg, specs)
	if err != nil {
		return serveUsage("%v", err)
	}
	if slices.Contains(cfg.SASLEnabledMechanisms, auth.OAuthBearer) {
		lg.Warn("OAUTHBEARER takes unsecured JWTs (alg none): any client can log in as any principal; for tests only")
	}
	for _, l := range skipped {
		lg.Info("controller listener not opened: a single Kawa node has no controller quorum", "listener", l)
	}
	lns := make([]net.Listener, len(specs))
	closeLns := func() {
		for _, ln := range lns {
			if ln != nil {
				ln.Close()
			}
		}
	}
	for i, sp := range specs {
		if lns[i], err = net.Listen("tcp", sp.addr); err != nil {
			closeLns()
			return fmt.Errorf("listen %s://%s: %w", sp.protocol, sp.addr, err)
		}
	}
	host, port := advertisedAddr(cfg, specs[0], lns[0])

	unlock, err := lockDataDir(cfg.DataDir)
	if err != nil {
		closeLns()
		return err
	}
	defer unlock()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := broker.NewMetrics(reg)
	b, err := broker.Open(vfs.OS, cfg, host, port, lg, m)
	if err != nil {
		closeLns()
		return err
	}
	listeners, err := securedListeners(cfg, specs, tc, b.Credentials())
	if err != nil {
		closeLns()
		b.Close()
		return err
	}
	for i := range listeners {
		listeners[i].AdvertisedHost, listeners[i].AdvertisedPort = advertisedAddr(cfg, specs[i], lns[i])
	}
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kawa_log_fsyncs",
			Help: "fsyncs of partition .log files since their logs opened, summed over live partitions."},
			func() float64 { return float64(b.LogStats().Fsyncs) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kawa_log_fsynced_bytes",
			Help: "Bytes made durable by those fsyncs, summed over live partitions."},
			func() float64 { return float64(b.LogStats().FsyncedSize) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "kawa_fetched_file_bytes_total",
			Help: "Record batch bytes of Fetch answers sent from the segment files by splice(2) (plaintext listeners, ranges of 16 KiB or more); the rest of kawa_fetched_bytes_total was copied."},
			func() float64 { return float64(b.FetchedFromFiles()) }),
		// The log cleaner (compacted topics).
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "kawa_cleaner_passes_total",
			Help: "Log cleaner passes over a partition that rewrote its cleanable segments."},
			func() float64 { return float64(b.CleanerStats().Passes) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "kawa_cleaner_read_bytes_total",
			Help: "Bytes of segments the log cleaner rewrote, before cleaning."},
			func() float64 { return float64(b.CleanerStats().BytesRead) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "kawa_cleaner_written_bytes_total",
			Help: "Bytes of those segments after cleaning."},
			func() float64 { return float64(b.CleanerStats().BytesWritten) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "kawa_cleaner_removed_records_total",
			Help: "Records the log cleaner removed: superseded, aborted, or tombstones past delete.retention.ms."},
			func() float64 { return float64(b.CleanerStats().RecordsRemoved) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "kawa_cleaner_removed_markers_total",
			Help: "Transaction markers the log cleaner removed: no data of their transaction left, delete horizon passed."},
			func() float64 { return float64(b.CleanerStats().MarkersRemoved) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "kawa_cleaner_errors_total",
			Help: "Log cleaner passes that failed (logged with the partition and error)."},
			func() float64 { return float64(b.CleanerStats().Errors) }),
		b.CleanerCollector()) // per compacted partition: kawa_cleaner_dirty_ratio, _first_dirty_offset, _last_clean_timestamp_seconds
	var panics = prometheus.NewCounter(prometheus.CounterOpts{Name: "kawa_handler_panics_total", Help: "Handler panics (each closed its connection)."})
	reg.MustRegister(panics)
	scfg := server.ConfigFrom(cfg, lg)
	scfg.OnPanic = panics.Inc
	logins := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kawa_sasl_authentications_total",
		Help: "SASL exchanges that ended, by mechanism and result (success, failure)."}, []string{"mechanism", "result"})
	reg.MustRegister(logins)
	scfg.OnAuthentication = func(mech string, ok bool) {
		result := "failure"
		if ok {
			result = "success"
		}
		logins.WithLabelValues(mech, result).Inc()
	}
	expired := prometheus.NewCounter(prometheus.CounterOpts{Name: "kawa_sasl_expired_sessions_closed_total",
		Help: "Connections closed because their SASL session expired without re-authentication (KIP-368; Kafka's expired-connections-killed-count)."})
	reg.MustRegister(expired)
	scfg.OnSessionExpired = expired.Inc
	srv := server.New(scfg, b)

	var msrv *http.Server
	if metricsAddr != "" {
		mln, err := net.Listen("tcp", metricsAddr)
		if err != nil {
			closeLns()
			b.Close()
			return fmt.Errorf("metrics listen: %w", err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		// Profiles on the same operator-only address (bench: fetch CPU).
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		msrv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go msrv.Serve(mln)
		lg.Info("metrics listening", "addr", mln.Addr().String())
	}

	errc := make(chan error, len(lns))
	for i, ln := range lns {
		go func() { errc <- srv.ServeListener(ln, listeners[i]) }()
		lg.Info("kawa listening", "addr", ln.Addr().String(), "listener", specs[i].name, "protocol", listeners[i].Protocol, "data_dir", cfg.DataDir, "fsync", cfg.Fsync)
	}
	if ready != nil {
		ready <- lns[0].Addr().String()
	}
	var serveErr error
	select {
	case <-ctx.Done():
		lg.Info("shutting down")
	case serveErr = <-errc:
	}
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	if msrv != nil {
		_ = msrv.Shutdown(sctx)
	}
	if err := b.Close(); err != nil {
		return errors.Join(serveErr, fmt.Errorf("close: %w", err))
	}
	lg.Info("stopped")
	return serveErr
}

// advertisedAddr is the address clients of listener sp, bound as ln, are
// told: its advertised.listeners entry if it has one (port 0 = ln's port,
// empty host = as below), else AdvertisedHost if set, else the listener's
// host made dialable, and ln's port.
func advertisedAddr(cfg config.Broker, sp listenerSpec, ln net.Listener) (string, int32) {
	host, portStr, _ := net.SplitHostPort(ln.Addr().String())
	if sp.advertised != "" {
		ah, ap, _ := net.SplitHostPort(sp.advertised) // checked by listenerSpecs
		if p, err := strconv.Atoi(ap); err == nil && p > 0 {
			portStr = ap
		}
		if ah != "" {
			port, _ := strconv.Atoi(portStr)
			return ah, int32(port)
		}
	}
	if cfg.AdvertisedHost != "" {
		host = cfg.AdvertisedHost
	} else if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		// 0.0.0.0 / :: cannot be dialled: advertise the machine's name, as
		// Kafka does for a listener without an advertised host.
		if name, err := os.Hostname(); err == nil && name != "" {
			host = name
		}
	} else {
		host = loopbackName(host, net.LookupHost)
	}
	port, _ := strconv.Atoi(portStr)
	return host, int32(port)
}

// splitList splits a comma-separated flag or property value, dropping white
// space and empty entries.
func splitList(s string) []string {
	var out []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// topicDefaultFlags defines one flag per broker-level default of a topic config, named after Kafka's
// broker property (log.retention.ms is --log-retention-ms, compression.type --compression-type); a flag
// given stores its value in defaults under the topic config's name (retention.ms), which
// config.Broker.TopicDefaultsConfig validates with Kafka's rules.
func topicDefaultFlags(fs *flag.FlagSet, defaults map[string]string) {
	for _, d := range config.Defs {
		if d.Broker == "" {
			continue
		}
		fs.Var(topicDefault{defaults, d}, topicDefaultFlag(d.Broker),
			fmt.Sprintf("default %s of topics without an override (Kafka's %s): %s", d.Name, d.Broker, d.Doc))
	}
}

// topicDefaultFlag is the `kawa serve` flag of Kafka broker property name: its dots become dashes.
func topicDefaultFlag(name string) string { return strings.ReplaceAll(name, ".", "-") }

// topicDefault is the flag.Value of one topic default flag.
type topicDefault struct {
	m map[string]string
	d config.Def
}

func (f topicDefault) String() string {
	if f.m == nil {
		return "" // the zero value flag.PrintDefaults makes
	}
	if v, ok := f.m[f.d.Name]; ok {
		return v
	}
	return f.d.Default()
}

func (f topicDefault) Set(v string) error {
	t := config.DefaultTopic()
	if err := f.d.Set(&t, v); err != nil {
		return fmt.Errorf("%s: %w", f.d.Name, err)
	}
	f.m[f.d.Name] = v
	return nil
}

// serveUsage is a bad `kawa serve` command line: exit status 2, like the
// other subcommands (the flag set already printed its own usage).
func serveUsage(format string, args ...any) error {
	return cli.UsageErrorf("serve", "run 'kawa serve -h' for the flags\n", format, args...)
}

// loopbackName returns "localhost" for a 127.0.0.1 listener when every
// address "localhost" resolves to is 127.0.0.1, else host unchanged. Kafka's
// quickstart broker advertises localhost:9092, and client test suites
// (kafka-go's dialer, controller and coordinator tests) assert that name;
// where localhost also resolves to ::1, which Kawa does not listen on, the
// IP is kept so no client tries an address that refuses it.
func loopbackName(host string, lookup func(string) ([]string, error)) string {
	if host != "127.0.0.1" {
		return host
	}
	addrs, err := lookup("localhost")
	if err != nil || len(addrs) == 0 {
		return host
	}
	for _, a := range addrs {
		if a != "127.0.0.1" {
			return host
		}
	}
	return "localhost"
}
