package main

import (
	"context"
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/kawatest"
)

// TestEachListenerAdvertisesItself: with a PLAINTEXT and an SSL listener,
// Metadata, FindCoordinator and DescribeCluster answer each client with the
// port of the listener it came in on (Kafka's advertised.listeners per
// listener), so a TLS client is never sent to the plaintext port or back.
func TestEachListenerAdvertisesItself(t *testing.T) {
	t.Parallel()
	dir, data := t.TempDir(), t.TempDir()
	ca := kawatest.NewCA(t, "listeners CA")
	chain, key := kawatest.PEMFiles(t, ca.Issue("localhost", ""))
	ks := filepath.Join(dir, "server.pem")
	if err := os.WriteFile(ks, append(key, chain...), 0o600); err != nil {
		t.Fatal(err)
	}
	plain, secure := freeAddr(t), freeAddr(t)
	startKawa(t, data, "--listeners", "PLAINTEXT://"+plain+",SSL://"+secure, "--ssl-keystore-location", ks)

	tlsOpt := kgo.DialTLSConfig(&tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"})
	for _, tc := range []struct {
		addr string
		opts []kgo.Opt
	}{{plain, nil}, {secure, []kgo.Opt{tlsOpt}}} {
		_, wantPort, _ := net.SplitHostPort(tc.addr)
		cl := newClient(t, tc.addr, tc.opts...)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		// The first request goes to the seed, the only broker kgo knows yet.
		md, err := cl.Request(ctx, kmsg.NewPtrMetadataRequest())
		if err != nil {
			cancel()
			t.Fatalf("%s: metadata: %v", tc.addr, err)
		}
		brokers := md.(*kmsg.MetadataResponse).Brokers
		if len(brokers) != 1 || strconv.Itoa(int(brokers[0].Port)) != wantPort {
			t.Errorf("%s: Metadata brokers %+v, want port %s", tc.addr, brokers, wantPort)
		}
		fc := kmsg.NewPtrFindCoordinatorRequest()
		fc.CoordinatorKeys = []string{"g"}
		r, err := cl.Request(ctx, fc)
		if err != nil {
			cancel()
			t.Fatalf("%s: find coordinator: %v", tc.addr, err)
		}
		if cs := r.(*kmsg.FindCoordinatorResponse).Coordinators; len(cs) != 1 || strconv.Itoa(int(cs[0].Port)) != wantPort {
			t.Errorf("%s: FindCoordinator %+v, want port %s", tc.addr, cs, wantPort)
		}
		dc, err := cl.Request(ctx, kmsg.NewPtrDescribeClusterRequest())
		cancel()
		if err != nil {
			t.Fatalf("%s: describe cluster: %v", tc.addr, err)
		}
		if bs := dc.(*kmsg.DescribeClusterResponse).Brokers; len(bs) != 1 || strconv.Itoa(int(bs[0].Port)) != wantPort {
			t.Errorf("%s: DescribeCluster brokers %+v, want port %s", tc.addr, bs, wantPort)
		}
	}
}
