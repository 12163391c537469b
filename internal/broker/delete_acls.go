package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/acl"
	"github.com/kawa-broker/kawa/internal/wire"
)

// DeleteAcls (key 31), versions 1-3 (KIP-11, KIP-290).
//
// Behaviour: each filter (acl.Filter, as DescribeAcls) removes the bindings
// it selects, which its result lists; a binding two filters select is
// listed under both. Without an authorizer every result is
// SECURITY_DISABLED; without ALTER on the cluster
// CLUSTER_AUTHORIZATION_FAILED; a filter with an UNKNOWN element
// INVALID_REQUEST (the other filters still apply). The removal is durable
// before the response; a storage failure fails every filter with
// KAFKA_STORAGE_ERROR and removes nothing.
func (b *Broker) handleDeleteAcls(_ context.Context, info wire.RequestInfo, req kmsg.Request) reply {
	r := req.(*kmsg.DeleteACLsRequest)
	resp := r.ResponseKind().(*kmsg.DeleteACLsResponse)
	resp.Results = make([]kmsg.DeleteACLsResponseResult, len(r.Filters))
	fail := func(i int, err *kerr.Error, msg string) {
		resp.Results[i] = kmsg.NewDeleteACLsResponseResult()
		resp.Results[i].ErrorCode = err.Code
		resp.Results[i].ErrorMessage = kmsg.StringPtr(msg)
	}
	if err, msg := b.aclAlterRefused(info); err != nil {
		for i := range r.Filters {
			fail(i, err, msg)
		}
		return now(resp)
	}
	var filters []acl.Filter
	var at []int
	for i, rf := range r.Filters {
		f := acl.Filter{
			ResourceType: rf.ResourceType, ResourceName: rf.ResourceName, PatternType: rf.ResourcePatternType,
			Principal: rf.Principal, Host: rf.Host, Operation: rf.Operation, Permission: rf.PermissionType,
		}
		if err := f.Validate(); err != nil {
			fail(i, kerr.InvalidRequest, err.Error())
			continue
		}
		resp.Results[i] = kmsg.NewDeleteACLsResponseResult()
		filters = append(filters, f)
		at = append(at, i)
	}
	if len(filters) == 0 {
		return now(resp)
	}
	deleted, err := b.authz.Delete(filters)
	if err != nil {
		b.lg.Error("storing ACLs failed", "err", err)
		for _, i := range at {
			fail(i, kerr.KafkaStorageError, err.Error())
		}
		return now(resp)
	}
	var all []acl.Binding
	for j, i := range at {
		for _, bd := range deleted[j] {
			m := kmsg.NewDeleteACLsResponseResultMatchingACL()
			m.ResourceType, m.ResourceName, m.ResourcePatternType = bd.ResourceType, bd.ResourceName, bd.PatternType
			m.Principal, m.Host, m.Operation, m.PermissionType = bd.Principal, bd.Host, bd.Operation, bd.Permission
			resp.Results[i].MatchingACLs = append(resp.Results[i].MatchingACLs, m)
		}
		all = append(all, deleted[j]...)
	}
	b.aclsChanged(info, "delete", all)
	return now(resp)
}
