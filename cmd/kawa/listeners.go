package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"

	"github.com/kawa-broker/kawa/internal/auth"
	"github.com/kawa-broker/kawa/internal/config"
	"github.com/kawa-broker/kawa/internal/server"
)

// listenerSpec is one entry of Kafka's listeners property,
// NAME://host:port, with the security protocol its name maps to and, from
// advertised.listeners, the host:port clients are told ("" = derived from
// the bound address, as advertisedAddr does).
type listenerSpec struct {
	name, protocol, addr string
	advertised           string
}

// securityProtocols are the values of listener.security.protocol.map.
var securityProtocols = []string{server.Plaintext, server.SSL, server.SASLPlaintext, server.SASLSSL}

// parseProtocolMap parses Kafka's listener.security.protocol.map
// ("INTERNAL:SASL_SSL,EXTERNAL:SSL"): listener name -> security protocol.
// Names are upper-cased, as Kafka's ListenerName.normalised does.
func parseProtocolMap(s string) (map[string]string, error) {
	out := map[string]string{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for _, e := range strings.Split(s, ",") {
		name, proto, ok := strings.Cut(strings.TrimSpace(e), ":")
		name, proto = strings.ToUpper(strings.TrimSpace(name)), strings.ToUpper(strings.TrimSpace(proto))
		if !ok || name == "" {
			return nil, fmt.Errorf("listener.security.protocol.map: %q is not NAME:PROTOCOL", e)
		}
		if !slices.Contains(securityProtocols, proto) {
			return nil, fmt.Errorf("listener.security.protocol.map: %q: unknown security protocol %s (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)", e, proto)
		}
		out[name] = proto
	}
	return out, nil
}

// splitListenerList parses a listeners or advertised.listeners value
// (NAME://host:port,...) into name -> host:port in order, refusing a
// repeated name.
func splitListenerList(prop, s string) (names []string, addrs map[string]string, err error) {
	addrs = map[string]string{}
	for _, e := range strings.Split(s, ",") {
		e = strings.TrimSpace(e)
		name, addr, ok := strings.Cut(e, "://")
		if !ok || addr == "" || name == "" {
			return nil, nil, fmt.Errorf("%s: %q is not NAME://host:port", prop, e)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, nil, fmt.Errorf("%s: %q: %v", prop, e, err)
		}
		name = strings.ToUpper(name)
		if _, dup := addrs[name]; dup {
			return nil, nil, fmt.Errorf("%s: listener name %s given twice", prop, name)
		}
		names = append(names, name)
		addrs[name] = addr
	}
	return names, addrs, nil
}

// listenerSpecs returns the listeners Kawa opens for cfg: cfg.Listeners
// (Kafka's listeners) if set, else one PLAINTEXT listener on cfg.Listen.
// A listener's name is its security protocol unless
// listener.security.protocol.map maps it (INTERNAL:SASL_SSL); once that map
// is given every name must be in it, except controller listeners
// (controller.listener.names), which default to PLAINTEXT. Controller
// listeners are not opened (a single Kawa node has no controller quorum to
// serve) and are returned in skipped, for the log. advertised.listeners may
// name a subset of the listeners; its port 0 means the bound port.
func listenerSpecs(cfg config.Broker) (specs []listenerSpec, skipped []string, err error) {
	if cfg.Listeners == "" {
		if cfg.AdvertisedListeners != "" {
			return nil, nil, fmt.Errorf("advertised.listeners needs listeners")
		}
		return []listenerSpec{{name: server.Plaintext, protocol: server.Plaintext, addr: cfg.Listen}}, nil, nil
	}
	protoMap, err := parseProtocolMap(cfg.ListenerSecurityProtocolMap)
	if err != nil {
		return nil, nil, err
	}
	names, addrs, err := splitListenerList("listeners", cfg.Listeners)
	if err != nil {
		return nil, nil, err
	}
	advertised := map[string]string{}
	if cfg.AdvertisedListeners != "" {
		var advNames []string
		if advNames, advertised, err = splitListenerList("advertised.listeners", cfg.AdvertisedListeners); err != nil {
			return nil, nil, err
		}
		for _, n := range advNames {
			if _, ok := addrs[n]; !ok {
				return nil, nil, fmt.Errorf("advertised.listeners: %s is not one of listeners (%s)", n, strings.Join(names, ", "))
			}
		}
	}
	controller := map[string]bool{}
	for _, n := range cfg.ControllerListenerNames {
		controller[strings.ToUpper(n)] = true
	}
	for _, name := range names {
		if controller[name] {
			skipped = append(skipped, name+"://"+addrs[name])
			continue
		}
		proto, ok := protoMap[name]
		if !ok {
			if len(protoMap) > 0 {
				return nil, nil, fmt.Errorf("listeners: listener %s is not in listener.security.protocol.map", name)
			}
			if !slices.Contains(securityProtocols, name) {
				return nil, nil, fmt.Errorf("listeners: %s is not a security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL); map a custom name with listener.security.protocol.map", name)
			}
			proto = name
		}
		specs = append(specs, listenerSpec{name: name, protocol: proto, addr: addrs[name], advertised: advertised[name]})
	}
	if len(specs) == 0 {
		return nil, nil, fmt.Errorf("listeners: no listener left besides the controller listeners (%s)", strings.Join(cfg.ControllerListenerNames, ", "))
	}
	return specs, skipped, nil
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
	if tc.MinVersion, tc.MaxVersion, err = tlsVersions(cfg.SSLEnabledProtocols); err != nil {
		return nil, err
	}
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

// tlsVersions maps Kafka's ssl.enabled.protocols (TLSv1.2, TLSv1.3) to the
// lowest and highest version offered; empty is both. Older versions are
// refused: Kawa's listeners require TLS 1.2 or later.
func tlsVersions(protocols []string) (lo, hi uint16, err error) {
	if len(protocols) == 0 {
		return tls.VersionTLS12, tls.VersionTLS13, nil
	}
	for _, p := range protocols {
		var v uint16
		switch strings.TrimSpace(p) {
		case "TLSv1.2":
			v = tls.VersionTLS12
		case "TLSv1.3":
			v = tls.VersionTLS13
		default:
			return 0, 0, fmt.Errorf("ssl.enabled.protocols: %q is not TLSv1.2 or TLSv1.3 (older versions are refused)", p)
		}
		if lo == 0 || v < lo {
			lo = v
		}
		hi = max(hi, v)
	}
	return lo, hi, nil
}

// listenersTLS is the TLS configuration of the SSL and SASL_SSL listeners among specs (tlsConfig), or nil
// when there are none.
func listenersTLS(cfg config.Broker, specs []listenerSpec) (*tls.Config, error) {
	for _, sp := range specs {
		if sp.protocol == server.SSL || sp.protocol == server.SASLSSL {
			return tlsConfig(cfg)
		}
	}
	return nil, nil
}

// securedListeners returns the server.Listener of each spec: tc (listenersTLS) on the SSL and SASL_SSL
// ones, SASL over the credential store in the data dir.
func securedListeners(cfg config.Broker, specs []listenerSpec, tc *tls.Config, store *auth.Store) ([]server.Listener, error) {
	out := make([]server.Listener, len(specs))
	var sasl *auth.SASL
	for i, sp := range specs {
		l := server.Listener{Protocol: sp.protocol}
		if sp.protocol == server.SSL || sp.protocol == server.SASLSSL {
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
