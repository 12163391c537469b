package broker_test

import (
	"errors"
	"sort"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/kawatest"
)

// TestACLAPIsSecurityDisabled: without an authorizer the ACL APIs answer
// SECURITY_DISABLED, as Kafka does.
func TestACLAPIsSecurityDisabled(t *testing.T) {
	b := kawatest.NewBroker(t)
	ctx := testCtx(t)
	adm := b.Admin()
	cr, err := adm.CreateACLs(ctx, kadm.NewACLs().Allow("User:alice").AllowHosts().Topics("t").Operations(kadm.OpRead))
	if err != nil || len(cr) != 1 || !errors.Is(cr[0].Err, kerr.SecurityDisabled) {
		t.Fatalf("CreateACLs = %+v, %v; want SECURITY_DISABLED", cr, err)
	}
	dr, err := adm.DescribeACLs(ctx, kadm.NewACLs().AnyResource().Allow().AllowHosts().Operations(kadm.OpAny))
	if err != nil || len(dr) == 0 || !errors.Is(dr[0].Err, kerr.SecurityDisabled) {
		t.Fatalf("DescribeACLs = %+v, %v; want SECURITY_DISABLED", dr, err)
	}
	del, err := adm.DeleteACLs(ctx, kadm.NewACLs().AnyResource().Allow().AllowHosts().Operations(kadm.OpAny))
	if err != nil || len(del) == 0 || !errors.Is(del[0].Err, kerr.SecurityDisabled) {
		t.Fatalf("DeleteACLs = %+v, %v; want SECURITY_DISABLED", del, err)
	}
}

