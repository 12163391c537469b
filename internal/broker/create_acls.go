package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/acl"
	"github.com/kawa-broker/kawa/internal/wire"
)

// CreateAcls (key 30), versions 1-3 (KIP-11, KIP-290 for pattern types).
//
// Behaviour: each creation is one binding (resource type, name, LITERAL or
// PREFIXED, principal, host, operation, ALLOW or DENY), answered in order.
// Without an authorizer every result is SECURITY_DISABLED; a caller without
// ALTER on the cluster gets CLUSTER_AUTHORIZATION_FAILED; an invalid binding
// (ANY, MATCH or UNKNOWN elements, an empty name, a principal not of the form
// Type:name) INVALID_REQUEST with the reason. The valid ones are stored
// together and durably before the response; an existing binding is kept
// once and succeeds. A storage failure fails them all with
// KAFKA_STORAGE_ERROR.
func (b *Broker) handleCreateAcls(_ context.Context, info wire.RequestInfo, req kmsg.Request) reply {
	r := req.(*kmsg.CreateACLsRequest)
	resp := r.ResponseKind().(*kmsg.CreateACLsResponse)
	resp.Results = make([]kmsg.CreateACLsResponseResult, len(r.Creations))
	fail := func(i int, err *kerr.Error, msg string) {
		resp.Results[i] = kmsg.NewCreateACLsResponseResult()
		resp.Results[i].ErrorCode = err.Code
		resp.Results[i].ErrorMessage = kmsg.StringPtr(msg)
	}
	if err, msg := b.aclAlterRefused(info); err != nil {
		for i := range r.Creations {
			fail(i, err, msg)
		}
		return now(resp)
	}
	var valid []acl.Binding
	var at []int
	for i, c := range r.Creations {
		bd := acl.Binding{
			ResourceType: c.ResourceType, ResourceName: c.ResourceName, PatternType: c.ResourcePatternType,
			Principal: c.Principal, Host: c.Host, Operation: c.Operation, Permission: c.PermissionType,
		}
		if err := bd.Validate(); err != nil {
			fail(i, kerr.InvalidRequest, err.Error())
			continue
		}
		resp.Results[i] = kmsg.NewCreateACLsResponseResult()
		valid = append(valid, bd)
		at = append(at, i)
	}
	if len(valid) == 0 {
		return now(resp)
	}
	if err := b.authz.Create(valid); err != nil {
		b.lg.Error("storing ACLs failed", "err", err)
		for _, i := range at {
			fail(i, kerr.KafkaStorageError, err.Error())
		}
		return now(resp)
	}
	b.aclsChanged(info, "create", valid)
	return now(resp)
}

// aclAlterRefused is why CreateAcls and DeleteAcls may not change anything,
// with Kafka's message: SECURITY_DISABLED without an authorizer,
// CLUSTER_AUTHORIZATION_FAILED without ALTER on the cluster; nil when they may.
func (b *Broker) aclAlterRefused(info wire.RequestInfo) (*kerr.Error, string) {
	switch {
	case b.authz == nil:
		return kerr.SecurityDisabled, "No Authorizer is configured."
	case !b.authorizedCluster(info, kmsg.ACLOperationAlter):
		return kerr.ClusterAuthorizationFailed, "Cluster authorization failed."
	}
	return nil, ""
}
