package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/auth"
	"github.com/kawa-broker/kawa/internal/wire"
)

// DescribeUserScramCredentials (key 50), versions 0-0 (KIP-554).
//
// Behaviour: for each user asked for (a null list means every user with a
// credential), the mechanisms and iteration counts of its credentials, never
// salts or keys. A user asked for twice is DUPLICATE_RESOURCE, one without a
// credential RESOURCE_NOT_FOUND, each with Kafka's message. With an
// authorizer, DESCRIBE on the cluster is needed, else
// CLUSTER_AUTHORIZATION_FAILED for the whole request.
func (b *Broker) handleDescribeUserScramCredentials(ctx context.Context, info wire.RequestInfo, req kmsg.Request) reply {
	r := req.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := r.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	if !b.authorizedCluster(info, kmsg.ACLOperationDescribe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		resp.ErrorMessage = kmsg.StringPtr("Cluster authorization failed.")
		return now(resp)
	}
	users := b.creds.Users()
	result := func(name string) kmsg.DescribeUserSCRAMCredentialsResponseResult {
		res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		res.User = name
		for _, c := range users[name] {
			ci := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
			ci.Mechanism = scramMechanismCode(c.Mechanism)
			ci.Iterations = int32(c.Iterations)
			res.CredentialInfos = append(res.CredentialInfos, ci)
		}
		return res
	}
	if r.Users == nil {
		for name := range users {
			resp.Results = append(resp.Results, result(name))
		}
		return now(resp)
	}
	seen := map[string]int{}
	for _, u := range r.Users {
		seen[u.Name]++
	}
	for _, u := range r.Users {
		res := result(u.Name)
		switch {
		case seen[u.Name] > 1:
			res.CredentialInfos = nil
			res.ErrorCode = kerr.DuplicateResource.Code
			res.ErrorMessage = kmsg.StringPtr("Cannot describe SCRAM credentials for the same user twice in a single request: " + u.Name)
		case len(res.CredentialInfos) == 0:
			res.ErrorCode = kerr.ResourceNotFound.Code
			res.ErrorMessage = kmsg.StringPtr("Attempt to describe a user credential that does not exist: " + u.Name)
		}
		resp.Results = append(resp.Results, res)
	}
	return now(resp)
}

// scramMechanismCode is KIP-554's mechanism number: 1 SCRAM-SHA-256,
// 2 SCRAM-SHA-512, 0 unknown.
func scramMechanismCode(name string) int8 {
	switch name {
	case auth.ScramSHA256:
		return 1
	case auth.ScramSHA512:
		return 2
	}
	return 0
}

// scramMechanismName is the inverse of scramMechanismCode ("" if unknown).
func scramMechanismName(code int8) string {
	switch code {
	case 1:
		return auth.ScramSHA256
	case 2:
		return auth.ScramSHA512
	}
	return ""
}
