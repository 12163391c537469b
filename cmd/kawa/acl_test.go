package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kawa-broker/kawa/internal/acl"
	"github.com/kawa-broker/kawa/internal/kawatest"
)

// TestACLCommand: `kawa acl create|list|delete` against `kawa serve
// --authorizer-class-name ... --super-users User:admin` over SASL_SSL, with
// kafka-acls' flags, and what the ACLs it creates let a user do.
func TestACLCommand(t *testing.T) {
	dir, data := t.TempDir(), t.TempDir()
	mustRun(t, runUser, "", "set", "admin", "--password", "admin-pw", "--data-dir", data)
	mustRun(t, runUser, "", "set", "alice", "--password", "alice-pw", "--data-dir", data)
	ca := kawatest.NewCA(t, "cli CA")
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, ca.PEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	p := securedKawa(t, ca, dir, data, "--authorizer-class-name", acl.ClassName, "--super-users", "User:admin")
	props := func(user string) string {
		f := filepath.Join(dir, user+".properties")
		body := "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\nsasl.username=" + user + "\nsasl.password=" + user + "-pw\nssl.ca.location=" + caFile + "\n"
		if err := os.WriteFile(f, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	admin, alice := props("admin"), props("alice")
	as := func(cfg string, args ...string) []string {
		return append(args, "--brokers", p.Addr, "--command-config", cfg, "--timeout", "10s")
	}

	mustRun(t, runTopic, "", as(admin, "create", "orders", "--partitions", "1")...)
	mustRun(t, runTopic, "", as(admin, "create", "other", "--partitions", "1")...)
	if _, err := runCmd(t, runTopic, "", as(alice, "create", "mine", "--partitions", "1")...); err == nil || !strings.Contains(err.Error(), "TOPIC_AUTHORIZATION_FAILED") {
		t.Fatalf("alice creating a topic without ACLs: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	if _, err := runCmd(t, runACL, "", as(alice, "list")...); err == nil || !strings.Contains(err.Error(), "CLUSTER_AUTHORIZATION_FAILED") {
		t.Fatalf("alice listing ACLs: %v, want CLUSTER_AUTHORIZATION_FAILED", err)
	}

	out := mustRun(t, runACL, "", as(admin, "create", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "orders", "--group", "g")...)
	if n := strings.Count(out, "User:alice"); n != 2 {
		t.Fatalf("create printed %d bindings, want 2:\n%s", n, out)
	}
	mustRun(t, runACL, "", as(admin, "create", "--allow-principal", "User:alice", "--operation", "Write", "--topic", "ord", "--resource-pattern-type", "prefixed")...)
	mustRun(t, runACL, "", as(admin, "create", "--deny-principal", "User:alice", "--host", "10.9.9.9", "--operation", "All", "--transactional-id", "tx")...)
	if _, err := runCmd(t, runACL, "", as(admin, "create", "--allow-principal", "User:alice", "--operation", "Read")...); err == nil {
		t.Fatal("create without a resource succeeded")
	}
	if _, err := runCmd(t, runACL, "", as(admin, "create", "--allow-principal", "User:alice", "--operation", "Reed", "--topic", "x")...); err == nil || !strings.Contains(err.Error(), "Reed") {
		t.Fatalf("create with operation Reed: %v, want an error naming it", err)
	}

	list := mustRun(t, runACL, "", as(admin, "list")...)
	for _, want := range []string{
		"TOPIC LITERAL orders User:alice * READ ALLOW",
		"TOPIC PREFIXED ord User:alice * WRITE ALLOW",
		"GROUP LITERAL g User:alice * READ ALLOW",
		"TRANSACTIONAL_ID LITERAL tx User:alice 10.9.9.9 ALL DENY",
	} {
		if !hasRow(list, want) {
			t.Errorf("acl list lacks %q:\n%s", want, list)
		}
	}
	if n := strings.Count(list, "User:alice"); n != 4 {
		t.Errorf("acl list shows %d bindings, want 4:\n%s", n, list)
	}
	match := mustRun(t, runACL, "", as(admin, "list", "--topic", "orders", "--resource-pattern-type", "match")...)
	if strings.Count(match, "User:alice") != 2 || !strings.Contains(match, "PREFIXED") {
		t.Errorf("acl list --topic orders --resource-pattern-type match: want the literal and the prefixed binding:\n%s", match)
	}
	if lit := mustRun(t, runACL, "", as(admin, "list", "--topic", "orders", "--resource-pattern-type", "literal")...); strings.Count(lit, "User:alice") != 1 {
		t.Errorf("acl list --topic orders --resource-pattern-type literal:\n%s", lit)
	}
	if txn := mustRun(t, runACL, "", as(admin, "list", "--transactional-id", "tx", "--principal", "User:alice")...); strings.Count(txn, "DENY") != 1 {
		t.Errorf("acl list --transactional-id tx --principal User:alice:\n%s", txn)
	}

	// What alice may do now: produce to and consume orders (WRITE through the
	// prefix; the idempotent producer is allowed by that WRITE on a topic),
	// not produce to other.
	mustRun(t, runProduce, "a\nb\n", as(alice, "--topic", "orders")...)
	if got := mustRun(t, runConsume, "", as(alice, "--topic", "orders", "--from-beginning", "--max-messages", "2")...); got != "a\nb\n" {
		t.Fatalf("alice consumed %q", got)
	}
	if _, err := runCmd(t, runProduce, "x\n", as(alice, "--topic", "other")...); err == nil || !strings.Contains(err.Error(), "TOPIC_AUTHORIZATION_FAILED") {
		t.Fatalf("alice producing to other: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}

	del := mustRun(t, runACL, "", as(admin, "delete", "--principal", "User:alice", "--topic", "ord", "--resource-pattern-type", "prefixed")...)
	if strings.Count(del, "User:alice") != 1 || !strings.Contains(del, "PREFIXED") {
		t.Fatalf("acl delete of the prefixed binding printed:\n%s", del)
	}
	if _, err := runCmd(t, runProduce, "c\n", as(alice, "--topic", "orders")...); err == nil {
		t.Fatal("alice produced to orders after her WRITE was deleted")
	}
	if n := strings.Count(mustRun(t, runACL, "", as(admin, "list")...), "User:alice"); n != 3 {
		t.Fatalf("after delete: %d bindings, want 3", n)
	}
}
