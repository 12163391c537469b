package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/kawa-broker/kawa/internal/acl"
	"github.com/kawa-broker/kawa/internal/auth"
	"github.com/kawa-broker/kawa/internal/config"
	"github.com/kawa-broker/kawa/internal/kawatest"
	"github.com/kawa-broker/kawa/internal/server"
)

// authzBroker is a broker with the authorizer on behind a SASL_PLAINTEXT
// listener; User:admin is a super user. Users admin, alice, bob and carol
// log in with PLAIN and the password "<name>-pw".
type authzBroker struct {
	t *testing.T
	b *kawatest.Broker
}

// withAuthorizer switches the authorizer on with super users su.
func withAuthorizer(su ...string) kawatest.Option {
	return func(c *config.Broker) {
		c.AuthorizerClassName = acl.ClassName
		c.SuperUsers = su
	}
}

func startAuthz(t *testing.T, opts ...kawatest.Option) authzBroker {
	t.Helper()
	b := kawatest.NewSecureBroker(t, server.Listener{Protocol: server.SASLPlaintext}, append([]kawatest.Option{withAuthorizer("User:admin")}, opts...)...)
	for _, u := range []string{"admin", "alice", "bob", "carol"} {
		if err := b.B.Credentials().SetPassword(u, auth.ScramSHA256, u+"-pw", auth.MinIterations); err != nil {
			t.Fatal(err)
		}
	}
	return authzBroker{t: t, b: b}
}

// client is a kgo client logged in as user.
func (a authzBroker) client(user string, opts ...kgo.Opt) *kgo.Client {
	a.t.Helper()
	return a.b.Client(append([]kgo.Opt{kgo.SASL(plain.Auth{User: user, Pass: user + "-pw"}.AsMechanism())}, opts...)...)
}

func (a authzBroker) admin(user string) *kadm.Client { return kadm.NewClient(a.client(user)) }

// grant creates the bindings of each builder as admin and fails the test on
// any error.
func (a authzBroker) grant(bs ...*kadm.ACLBuilder) {
	a.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	adm := a.admin("admin")
	for _, b := range bs {
		rs, err := adm.CreateACLs(ctx, b)
		if err != nil {
			a.t.Fatalf("CreateACLs: %v", err)
		}
		for _, r := range rs {
			if r.Err != nil {
				a.t.Fatalf("CreateACLs %s %s %s: %v (%s)", r.Type, r.Name, r.Operation, r.Err, r.ErrMessage)
			}
		}
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
