package main

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kawa-broker/kawa/internal/kawatest"
)

// securedKawa writes a CA-issued server keystore (PEM, key and chain in one
// file, never committed) and a server.properties naming it to dir, and
// starts `kawa serve --config` on data with one SASL_SSL listener.
func securedKawa(t *testing.T, ca *kawatest.CA, dir, data string, extra ...string) *kawaProc {
	t.Helper()
	chain, key := kawatest.PEMFiles(t, ca.Issue("localhost", ""))
	ks := filepath.Join(dir, "server.pem")
	if err := os.WriteFile(ks, append(key, chain...), 0o600); err != nil {
		t.Fatal(err)
	}
	props := filepath.Join(dir, "server.properties")
	err := os.WriteFile(props, []byte(strings.Join([]string{
		"listeners=SASL_SSL://127.0.0.1:0",
		"ssl.keystore.type=PEM",
		"ssl.keystore.location=" + ks,
		"sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
		"",
	}, "\n")), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	return startKawa(t, data, append([]string{"--config", props}, extra...)...)
}

// TestKcatSASLSSLSCRAM512: the first administrator is created offline with
// `kawa user set`, the broker starts with --config server.properties, kcat
// (librdkafka) produces and consumes with
// security.protocol=SASL_SSL and SCRAM-SHA-512, a wrong password is refused
// with SASL_AUTHENTICATION_FAILED, and the credential survives SIGKILL.
func TestKcatSASLSSLSCRAM512(t *testing.T) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		if os.Getenv("KAWA_REQUIRE_KCAT") != "" {
			t.Fatal("kcat not installed but KAWA_REQUIRE_KCAT is set")
		}
		t.Skip("kcat not installed")
	}
	dir, data := t.TempDir(), t.TempDir()
	mustRun(t, runUser, "", "set", "admin", "--mechanism", "SCRAM-SHA-512", "--password", "admin-pw", "--data-dir", data)
	if out := mustRun(t, runUser, "", "list", "--data-dir", data); out != "admin\tSCRAM-SHA-512\t4096\n" {
		t.Fatalf("user list = %q", out)
	}
	ca := kawatest.NewCA(t, "kcat CA")
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, ca.PEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	metricsAddr := freeAddr(t)
	p := securedKawa(t, ca, dir, data, "--metrics-addr", metricsAddr)
	if _, err := runCmd(t, runUser, "", "set", "eve", "--password", "x", "--data-dir", data); err == nil {
		t.Fatal("kawa user set edited the data dir of a running broker")
	}

	kc := func(pass string, args ...string) *exec.Cmd {
		base := []string{"-b", p.Addr, "-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms=SCRAM-SHA-512",
			"-X", "sasl.username=admin", "-X", "sasl.password=" + pass, "-X", "ssl.ca.location=" + caFile}
		return exec.Command(kcat, append(base, args...)...)
	}
	prod := kc("admin-pw", "-P", "-t", "secure")
	prod.Stdin = strings.NewReader("one\ntwo\nthree\n")
	if out, err := prod.CombinedOutput(); err != nil {
		t.Fatalf("kcat -P: %v: %s", err, out)
	}
	out, err := kc("admin-pw", "-C", "-t", "secure", "-o", "beginning", "-e", "-q").Output()
	if err != nil {
		t.Fatalf("kcat -C: %v", err)
	}
	if got := string(out); got != "one\ntwo\nthree\n" {
		t.Fatalf("kcat consumed %q", got)
	}
	out, err = kc("wrong", "-L", "-m", "5").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "SASL authentication error") {
		t.Fatalf("kcat with a wrong password: err %v, output %s", err, out)
	}

	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`kawa_sasl_authentications_total{mechanism="SCRAM-SHA-512",result="success"}`, `kawa_sasl_authentications_total{mechanism="SCRAM-SHA-512",result="failure"}`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}

	p.Kill()
	p = securedKawa(t, ca, dir, data)
	tlsOpt := kgo.DialTLSConfig(&tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"})
	for _, tc := range []struct {
		pass string
		want error
	}{{"admin-pw", nil}, {"wrong", kerr.SaslAuthenticationFailed}} {
		cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr), tlsOpt, kgo.RequestRetries(0),
			kgo.SASL(scram.Auth{User: "admin", Pass: tc.pass}.AsSha512Mechanism()))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err = cl.Request(ctx, kmsg.NewPtrMetadataRequest())
		cancel()
		cl.Close()
		if !errors.Is(err, tc.want) {
			t.Fatalf("after SIGKILL and restart, password %q: err %v, want %v", tc.pass, err, tc.want)
		}
	}
}

