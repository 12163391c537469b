package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/acl"
	"github.com/kawa-broker/kawa/internal/wire"
)

// DescribeAcls (key 29), versions 1-3 (KIP-11, KIP-290).
//
// Behaviour: the bindings one filter selects (acl.Filter: ANY and MATCH
// pattern types, nil name/principal/host for any), grouped by resource
// pattern. Without an authorizer SECURITY_DISABLED; without DESCRIBE on the
// cluster CLUSTER_AUTHORIZATION_FAILED; a filter with an UNKNOWN element
// INVALID_REQUEST.
func (b *Broker) handleDescribeAcls(_ context.Context, info wire.RequestInfo, req kmsg.Request) reply {
	r := req.(*kmsg.DescribeACLsRequest)
	resp := r.ResponseKind().(*kmsg.DescribeACLsResponse)
	f := acl.Filter{
		ResourceType: r.ResourceType, ResourceName: r.ResourceName, PatternType: r.ResourcePatternType,
		Principal: r.Principal, Host: r.Host, Operation: r.Operation, Permission: r.PermissionType,
	}
	var err *kerr.Error
	switch {
	case b.authz == nil:
		err = kerr.SecurityDisabled
		resp.ErrorMessage = kmsg.StringPtr("No Authorizer is configured.")
	case !b.authorizedCluster(info, kmsg.ACLOperationDescribe):
		err = kerr.ClusterAuthorizationFailed
	default:
		if verr := f.Validate(); verr != nil {
			err = kerr.InvalidRequest
			resp.ErrorMessage = kmsg.StringPtr(verr.Error())
		}
	}
	if err != nil {
		resp.ErrorCode = err.Code
		return now(resp)
	}
	for _, bd := range b.authz.Describe(f) { // sorted by pattern, so one resource's bindings are adjacent
		n := len(resp.Resources)
		if n == 0 || resp.Resources[n-1].ResourceType != bd.ResourceType || resp.Resources[n-1].ResourceName != bd.ResourceName ||
			resp.Resources[n-1].ResourcePatternType != bd.PatternType {
			res := kmsg.NewDescribeACLsResponseResource()
			res.ResourceType, res.ResourceName, res.ResourcePatternType = bd.ResourceType, bd.ResourceName, bd.PatternType
			resp.Resources = append(resp.Resources, res)
			n++
		}
		a := kmsg.NewDescribeACLsResponseResourceACL()
		a.Principal, a.Host, a.Operation, a.PermissionType = bd.Principal, bd.Host, bd.Operation, bd.Permission
		resp.Resources[n-1].ACLs = append(resp.Resources[n-1].ACLs, a)
	}
	return now(resp)
}
