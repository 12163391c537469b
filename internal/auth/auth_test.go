package auth_test

import (
	"bytes"
	"errors"
	"testing"

	xscram "github.com/xdg-go/scram"

	"github.com/kawa-broker/kawa/internal/auth"
	"github.com/kawa-broker/kawa/internal/vfs"
)

// TestStoreDurable: credentials survive reopening, only keys are kept, and
// a client-salted upsertion (KIP-554) derives the same keys as the password.
func TestStoreDurable(t *testing.T) {
	dir := t.TempDir()
	s, err := auth.OpenStore(vfs.OS, dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetPassword("alice", auth.ScramSHA512, "secret", auth.MinIterations); err != nil {
		t.Fatal(err)
	}
	if err := s.SetPassword("alice", auth.ScramSHA256, "secret", auth.MinIterations); err != nil {
		t.Fatal(err)
	}
	s2, err := auth.OpenStore(vfs.OS, dir)
	if err != nil {
		t.Fatal(err)
	}
	if !s2.CheckPassword("alice", "secret") || s2.CheckPassword("alice", "wrong") || s2.CheckPassword("bob", "secret") {
		t.Fatal("CheckPassword after reopen disagrees with the password set")
	}
	b, err := vfs.ReadFile(vfs.OS, dir+"/"+auth.CredentialsFile)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte("secret")) {
		t.Fatal("the credentials file holds the password")
	}
	got := s2.Users()["alice"]
	if len(got) != 2 || got[0] != (auth.Info{Mechanism: auth.ScramSHA256, Iterations: 4096}) || got[1] != (auth.Info{Mechanism: auth.ScramSHA512, Iterations: 4096}) {
		t.Fatalf("Users()[alice] = %v", got)
	}

	c, _ := s2.Lookup("alice", auth.ScramSHA512)
	cl, _ := xscram.SHA512.NewClient("alice", "secret", "")
	want, err := cl.GetStoredCredentialsWithError(xscram.KeyFactors{Salt: string(c.Salt), Iters: c.Iterations})
	if err != nil {
		t.Fatal(err)
	}
	salted := saltedPassword(t, "secret", c.Salt, c.Iterations)
	fromSalted, err := auth.CredentialFromSalted(auth.ScramSHA512, c.Iterations, c.Salt, salted)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(fromSalted.StoredKey, want.StoredKey) || !bytes.Equal(fromSalted.ServerKey, want.ServerKey) {
		t.Fatal("CredentialFromSalted derives other keys than the password")
	}
	if _, err := auth.NewCredential(auth.ScramSHA512, "x", 4095); !errors.Is(err, auth.ErrIterations) {
		t.Fatalf("4095 iterations: err %v, want ErrIterations", err)
	}
	if _, err := auth.NewCredential("SCRAM-SHA-1", "x", 4096); !errors.Is(err, auth.ErrUnknownMechanism) {
		t.Fatalf("SCRAM-SHA-1: err %v, want ErrUnknownMechanism", err)
	}
	if err := s2.Delete("bob", auth.ScramSHA512); !errors.Is(err, auth.ErrNoCredential) {
		t.Fatalf("delete missing: %v", err)
	}
}

func TestParsePlain(t *testing.T) {
	for _, tc := range []struct {
		in         string
		user, pass string
		ok         bool
	}{
		{"\x00alice\x00pw", "alice", "pw", true},
		{"alice\x00alice\x00pw", "alice", "pw", true},
		{"bob\x00alice\x00pw", "", "", false},
		{"alice\x00pw", "", "", false},
		{"\x00\x00pw", "", "", false},
		{"\x00alice\x00", "", "", false},
		{"\x00a\x00b\x00c", "", "", false},
	} {
		u, p, err := auth.ParsePlain([]byte(tc.in))
		if (err == nil) != tc.ok || u != tc.user || p != tc.pass {
			t.Errorf("ParsePlain(%q) = %q, %q, %v", tc.in, u, p, err)
		}
	}
}
