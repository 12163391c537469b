package main

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kawa-broker/kawa/cmd/internal/cli"
	"github.com/kawa-broker/kawa/internal/config"
	"github.com/kawa-broker/kawa/internal/kawatest"
	"github.com/kawa-broker/kawa/internal/kawatest/wait"
)

// writeProps writes lines as a properties file in a temp dir.
func writeProps(t *testing.T, lines ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "server.properties")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestServerPropertiesApply: Kafka's broker property names land on Kawa's
// settings, flags on the command line win over the file, Kafka's
// precedence between a setting's several names holds, and every bad file
// is an error naming the property and its line.
func TestServerPropertiesApply(t *testing.T) {
	path := writeProps(t,
		"# custom listener names, a continuation, both separators",
		"listeners=INTERNAL://127.0.0.1:19094,\\",
		"    EXTERNAL://127.0.0.1:19095",
		"listener.security.protocol.map: INTERNAL:SASL_SSL,EXTERNAL:SSL",
		"advertised.listeners=EXTERNAL://broker.example:9095",
		"node.id=5",
		"broker.id=5",
		"num.partitions=1",
		"log.dirs=/var/lib/kawa",
		"log.retention.hours=1",
		"log.retention.ms=5000",
		"log.roll.hours=2",
		"log.segment.bytes=2097152",
		"log.cleanup.policy=compact,delete",
		"log.cleaner.delete.retention.ms=10",
		"auto.create.topics.enable=FALSE",
		"connections.max.idle.ms=1500",
		"connections.max.reauth.ms=3600000",
		"connection.failed.authentication.delay.ms=250",
		"socket.request.max.bytes=1048576",
		"queued.max.request.bytes=-1",
		"max.connections.per.ip=7",
		"ssl.enabled.protocols=TLSv1.3",
		"ssl.keystore.type=PEM",
		"sasl.enabled.mechanisms=SCRAM-SHA-512",
		"group.initial.rebalance.delay.ms=250",
		"transaction.max.timeout.ms=60000",
		"offsets.retention.minutes=60",
		"default.replication.factor=1",
		"process.roles=broker,controller",
		"authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"super.users=User:admin;User:CN=ops,O=example",
		"allow.everyone.if.no.acl.found=true",
	)
	cfg, o, err := parseServe([]string{"--config", path, "--num-partitions", "3", "--data-dir", "/tmp/override"})
	if err != nil {
		t.Fatal(err)
	}
	cfg = cfg.WithDefaults()
	defaults, err := cfg.TopicDefaultsConfig()
	if err != nil {
		t.Fatal(err)
	}
	want := config.DefaultTopic()
	want.RetentionMs, want.SegmentMs, want.SegmentBytes = 5000, 2*3600*1000, 2<<20
	want.CleanupPolicy, want.DeleteRetentionMs = "compact,delete", 10
	for _, c := range []struct {
		what      string
		got, want any
	}{
		{"listeners", cfg.Listeners, "INTERNAL://127.0.0.1:19094,EXTERNAL://127.0.0.1:19095"},
		{"protocol map", cfg.ListenerSecurityProtocolMap, "INTERNAL:SASL_SSL,EXTERNAL:SSL"},
		{"advertised", cfg.AdvertisedListeners, "EXTERNAL://broker.example:9095"},
		{"node id", cfg.NodeID, int32(5)},
		{"partitions (flag wins)", cfg.DefaultPartitions, int32(3)},
		{"data dir (flag wins)", cfg.DataDir, "/tmp/override"},
		{"topic defaults", defaults, want},
		{"auto create", cfg.AutoCreateTopics, false},
		{"idle", cfg.ConnectionsMaxIdle, 1500 * time.Millisecond},
		{"reauth", cfg.ConnectionsMaxReauth, time.Hour},
		{"failed auth delay", cfg.FailedAuthenticationDelay, 250 * time.Millisecond},
		{"max request", cfg.MaxRequestBytes, int32(1 << 20)},
		{"queued", cfg.QueuedMaxRequestBytes, int64(-1)},
		{"per ip", cfg.MaxConnectionsPerIP, 7},
		{"tls", strings.Join(cfg.SSLEnabledProtocols, ","), "TLSv1.3"},
		{"sasl", strings.Join(cfg.SASLEnabledMechanisms, ","), "SCRAM-SHA-512"},
		{"rebalance delay", cfg.GroupInitialRebalanceDelay, 250 * time.Millisecond},
		{"txn timeout", cfg.TxnMaxTimeout, time.Minute},
		{"offsets retention", cfg.OffsetsRetention, time.Hour},
		{"authorizer", cfg.AuthorizerClassName, "org.apache.kafka.metadata.authorizer.StandardAuthorizer"},
		{"super users", strings.Join(cfg.SuperUsers, ";"), "User:admin;User:CN=ops,O=example"},
		{"allow everyone", cfg.AllowEveryoneIfNoACLFound, true},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
		}
	}
	specs, _, err := listenerSpecs(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != 2 || specs[0] != (listenerSpec{"INTERNAL", "SASL_SSL", "127.0.0.1:19094", ""}) ||
		specs[1] != (listenerSpec{"EXTERNAL", "SSL", "127.0.0.1:19095", "broker.example:9095"}) {
		t.Errorf("listener specs %+v", specs)
	}
	if len(o.noEffect) != 3 || !strings.HasPrefix(o.noEffect[0], "process.roles=broker,controller (") {
		t.Errorf("accepted without effect: %q", o.noEffect)
	}

	hours, _, err := parseServe([]string{"--config", writeProps(t, "log.retention.minutes=2", "log.retention.hours=1")})
	if err != nil || hours.TopicDefaults["retention.ms"] != "120000" {
		t.Errorf("log.retention.minutes over .hours: retention.ms %q, %v", hours.TopicDefaults["retention.ms"], err)
	}

	for _, c := range []struct {
		lines []string
		want  string
	}{
		{[]string{"num.partitions=1", "no.such.property=1"}, "line 2: unknown or unsupported property no.such.property"},
		{[]string{"# x", "", "num.partitions=zero"}, `line 3: num.partitions=zero: "zero" is not an integer`},
		{[]string{"num.partitions=0"}, "line 1: num.partitions=0: 0 is below the minimum 1"},
		{[]string{"log.segment.bytes=10"}, "line 1: log.segment.bytes=10:"},
		{[]string{"log.cleanup.policy=keep"}, "line 1: log.cleanup.policy=keep:"},
		{[]string{"auto.create.topics.enable=yes"}, `line 1: auto.create.topics.enable=yes: "yes" is not true or false`},
		{[]string{"log.dirs=/a,/b"}, "line 1: log.dirs=/a,/b: a Kawa node keeps its data in one directory"},
		{[]string{"default.replication.factor=3"}, "line 1: default.replication.factor=3: a single node can keep only 1 replica"},
		{[]string{"ssl.keystore.type=JKS"}, "line 1: ssl.keystore.type=JKS: only PEM"},
		{[]string{"process.roles=controller"}, "roles must include broker"},
		{[]string{"broker.id=1", "node.id=2"}, "line 2: node.id=2 differs from broker.id=1 on line 1"},
		{[]string{"connections.max.reauth.ms=-1"}, "line 1: connections.max.reauth.ms=-1: -1 is below the minimum 0"},
		{[]string{"authorizer.class.name=kafka.security.authorizer.AclAuthorizer"}, `--authorizer-class-name "kafka.security.authorizer.AclAuthorizer" is not supported`},
		{[]string{"super.users=alice"}, "--super-users"},
		{[]string{"connections.max.idle.ms=soon"}, `line 1: connections.max.idle.ms=soon: "soon" is not an integer`},
		{[]string{"max.connections=-5"}, "line 1: max.connections=-5"},
		{[]string{"transaction.max.timeout.ms=0"}, "line 1: transaction.max.timeout.ms=0: 0 is below the minimum 1"},
		{[]string{`bad\u00`}, "line 1: malformed"},
	} {
		_, _, err := parseServe([]string{"--config", writeProps(t, c.lines...)})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: err %v, want it to contain %q", c.lines, err, c.want)
		}
	}
	missing := filepath.Join(t.TempDir(), "missing.pem")
	var usage *cli.UsageError
	if err := runServe([]string{"--listeners", "SSL://127.0.0.1:0", "--ssl-keystore-location", missing, "--data-dir", t.TempDir()}); err == nil ||
		!strings.Contains(err.Error(), "ssl.keystore.location") || !errors.As(err, &usage) {
		t.Errorf("a missing keystore: err %v, want a usage error naming ssl.keystore.location", err)
	}
	if _, _, err := parseServe([]string{"--config", filepath.Join(t.TempDir(), "missing.properties")}); err == nil {
		t.Error("a missing --config file started")
	}
	for _, c := range []struct{ listeners, protoMap, want string }{
		{"INTERNAL://127.0.0.1:1", "", "INTERNAL is not a security protocol"},
		{"INTERNAL://127.0.0.1:1,PLAINTEXT://127.0.0.1:2", "INTERNAL:SSL", "PLAINTEXT is not in listener.security.protocol.map"},
		{"PLAINTEXT://127.0.0.1:1", "PLAINTEXT:TLS", "unknown security protocol TLS"},
		{"PLAINTEXT://127.0.0.1:1,plaintext://127.0.0.1:2", "", "PLAINTEXT given twice"},
	} {
		_, _, err := listenerSpecs(config.Broker{Listeners: c.listeners, ListenerSecurityProtocolMap: c.protoMap})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("listeners %q map %q: err %v, want %q", c.listeners, c.protoMap, err, c.want)
		}
	}
	if _, _, err := listenerSpecs(config.Broker{Listeners: "PLAINTEXT://127.0.0.1:1", AdvertisedListeners: "SSL://h:1"}); err == nil {
		t.Error("advertised.listeners naming no listener was accepted")
	}
}

