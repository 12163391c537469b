package broker

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/acl"
	"github.com/kawa-broker/kawa/internal/config"
	"github.com/kawa-broker/kawa/internal/vfs"
	"github.com/kawa-broker/kawa/internal/wire"
)

// TestRateLog: one line per interval; the lines held back are counted
// and reported with the next.
func TestRateLog(t *testing.T) {
	var r rateLog
	t0 := time.Unix(1000, 0)
	steps := []struct {
		at         time.Duration
		ok         bool
		suppressed int
	}{{0, true, 0}, {100 * time.Millisecond, false, 0}, {900 * time.Millisecond, false, 0}, {time.Second, true, 2}, {1500 * time.Millisecond, false, 0}, {5 * time.Second, true, 1}}
	for _, s := range steps {
		if ok, n := r.allow(t0.Add(s.at)); ok != s.ok || n != s.suppressed {
			t.Errorf("allow(+%v) = %v, %d; want %v, %d", s.at, ok, n, s.ok, s.suppressed)
		}
	}
}

// TestDenialsCountedAndLogged: every denial counts in
// kawa_authorizer_denied_total; a burst logs one line; ACL changes count in
// kawa_acl_changes_total; an authorizer.class.name Kawa does not have stops
// Open.
func TestDenialsCountedAndLogged(t *testing.T) {
	var logged bytes.Buffer
	lg := slog.New(slog.NewTextHandler(&logged, nil))
	m := NewMetrics(nil)
	fsys := vfs.NewMem()
	b, err := Open(fsys, config.Broker{DataDir: "/kawa", AuthorizerClassName: acl.ClassName}, "127.0.0.1", 9092, lg, m)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	info := wire.RequestInfo{ClientAddr: "10.1.2.3:40000", Principal: "User:alice"}
	for range 5 {
		if b.authorized(info, kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, "orders") {
			t.Fatal("allowed without ACLs")
		}
	}
	if n := counterValue(t, m.AuthzDenied.WithLabelValues("READ", "TOPIC")); n != 5 {
		t.Fatalf("kawa_authorizer_denied_total{READ,TOPIC} = %v, want 5", n)
	}
	if n := strings.Count(logged.String(), "authorization denied"); n != 1 {
		t.Fatalf("%d denial lines for a burst of 5, want 1:\n%s", n, logged.String())
	}
	if !strings.Contains(logged.String(), "principal=User:alice host=10.1.2.3") {
		t.Fatalf("denial line lacks principal and host:\n%s", logged.String())
	}
	bd := acl.Binding{ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: "orders", PatternType: kmsg.ACLResourcePatternTypeLiteral,
		Principal: "User:alice", Host: "10.1.2.3", Operation: kmsg.ACLOperationRead, Permission: kmsg.ACLPermissionTypeAllow}
	if err := b.authz.Create([]acl.Binding{bd}); err != nil {
		t.Fatal(err)
	}
	b.aclsChanged(info, "create", []acl.Binding{bd})
	if n := counterValue(t, m.ACLChanges.WithLabelValues("create")); n != 1 {
		t.Fatalf("kawa_acl_changes_total{create} = %v, want 1", n)
	}
	if !b.authorized(info, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, "orders") {
		t.Fatal("READ from 10.1.2.3 does not imply DESCRIBE")
	}
	if b.authorized(wire.RequestInfo{ClientAddr: "10.9.9.9:1", Principal: "User:alice"}, kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, "orders") {
		t.Fatal("a binding for host 10.1.2.3 allowed 10.9.9.9")
	}

	if _, err := Open(vfs.NewMem(), config.Broker{DataDir: "/other", AuthorizerClassName: "kafka.security.authorizer.AclAuthorizer"}, "127.0.0.1", 9092, lg, nil); err == nil {
		t.Fatal("Open accepted an authorizer class Kawa does not have")
	}
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
