package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/kawa-broker/kawa/internal/auth"
	"github.com/kawa-broker/kawa/internal/config"
	"github.com/kawa-broker/kawa/internal/server"
)

// listenerSpec is one entry of Kafka's listeners property: PROTOCOL://host:port.
type listenerSpec struct {
	protocol, addr string
}

// parseListeners parses Kafka's listeners syntax
// ("PLAINTEXT://127.0.0.1:9092,SASL_SSL://127.0.0.1:9094"); a listener name
// is its security protocol (no listener.security.protocol.map yet).
func parseListeners(s string) ([]listenerSpec, error) {
	var out []listenerSpec
	for _, e := range strings.Split(s, ",") {
		e = strings.TrimSpace(e)
		proto, addr, ok := strings.Cut(e, "://")
		if !ok || addr == "" {
			return nil, fmt.Errorf("listeners: %q is not PROTOCOL://host:port", e)
		}
		proto = strings.ToUpper(proto)
		switch proto {
		case server.Plaintext, server.SSL, server.SASLPlaintext, server.SASLSSL:
		default:
			return nil, fmt.Errorf("listeners: %q: unknown security protocol %s (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)", e, proto)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("listeners: %q: %v", e, err)
		}
		out = append(out, listenerSpec{proto, addr})
	}
	return out, nil
}

// listenerSpecs returns cfg's listeners: Listeners if set, else one
// PLAINTEXT listener on Listen.
func listenerSpecs(cfg config.Broker) ([]listenerSpec, error) {
	if cfg.Listeners == "" {
		return []listenerSpec{{server.Plaintext, cfg.Listen}}, nil
	}
	return parseListeners(cfg.Listeners)
}

// tlsConfig builds the listeners' TLS settings from the PEM keystore (key
// and chain in one file) and truststore (ssl.keystore.type=PEM,
// ssl.truststore.type=PEM).
func tlsConfig(cfg config.Broker) (*tls.Config, error) {
	if cfg.SSLKeystoreLocation == "" {
		return nil, fmt.Errorf("an SSL or SASL_SSL listener needs ssl.keystore.location (--ssl-keystore-location)")
	}
	pemBytes, err := os.ReadFile(cfg.SSLKeystoreLocation)
	if err != nil {
		return nil, fmt.Errorf("ssl.keystore.location: %w", err)
	}
	cert, err := tls.X509KeyPair(pemBytes, pemBytes)
	if err != nil {
		return nil, fmt.Errorf("ssl.keystore.location %s: %w", cfg.SSLKeystoreLocation, err)
	}
	tc := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if cfg.SSLTruststoreLocation != "" {
		ca, err := os.ReadFile(cfg.SSLTruststoreLocation)
		if err != nil {
			return nil, fmt.Errorf("ssl.truststore.location: %w", err)
		}
		tc.ClientCAs = x509.NewCertPool()
		if !tc.ClientCAs.AppendCertsFromPEM(ca) {
			return nil, fmt.Errorf("ssl.truststore.location %s: no PEM certificate", cfg.SSLTruststoreLocation)
		}
	}
	switch strings.ToLower(cfg.SSLClientAuth) {
	case "", "none":
	case "requested":
		tc.ClientAuth = tls.VerifyClientCertIfGiven
	case "required":
		tc.ClientAuth = tls.RequireAndVerifyClientCert
	default:
		return nil, fmt.Errorf("ssl.client.auth: %q is not required, requested or none", cfg.SSLClientAuth)
	}
	if tc.ClientAuth != tls.NoClientCert && tc.ClientCAs == nil {
		return nil, fmt.Errorf("ssl.client.auth=%s needs ssl.truststore.location", cfg.SSLClientAuth)
	}
	return tc, nil
}

// securedListeners returns the server.Listener of each spec: TLS from the
// keystore, SASL over the credential store in the data dir.
func securedListeners(cfg config.Broker, specs []listenerSpec, store *auth.Store) ([]server.Listener, error) {
	out := make([]server.Listener, len(specs))
	var tc *tls.Config
	var sasl *auth.SASL
	for i, sp := range specs {
		l := server.Listener{Protocol: sp.protocol}
		if sp.protocol == server.SSL || sp.protocol == server.SASLSSL {
			if tc == nil {
				var err error
				if tc, err = tlsConfig(cfg); err != nil {
					return nil, err
				}
			}
			l.TLS = tc
		}
		if sp.protocol == server.SASLPlaintext || sp.protocol == server.SASLSSL {
			if sasl == nil {
				var err error
				if sasl, err = auth.NewSASL(store, cfg.SASLEnabledMechanisms); err != nil {
					return nil, fmt.Errorf("sasl.enabled.mechanisms: %w", err)
				}
			}
			l.SASL = sasl
		}
		out[i] = l
	}
	return out, nil
}