// TestServerPropertiesKafkaExample: `kawa serve --config` starts on a file
// laid out as Kafka's KRaft example server.properties (combined roles, a
// CONTROLLER listener, replication factors of 1), overriding only the
// addresses and data directory on the command line; the controller listener
// is not opened, the harmless properties are logged as without effect, and a
// client produces and consumes through the advertised PLAINTEXT listener.
func TestServerPropertiesKafkaExample(t *testing.T) {
	t.Parallel()
	p := startKawa(t, t.TempDir(), "--config", filepath.Join("testdata", "kraft-server.properties"),
		"--listeners", "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"--advertised-listeners", "PLAINTEXT://127.0.0.1:0")
	for _, want := range []string{"num.network.threads=3", "controller.quorum.bootstrap.servers=localhost:9093", "transaction.state.log.min.isr=1"} {
		if len(p.Logged(want)) != 1 {
			t.Errorf("no log line says %s was accepted without effect", want)
		}
	}
	if l := p.Logged("controller listener not opened"); len(l) != 1 || !strings.Contains(l[0], "CONTROLLER://127.0.0.1:0") {
		t.Errorf("controller listener log: %q", l)
	}
	_, port, _ := net.SplitHostPort(p.Addr)
	cl := newClient(t, p.Addr, kgo.DefaultProduceTopic("example"), kgo.AllowAutoTopicCreation(), kgo.ConsumeTopics("example"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	md, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(md.Brokers) != 1 || md.Brokers[0].NodeID != 1 || md.Brokers[0].Host != "127.0.0.1" || strconv.Itoa(int(md.Brokers[0].Port)) != port {
		t.Fatalf("brokers %+v, want node 1 (node.id) at 127.0.0.1:%s", md.Brokers, port)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("from server.properties")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	fs := cl.PollFetches(ctx)
	if err := fs.Err(); err != nil {
		t.Fatal(err)
	}
	if recs := fs.Records(); len(recs) != 1 || string(recs[0].Value) != "from server.properties" {
		t.Fatalf("consumed %v", recs)
	}
}

// TestServerPropertiesCustomListenerSASLSSL: a listener with a custom name
// mapped to SASL_SSL (listener.security.protocol.map=INTERNAL:SASL_SSL),
// keystore and mechanisms from the file: a SCRAM-SHA-512 client logs in over
// TLS, and the file's num.partitions gives auto-created topics their count.
func TestServerPropertiesCustomListenerSASLSSL(t *testing.T) {
	t.Parallel()
	dir, data := t.TempDir(), t.TempDir()
	mustRun(t, runUser, "", "set", "admin", "--mechanism", "SCRAM-SHA-512", "--password", "pw", "--data-dir", data)
	ca := kawatest.NewCA(t, "props CA")
	chain, key := kawatest.PEMFiles(t, ca.Issue("localhost", ""))
	ks := filepath.Join(dir, "server.pem")
	if err := os.WriteFile(ks, append(key, chain...), 0o600); err != nil {
		t.Fatal(err)
	}
	path := writeProps(t,
		"listeners=INTERNAL://127.0.0.1:0",
		"listener.security.protocol.map=INTERNAL:SASL_SSL",
		"advertised.listeners=INTERNAL://localhost:0",
		"ssl.keystore.type=PEM",
		"ssl.keystore.location="+ks,
		"ssl.enabled.protocols=TLSv1.2,TLSv1.3",
		"sasl.enabled.mechanisms=SCRAM-SHA-512",
		"num.partitions=4",
	)
	p := startKawa(t, data, "--config", path)
	if l := p.Logged("kawa listening"); len(l) != 1 || !strings.Contains(l[0], "listener=INTERNAL protocol=SASL_SSL") {
		t.Fatalf("listening: %q", l)
	}
	cl := newClient(t, p.Addr, kgo.DialTLSConfig(&tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"}),
		kgo.SASL(scram.Auth{User: "admin", Pass: "pw"}.AsSha512Mechanism()), kgo.AllowAutoTopicCreation())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	md := kmsg.NewPtrMetadataRequest()
	topic := kmsg.NewMetadataRequestTopic()
	topic.Topic = kmsg.StringPtr("auto")
	md.Topics = append(md.Topics, topic)
	md.AllowAutoTopicCreation = true
	var resp *kmsg.MetadataResponse
	wait.Until(t, 20*time.Second, "topic auto to be created", func() bool {
		var err error
		resp, err = md.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return len(resp.Topics) == 1 && resp.Topics[0].ErrorCode == 0
	})
	if n := len(resp.Topics[0].Partitions); n != 4 {
		t.Errorf("auto-created topic has %d partitions, want 4 (num.partitions)", n)
	}
	if resp.Brokers[0].Host != "localhost" {
		t.Errorf("advertised host %q, want localhost (advertised.listeners)", resp.Brokers[0].Host)
	}
}

// TestREADMEListsServerProperties: the README's --config section names
// every property brokerProperties accepts, and each row does one thing.
func TestREADMEListsServerProperties(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	start := strings.Index(string(readme), "### `kawa serve --config server.properties`")
	if start < 0 {
		t.Fatal("README has no --config section")
	}
	section := string(readme)[start:]
	section = section[:strings.Index(section[4:], "\n### ")+4]
	serveHelp := serveFlagsHelp(t)
	for _, p := range brokerProperties {
		// log.retention.minutes may be written `log.retention.ms` / `.minutes`.
		if !strings.Contains(section, "`"+p.name+"`") && !strings.Contains(section, "`"+p.name[strings.LastIndex(p.name, "."):]+"`") {
			t.Errorf("README's --config section does not name %s", p.name)
		}
		if p.flag != "" && !strings.Contains(serveHelp, "-"+p.flag+" ") && !strings.Contains(serveHelp, "-"+p.flag+"\n") {
			t.Errorf("%s: kawa serve has no flag --%s", p.name, p.flag)
		}
		kinds := 0
		for _, set := range []bool{p.flag != "", p.set != nil, p.noEffect != ""} {
			if set {
				kinds++
			}
		}
		if kinds != 1 {
			t.Errorf("%s: %d of flag, set, noEffect; want exactly one", p.name, kinds)
		}
	}
}

// serveFlagsHelp is `kawa serve -h`'s flag list.
func serveFlagsHelp(t *testing.T) string {
	t.Helper()
	out, _ := exec.Command(kawaBinary(t), "serve", "-h").CombinedOutput()
	return string(out)
}
