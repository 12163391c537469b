package broker

import (
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/acl"
	"github.com/kawa-broker/kawa/internal/config"
	"github.com/kawa-broker/kawa/internal/vfs"
	"github.com/kawa-broker/kawa/internal/wire"
)

// openAuthorizer returns the authorizer cfg asks for, nil for none. An
// authorizer.class.name other than Kafka's StandardAuthorizer is an error:
// silently running without the authorizer someone configured would open
// the broker.
func openAuthorizer(fsys vfs.FS, cfg config.Broker) (*acl.Authorizer, error) {
	switch cfg.AuthorizerClassName {
	case "":
		return nil, nil
	case acl.ClassName:
	default:
		return nil, fmt.Errorf("broker: authorizer.class.name %q is not supported (only %s)", cfg.AuthorizerClassName, acl.ClassName)
	}
	return acl.Open(fsys, cfg.DataDir, acl.Options{SuperUsers: cfg.SuperUsers, AllowEveryoneIfNoACLFound: cfg.AllowEveryoneIfNoACLFound})
}

// clientHost is the client's IP address as ACL hosts name it.
func clientHost(info wire.RequestInfo) string {
	if h, _, err := net.SplitHostPort(info.ClientAddr); err == nil {
		return h
	}
	return info.ClientAddr
}

// principal is the request's principal, User:ANONYMOUS when the server set
// none (in-process callers).
func principal(info wire.RequestInfo) string {
	if info.Principal == "" {
		return "User:ANONYMOUS"
	}
	return info.Principal
}

// authorized reports whether the request's principal may perform op on the
// resource (Kafka's authorizer rules, package acl); always true without an
// authorizer. A denial is counted and logged (rate-limited).
func (b *Broker) authorized(info wire.RequestInfo, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	if b.authz == nil {
		return true
	}
	if b.authz.Authorize(principal(info), clientHost(info), op, rt, name) {
		return true
	}
	b.denied(info, op, rt, name)
	return false
}

// authorizedQuiet is authorized without the count and log, for the checks
// whose denial is not an error: Metadata and the list APIs leave out what
// the principal may not see (Kafka logs those at debug level only).
func (b *Broker) authorizedQuiet(info wire.RequestInfo, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	return b.authz == nil || b.authz.Authorize(principal(info), clientHost(info), op, rt, name)
}

// groupACLOperations are the operations Kafka's authorizer knows on a GROUP
// (AclEntry.supportedOperations), the bits of a group's authorized
// operations (KIP-430).
var groupACLOperations = []kmsg.ACLOperation{
	kmsg.ACLOperationRead, kmsg.ACLOperationDescribe, kmsg.ACLOperationDelete,
	kmsg.ACLOperationDescribeConfigs, kmsg.ACLOperationAlterConfigs,
}

// groupOperations is KIP-430's authorized-operations bitfield of group for
// the request's principal (bit n set: ACL operation code n allowed); without
// an authorizer it is unrestricted, the coordinator's value.
func (b *Broker) groupOperations(info wire.RequestInfo, group string, unrestricted int32) int32 {
	if b.authz == nil {
		return unrestricted
	}
	var ops int32
	for _, op := range groupACLOperations {
		if b.authorizedQuiet(info, op, kmsg.ACLResourceTypeGroup, group) {
			ops |= 1 << op
		}
	}
	return ops
}

// authorizedCluster is authorized on the cluster resource.
func (b *Broker) authorizedCluster(info wire.RequestInfo, op kmsg.ACLOperation) bool {
	return b.authorized(info, op, kmsg.ACLResourceTypeCluster, acl.ClusterName)
}

// authorizedAnyOf reports whether the principal may perform op on some
// resource of type rt (Kafka's authorizeByResourceType).
func (b *Broker) authorizedAnyOf(info wire.RequestInfo, op kmsg.ACLOperation, rt kmsg.ACLResourceType) bool {
	return b.authz == nil || b.authz.AuthorizeByResourceType(principal(info), clientHost(info), op, rt)
}

func (b *Broker) denied(info wire.RequestInfo, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) {
	b.metrics.AuthzDenied.WithLabelValues(op.String(), rt.String()).Inc()
	if ok, suppressed := b.denials.allow(time.Now()); ok {
		b.lg.Info("authorization denied", "principal", principal(info), "host", clientHost(info),
			"operation", op.String(), "resource_type", rt.String(), "resource", name, "suppressed", suppressed)
	}
}

// rateLog limits log lines to one per interval; the ones it holds back
// are counted and reported with the next line (the metric counts all).
type rateLog struct {
	mu         sync.Mutex
	next       time.Time
	suppressed int
}

// denialLogInterval is the least time between two logged denials (or two
// logged ACL changes).
const denialLogInterval = time.Second

func (d *rateLog) allow(now time.Time) (bool, int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if now.Before(d.next) {
		d.suppressed++
		return false, 0
	}
	n := d.suppressed
	d.next, d.suppressed = now.Add(denialLogInterval), 0
	return true, n
}

// aclsChanged counts and logs (rate-limited) bindings created or deleted.
func (b *Broker) aclsChanged(info wire.RequestInfo, change string, bs []acl.Binding) {
	if len(bs) == 0 {
		return
	}
	b.metrics.ACLChanges.WithLabelValues(change).Add(float64(len(bs)))
	if ok, suppressed := b.aclLog.allow(time.Now()); ok {
		b.lg.Info("ACLs changed", "change", change, "principal", principal(info), "host", clientHost(info),
			"count", len(bs), "first", bs[0].String(), "suppressed", suppressed)
	}
}
