package broker_test

import (
	"context"
	"crypto/tls"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kawa-broker/kawa/internal/server"
)

// TestUserScramCredentials (KIP-554): a credential created through kadm logs
// in, survives a restart, is described by mechanism and iterations only, and
// bad alterations get Kafka's codes, leaving other users' changes applied.
func TestUserScramCredentials(t *testing.T) {
	s := startSecure(t, server.SASLSSL, tls.NoClientCert)
	admin := scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism()
	s.b.ClientOpts = []kgo.Opt{s.tlsOpt(), kgo.SASL(admin)}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	adm := s.b.Admin()

	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "bob", Mechanism: kadm.ScramSha256, Iterations: 8192, Password: "bob-pw"}})
	if err != nil || res.AllFailed() || res["bob"].Err != nil {
		t.Fatalf("upsert bob: %v %+v", err, res)
	}
	bobLogin := func(pass string) error {
		return loginErr(t, s.b, s.tlsOpt(), kgo.SASL(scram.Auth{User: "bob", Pass: pass}.AsSha256Mechanism()))
	}
	if err := bobLogin("bob-pw"); err != nil {
		t.Fatalf("bob's login: %v", err)
	}
	if err := bobLogin("nope"); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("bob's wrong password: %v", err)
	}

	s.b = s.b.Restart()
	adm = s.b.Admin()
	if err := bobLogin("bob-pw"); err != nil {
		t.Fatalf("bob's login after restart: %v", err)
	}
	d, err := adm.DescribeUserSCRAMs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := d["bob"].CredInfos; len(got) != 1 || got[0].Mechanism != kadm.ScramSha256 || got[0].Iterations != 8192 {
		t.Fatalf("describe bob = %+v", d["bob"])
	}
	if len(d["alice"].CredInfos) != 2 {
		t.Fatalf("describe alice = %+v", d["alice"])
	}

	// Raw requests, to send what kadm would refuse to build.
	cl := s.b.Client()
	alter := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	up := func(name string, mech int8, iters int32) kmsg.AlterUserSCRAMCredentialsRequestUpsertion {
		u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
		u.Name, u.Mechanism, u.Iterations, u.Salt, u.SaltedPassword = name, mech, iters, []byte("salt"), make([]byte, 64)
		return u
	}
	del := func(name string, mech int8) kmsg.AlterUserSCRAMCredentialsRequestDeletion {
		d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
		d.Name, d.Mechanism = name, mech
		return d
	}
	alter.Upsertions = []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{
		up("low", 2, 4095), up("high", 2, 16385), up("", 2, 4096), up("md5", 3, 4096),
		up("twice", 2, 4096), up("twice", 2, 5000), up("carol", 2, 4096),
	}
	alter.Deletions = []kmsg.AlterUserSCRAMCredentialsRequestDeletion{del("ghost", 1), del("bob", 1)}
	r, err := alter.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]*kerr.Error{
		"low": kerr.UnacceptableCredential, "high": kerr.UnacceptableCredential, "": kerr.UnacceptableCredential,
		"md5": kerr.UnsupportedSaslMechanism, "twice": kerr.DuplicateResource, "ghost": kerr.ResourceNotFound,
		"carol": nil, "bob": nil,
	}
	if len(r.Results) != len(want) {
		t.Fatalf("%d results, want %d: %+v", len(r.Results), len(want), r.Results)
	}
	for _, res := range r.Results {
		w, ok := want[res.User]
		if !ok || kerr.ErrorForCode(res.ErrorCode) != errorOrNil(w) {
			t.Errorf("user %q: error %v, want %v", res.User, kerr.ErrorForCode(res.ErrorCode), w)
		}
	}
	d, err = adm.DescribeUserSCRAMs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := d["bob"]; ok {
		t.Fatalf("bob's only credential was deleted, yet described: %+v", d["bob"])
	}
	for _, u := range []string{"low", "high", "md5", "twice", "ghost"} {
		if _, ok := d[u]; ok {
			t.Errorf("failed alteration of %q was applied", u)
		}
	}
	if got := d["carol"].CredInfos; len(got) != 1 || got[0].Iterations != 4096 {
		t.Fatalf("carol = %+v", d["carol"])
	}

	desc := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
	for _, n := range []string{"carol", "ghost", "alice", "alice"} {
		u := kmsg.NewDescribeUserSCRAMCredentialsRequestUser()
		u.Name = n
		desc.Users = append(desc.Users, u)
	}
	dr, err := desc.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	codes := map[string]int16{}
	for _, res := range dr.Results {
		codes[res.User] = res.ErrorCode
	}
	if codes["carol"] != 0 || codes["ghost"] != kerr.ResourceNotFound.Code || codes["alice"] != kerr.DuplicateResource.Code {
		t.Fatalf("describe codes = %v", codes)
	}
}

// errorOrNil turns a nil *kerr.Error into a nil error, as kerr.ErrorForCode(0) is.
func errorOrNil(e *kerr.Error) error {
	if e == nil {
		return nil
	}
	return e
}
