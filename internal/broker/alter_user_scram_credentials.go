package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/auth"
	"github.com/kawa-broker/kawa/internal/wire"
)

// AlterUserScramCredentials (key 51), versions 0-0 (KIP-554).
//
// Behaviour: deletions and upsertions, one result per user. An upsertion
// carries the client-computed salted password; only the salt, iterations,
// StoredKey and ServerKey derived from it are kept, durably (the response is
// sent after the fsync). Kafka's codes: an empty name or iterations outside
// 4096-16384 UNACCEPTABLE_CREDENTIAL, a mechanism other than 1/2
// UNSUPPORTED_SASL_MECHANISM, the same user and mechanism twice in the
// request DUPLICATE_RESOURCE, deleting a missing credential
// RESOURCE_NOT_FOUND. A user with any error has none of its alterations
// applied; the other users' are. With an authorizer, ALTER on the cluster is
// needed, else every user's result is CLUSTER_AUTHORIZATION_FAILED.
func (b *Broker) handleAlterUserScramCredentials(ctx context.Context, info wire.RequestInfo, req kmsg.Request) reply {
	r := req.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := r.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	if !b.authorizedCluster(info, kmsg.ACLOperationAlter) {
		seen := map[string]bool{}
		for _, name := range append(scramDeletionNames(r), scramUpsertionNames(r)...) {
			if !seen[name] {
				seen[name] = true
				res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
				res.User, res.ErrorCode = name, kerr.ClusterAuthorizationFailed.Code
				resp.Results = append(resp.Results, res)
			}
		}
		return now(resp)
	}
	type userState struct {
		code    int16
		msg     string
		changes []auth.Change
	}
	var order []string
	users := map[string]*userState{}
	pairs := map[[2]string]int{}
	state := func(name string) *userState {
		if users[name] == nil {
			users[name] = &userState{}
			order = append(order, name)
		}
		return users[name]
	}
	fail := func(st *userState, code int16, msg string) {
		if st.code == 0 {
			st.code, st.msg = code, msg
		}
	}
	for _, d := range r.Deletions {
		st := state(d.Name)
		mech := scramMechanismName(d.Mechanism)
		pairs[[2]string{d.Name, mech}]++
		switch {
		case d.Name == "":
			fail(st, kerr.UnacceptableCredential.Code, "Username must not be empty")
		case mech == "":
			fail(st, kerr.UnsupportedSaslMechanism.Code, "Unknown SCRAM mechanism")
		default:
			if _, ok := b.creds.Lookup(d.Name, mech); !ok {
				fail(st, kerr.ResourceNotFound.Code, "Attempt to delete a user credential that does not exist")
			}
			st.changes = append(st.changes, auth.Change{User: d.Name, Mechanism: mech, Delete: true})
		}
	}
	for _, u := range r.Upsertions {
		st := state(u.Name)
		mech := scramMechanismName(u.Mechanism)
		pairs[[2]string{u.Name, mech}]++
		switch {
		case u.Name == "":
			fail(st, kerr.UnacceptableCredential.Code, "Username must not be empty")
		case mech == "":
			fail(st, kerr.UnsupportedSaslMechanism.Code, "Unknown SCRAM mechanism")
		default:
			c, err := auth.CredentialFromSalted(mech, int(u.Iterations), u.Salt, u.SaltedPassword)
			switch {
			case err != nil: // auth.ErrIterations: outside 4096-16384
				fail(st, kerr.UnacceptableCredential.Code, err.Error())
			case len(u.Salt) == 0 || len(u.SaltedPassword) == 0:
				fail(st, kerr.UnacceptableCredential.Code, "salt and salted password must not be empty")
			}
			st.changes = append(st.changes, auth.Change{User: u.Name, Mechanism: mech, Credential: c})
		}
	}
	for pair, n := range pairs {
		if n > 1 {
			fail(users[pair[0]], kerr.DuplicateResource.Code, "A user credential cannot be altered twice in the same request")
		}
	}
	var changes []auth.Change
	for _, name := range order {
		if st := users[name]; st.code == 0 {
			changes = append(changes, st.changes...)
		}
	}
	var storeErr error
	if len(changes) > 0 {
		storeErr = b.creds.Apply(changes)
	}
	for _, name := range order {
		st := users[name]
		res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		res.User = name
		switch {
		case st.code != 0:
			res.ErrorCode = st.code
			res.ErrorMessage = kmsg.StringPtr(st.msg)
		case storeErr != nil:
			b.lg.Error("storing SCRAM credentials failed", "err", storeErr)
			res.ErrorCode = kerr.KafkaStorageError.Code
			res.ErrorMessage = kmsg.StringPtr(storeErr.Error())
		}
		resp.Results = append(resp.Results, res)
	}
	return now(resp)
}

func scramDeletionNames(r *kmsg.AlterUserSCRAMCredentialsRequest) []string {
	out := make([]string, 0, len(r.Deletions))
	for _, d := range r.Deletions {
		out = append(out, d.Name)
	}
	return out
}

func scramUpsertionNames(r *kmsg.AlterUserSCRAMCredentialsRequest) []string {
	out := make([]string, 0, len(r.Upsertions))
	for _, u := range r.Upsertions {
		out = append(out, u.Name)
	}
	return out
}