// TestACLAPIs: create, describe (LITERAL, PREFIXED, MATCH, ANY filters per
// resource type), delete, CLUSTER_AUTHORIZATION_FAILED for a principal
// without ALTER/DESCRIBE on the cluster, INVALID_REQUEST for bindings and
// filters with MATCH/ANY/UNKNOWN where they cannot be, and persistence over
// a restart.
func TestACLAPIs(t *testing.T) {
	a := startAuthz(t)
	ctx := testCtx(t)
	a.grant(
		kadm.NewACLs().Allow("User:alice").AllowHosts().Topics("orders", "payments").Operations(kadm.OpRead, kadm.OpDescribe),
		kadm.NewACLs().Allow("User:bob").AllowHosts().Topics("ord").Operations(kadm.OpWrite).ResourcePatternType(kadm.ACLPatternPrefixed),
		kadm.NewACLs().Deny("User:bob").DenyHosts("10.9.9.9").Groups("g").Operations(kadm.OpAll),
		kadm.NewACLs().Allow("User:carol").AllowHosts().TransactionalIDs("tx-1").Operations(kadm.OpWrite),
		kadm.NewACLs().Allow("User:carol").AllowHosts().Clusters().Operations(kadm.OpIdempotentWrite),
	)
	adm := a.admin("admin")
	count := func(b *kadm.ACLBuilder) int {
		t.Helper()
		rs, err := adm.DescribeACLs(ctx, b)
		if err != nil {
			t.Fatalf("DescribeACLs: %v", err)
		}
		n := 0
		for _, r := range rs {
			if r.Err != nil {
				t.Fatalf("DescribeACLs: %v", r.Err)
			}
			n += len(r.Described)
		}
		return n
	}
	all := func() *kadm.ACLBuilder {
		return kadm.NewACLs().Allow().AllowHosts().Deny().DenyHosts().Operations(kadm.OpAny)
	}
	for _, c := range []struct {
		name string
		b    *kadm.ACLBuilder
		want int
	}{
		{"everything", all().AnyResource().ResourcePatternType(kadm.ACLPatternAny), 8},
		{"topics", all().Topics().ResourcePatternType(kadm.ACLPatternAny), 5},
		{"topic orders literal", all().Topics("orders"), 2},
		{"MATCH orders-eu", all().Topics("orders-eu").ResourcePatternType(kadm.ACLPatternMatch), 1},
		{"MATCH orders", all().Topics("orders").ResourcePatternType(kadm.ACLPatternMatch), 3},
		{"prefixed topics", all().Topics().ResourcePatternType(kadm.ACLPatternPrefixed), 1},
		{"groups", all().Groups().ResourcePatternType(kadm.ACLPatternAny), 1},
		{"transactional ids", all().TransactionalIDs().ResourcePatternType(kadm.ACLPatternAny), 1},
		{"cluster", all().Clusters().ResourcePatternType(kadm.ACLPatternAny), 1},
		{"principal alice", kadm.NewACLs().Allow("User:alice").AllowHosts().AnyResource().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny), 4},
		{"host", kadm.NewACLs().Deny().DenyHosts("10.9.9.9").AnyResource().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny), 1},
		{"operation read", all().AnyResource().Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternAny), 2},
	} {
		if got := count(c.b); got != c.want {
			t.Errorf("describe %s: %d bindings, want %d", c.name, got, c.want)
		}
	}

	// A principal without DESCRIBE/ALTER on the cluster.
	alice := a.admin("alice")
	if ar, err := alice.DescribeACLs(ctx, all().AnyResource()); err != nil || len(ar) == 0 || !errors.Is(ar[0].Err, kerr.ClusterAuthorizationFailed) {
		t.Errorf("alice DescribeACLs = %+v, %v; want CLUSTER_AUTHORIZATION_FAILED", ar, err)
	}
	cr, err := alice.CreateACLs(ctx, kadm.NewACLs().Allow("User:alice").AllowHosts().Topics("x").Operations(kadm.OpAll))
	if err != nil || len(cr) != 1 || !errors.Is(cr[0].Err, kerr.ClusterAuthorizationFailed) {
		t.Errorf("alice CreateACLs = %+v, %v; want CLUSTER_AUTHORIZATION_FAILED", cr, err)
	}
	dr, err := alice.DeleteACLs(ctx, all().AnyResource())
	if err != nil || len(dr) == 0 || !errors.Is(dr[0].Err, kerr.ClusterAuthorizationFailed) {
		t.Errorf("alice DeleteACLs = %+v, %v; want CLUSTER_AUTHORIZATION_FAILED", dr, err)
	}

	// Bad bindings and filters, sent raw (kadm validates its own input).
	cl := a.client("admin")
	creq := kmsg.NewPtrCreateACLsRequest()
	for _, pt := range []kmsg.ACLResourcePatternType{kmsg.ACLResourcePatternTypeMatch, kmsg.ACLResourcePatternTypeAny, kmsg.ACLResourcePatternTypeUnknown, kmsg.ACLResourcePatternTypeLiteral} {
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceTypeTopic, "t", pt
		c.Principal, c.Host, c.Operation, c.PermissionType = "User:x", "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
		if pt == kmsg.ACLResourcePatternTypeLiteral {
			c.Principal = "x" // no principal type
		}
		creq.Creations = append(creq.Creations, c)
	}
	cresp, err := creq.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range cresp.Results {
		if r.ErrorCode != kerr.InvalidRequest.Code {
			t.Errorf("creation %d: error %d, want INVALID_REQUEST", i, r.ErrorCode)
		}
	}
	dreq := kmsg.NewPtrDescribeACLsRequest()
	dreq.ResourceType, dreq.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeUnknown
	dreq.Operation, dreq.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	if dresp, err := dreq.RequestWith(ctx, cl); err != nil || dresp.ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("DescribeAcls with pattern UNKNOWN: %v, %v; want INVALID_REQUEST", dresp, err)
	}
	delreq := kmsg.NewPtrDeleteACLsRequest()
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourcePatternType, f.Operation, f.PermissionType = kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationUnknown, kmsg.ACLPermissionTypeAny
	delreq.Filters = append(delreq.Filters, f)
	if delresp, err := delreq.RequestWith(ctx, cl); err != nil || delresp.Results[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("DeleteAcls with operation UNKNOWN: %v, %v; want INVALID_REQUEST", delresp, err)
	}
	if got := count(all().AnyResource().ResourcePatternType(kadm.ACLPatternAny)); got != 8 {
		t.Fatalf("after refused requests: %d bindings, want 8", got)
	}

	// Delete by transactional id, then everything of bob's.
	del, err := adm.DeleteACLs(ctx, all().TransactionalIDs("tx-1"))
	if err != nil || len(del) != 1 || del[0].Err != nil || len(del[0].Deleted) != 1 || del[0].Deleted[0].Name != "tx-1" {
		t.Fatalf("DeleteACLs tx-1 = %+v, %v", del, err)
	}
	del, err = adm.DeleteACLs(ctx, kadm.NewACLs().Allow("User:bob").AllowHosts().Deny("User:bob").DenyHosts().AnyResource().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range del {
		for _, d := range r.Deleted {
			names = append(names, d.Type.String()+":"+d.Name)
		}
	}
	sort.Strings(names)
	if len(names) != 2 || names[0] != "GROUP:g" || names[1] != "TOPIC:ord" {
		t.Fatalf("deleted %v, want GROUP:g and TOPIC:ord", names)
	}

	// Persisted: a restarted broker has the remaining five.
	a.b = a.b.Restart()
	adm = a.admin("admin")
	if got := count(all().AnyResource().ResourcePatternType(kadm.ACLPatternAny)); got != 5 {
		t.Fatalf("after restart: %d bindings, want 5", got)
	}
}
