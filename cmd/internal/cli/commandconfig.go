package cli

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// commandConfigFlag is Kafka's --command-config: a client properties file.
const commandConfigFlag = "command-config"

// CommandConfigOpts reads a Kafka client properties file (the tools'
// --command-config) and returns the kgo options it asks for. Honoured:
// security.protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL),
// sasl.mechanism (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512), sasl.jaas.config
// (PlainLoginModule or ScramLoginModule with username= and password=) or
// librdkafka's sasl.username and sasl.password, and ssl.truststore.location
// or ssl.ca.location (a PEM file of CA certificates; without one the system
// roots are trusted). Any other property is an error naming it.
func CommandConfigOpts(path string) ([]kgo.Opt, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--command-config: %w", err)
	}
	entries, err := ParseProperties(b)
	if err != nil {
		return nil, fmt.Errorf("--command-config %s: %w", path, err)
	}
	props := map[string]string{}
	for _, p := range entries {
		props[p.Key] = p.Value
	}
	protocol := strings.ToUpper(props["security.protocol"])
	mech := strings.ToUpper(props["sasl.mechanism"])
	user, pass := props["sasl.username"], props["sasl.password"]
	ca := props["ssl.truststore.location"]
	if ca == "" {
		ca = props["ssl.ca.location"]
	}
	for k := range props {
		switch k {
		case "security.protocol", "sasl.mechanism", "sasl.username", "sasl.password",
			"ssl.truststore.location", "ssl.ca.location", "ssl.truststore.type":
		case "sasl.jaas.config":
			if user, pass, err = parseJAAS(props[k]); err != nil {
				return nil, fmt.Errorf("--command-config %s: sasl.jaas.config: %w", path, err)
			}
		default:
			return nil, fmt.Errorf("--command-config %s: unsupported property %q", path, k)
		}
	}
	var opts []kgo.Opt
	switch protocol {
	case "", "PLAINTEXT", "SASL_PLAINTEXT":
	case "SSL", "SASL_SSL":
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		if ca != "" {
			pemBytes, err := os.ReadFile(ca)
			if err != nil {
				return nil, fmt.Errorf("--command-config: ssl CA: %w", err)
			}
			tc.RootCAs = x509.NewCertPool()
			if !tc.RootCAs.AppendCertsFromPEM(pemBytes) {
				return nil, fmt.Errorf("--command-config: %s holds no PEM certificate", ca)
			}
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	default:
		return nil, fmt.Errorf("--command-config %s: unknown security.protocol %q", path, protocol)
	}
	if !strings.HasPrefix(protocol, "SASL_") {
		return opts, nil
	}
	if user == "" {
		return nil, fmt.Errorf("--command-config %s: %s needs sasl.jaas.config or sasl.username/sasl.password", path, protocol)
	}
	switch mech {
	case "PLAIN":
		opts = append(opts, kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism()))
	case "SCRAM-SHA-256":
		opts = append(opts, kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()))
	case "SCRAM-SHA-512":
		opts = append(opts, kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()))
	default:
		return nil, fmt.Errorf("--command-config %s: sasl.mechanism %q (have PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)", path, props["sasl.mechanism"])
	}
	return opts, nil
}

var jaasRE = regexp.MustCompile(`^org\.apache\.kafka\.common\.security\.(plain\.PlainLoginModule|scram\.ScramLoginModule)\s+required((?:\s+\w+\s*=\s*"[^"]*")*)\s*;\s*$`)
var jaasOptRE = regexp.MustCompile(`(\w+)\s*=\s*"([^"]*)"`)

// parseJAAS takes username and password from a PlainLoginModule or
// ScramLoginModule sasl.jaas.config line.
func parseJAAS(s string) (user, pass string, err error) {
	m := jaasRE.FindStringSubmatch(s)
	if m == nil {
		return "", "", fmt.Errorf(`want org.apache.kafka.common.security.{plain.PlainLoginModule|scram.ScramLoginModule} required username="..." password="...";`)
	}
	for _, o := range jaasOptRE.FindAllStringSubmatch(m[2], -1) {
		switch o[1] {
		case "username":
			user = o[2]
		case "password":
			pass = o[2]
		}
	}
	if user == "" {
		return "", "", fmt.Errorf("no username")
	}
	return user, pass, nil
}