// TestCommandConfig: kawa topic, produce and consume authenticate with
// Kafka's --command-config client properties (JAAS or librdkafka-style
// credentials, PEM truststore); a wrong password and an unknown property fail.
func TestCommandConfig(t *testing.T) {
	dir, data := t.TempDir(), t.TempDir()
	mustRun(t, runUser, "", "set", "admin", "--password", "admin-pw", "--data-dir", data)
	ca := kawatest.NewCA(t, "cli CA")
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, ca.PEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	p := securedKawa(t, ca, dir, data)
	write := func(name, body string) string {
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	jaas := write("jaas.properties", "# Kafka tools' client config\nsecurity.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"+
		`sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="admin-pw";`+
		"\nssl.truststore.type=PEM\nssl.truststore.location="+caFile+"\n")
	rdk := write("rdk.properties", "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.username=admin\nsasl.password=admin-pw\nssl.ca.location="+caFile+"\n")
	wrong := write("wrong.properties", "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\nsasl.username=admin\nsasl.password=nope\nssl.ca.location="+caFile+"\n")
	unknown := write("unknown.properties", "security.protocol=SASL_SSL\nsasl.kerberos.service.name=kafka\n")

	mustRun(t, runTopic, "", "create", "cfg", "--partitions", "1", "--brokers", p.Addr, "--command-config", jaas)
	mustRun(t, runProduce, "a\nb\n", "--brokers", p.Addr, "--topic", "cfg", "--command-config", rdk)
	if out := mustRun(t, runConsume, "", "--brokers", p.Addr, "--topic", "cfg", "--from-beginning", "--max-messages", "2", "--command-config", jaas); out != "a\nb\n" {
		t.Fatalf("consumed %q", out)
	}
	if _, err := runCmd(t, runTopic, "", "list", "--brokers", p.Addr, "--command-config", wrong, "--timeout", "5s"); err == nil {
		t.Fatal("topic list with a wrong password succeeded")
	}
	// kawa user online, through KIP-554.
	mustRun(t, runUser, "", "set", "bob", "--mechanism", "SCRAM-SHA-256", "--password", "bob-pw", "--brokers", p.Addr, "--command-config", jaas)
	if out := mustRun(t, runUser, "", "list", "--brokers", p.Addr, "--command-config", jaas); out != "admin\tSCRAM-SHA-512\t4096\nbob\tSCRAM-SHA-256\t4096\n" {
		t.Fatalf("user list online = %q", out)
	}
	bob := write("bob.properties", "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-256\nsasl.username=bob\nsasl.password=bob-pw\nssl.ca.location="+caFile+"\n")
	mustRun(t, runTopic, "", "list", "--brokers", p.Addr, "--command-config", bob)
	mustRun(t, runUser, "", "delete", "bob", "--mechanism", "SCRAM-SHA-256", "--brokers", p.Addr, "--command-config", jaas)
	if _, err := runCmd(t, runUser, "", "delete", "bob", "--mechanism", "SCRAM-SHA-256", "--brokers", p.Addr, "--command-config", jaas); err == nil || !strings.Contains(err.Error(), "RESOURCE_NOT_FOUND") {
		t.Fatalf("deleting bob twice: %v, want RESOURCE_NOT_FOUND", err)
	}
	if _, err := runCmd(t, runTopic, "", "list", "--brokers", p.Addr, "--command-config", bob, "--timeout", "5s"); err == nil {
		t.Fatal("bob logged in after his credential was deleted")
	}

	_, err := runCmd(t, runTopic, "", "list", "--brokers", p.Addr, "--command-config", unknown)
	if err == nil || !strings.Contains(err.Error(), "sasl.kerberos.service.name") {
		t.Fatalf("unknown property: err %v, want one naming it", err)
	}
}
