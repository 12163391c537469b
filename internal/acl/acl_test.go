package acl

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/vfs"
)

const (
	topic   = kmsg.ACLResourceTypeTopic
	group   = kmsg.ACLResourceTypeGroup
	cluster = kmsg.ACLResourceTypeCluster
	txnID   = kmsg.ACLResourceTypeTransactionalId

	literal  = kmsg.ACLResourcePatternTypeLiteral
	prefixed = kmsg.ACLResourcePatternTypePrefixed

	allow = kmsg.ACLPermissionTypeAllow
	deny  = kmsg.ACLPermissionTypeDeny

	opAll       = kmsg.ACLOperationAll
	read        = kmsg.ACLOperationRead
	write       = kmsg.ACLOperationWrite
	create      = kmsg.ACLOperationCreate
	del         = kmsg.ACLOperationDelete
	alter       = kmsg.ACLOperationAlter
	describe    = kmsg.ACLOperationDescribe
	descConfigs = kmsg.ACLOperationDescribeConfigs
	altConfigs  = kmsg.ACLOperationAlterConfigs
	idemWrite   = kmsg.ACLOperationIdempotentWrite
	clusterAct  = kmsg.ACLOperationClusterAction
)

func bind(rt kmsg.ACLResourceType, name string, pt kmsg.ACLResourcePatternType, principal, host string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) Binding {
	return Binding{ResourceType: rt, ResourceName: name, PatternType: pt, Principal: principal, Host: host, Operation: op, Permission: perm}
}

type check struct {
	principal, host string
	op              kmsg.ACLOperation
	rt              kmsg.ACLResourceType
	name            string
	want            bool
}

// TestAuthorize follows the cases of Kafka's StandardAuthorizerTest and
// AuthorizerTest (DENY over ALLOW, wildcards, prefixes, implied operations,
// super users, allow.everyone.if.no.acl.found), rewritten as a table.
func TestAuthorize(t *testing.T) {
	const alice, bob = "User:alice", "User:bob"
	const h1, h2 = "192.168.1.1", "192.168.1.2"
	cases := []struct {
		name   string
		opts   Options
		acls   []Binding
		checks []check
	}{
		{
			name: "no acls: denied unless allow.everyone.if.no.acl.found",
			checks: []check{
				{alice, h1, read, topic, "orders", false},
				{alice, h1, describe, cluster, ClusterName, false},
			},
		},
		{
			name: "no acl on the resource: allow.everyone allows, an acl for anyone else denies",
			opts: Options{AllowEveryoneIfNoACLFound: true},
			acls: []Binding{bind(topic, "orders", literal, bob, "*", read, allow)},
			checks: []check{
				{alice, h1, read, topic, "payments", true},
				{alice, h1, read, topic, "orders", false}, // the resource has an acl: the default no longer applies
				{bob, h1, read, topic, "orders", true},
			},
		},
		{
			name: "literal allow covers only its name, operation and principal",
			acls: []Binding{bind(topic, "orders", literal, alice, "*", read, allow)},
			checks: []check{
				{alice, h1, read, topic, "orders", true},
				{alice, h1, read, topic, "orders2", false},
				{alice, h1, write, topic, "orders", false},
				{bob, h1, read, topic, "orders", false},
				{alice, h1, read, group, "orders", false}, // another resource type
			},
		},
		{
			name: "deny wins over allow, whatever the pattern",
			acls: []Binding{
				bind(topic, "*", literal, alice, "*", opAll, allow),
				bind(topic, "secret", literal, alice, "*", read, deny),
				bind(topic, "pay", prefixed, alice, "*", write, deny),
			},
			checks: []check{
				{alice, h1, read, topic, "orders", true},
				{alice, h1, read, topic, "secret", false},
				{alice, h1, write, topic, "secret", true},    // the deny names READ only
				{alice, h1, describe, topic, "secret", true}, // a DENY READ does not deny the DESCRIBE it would imply
				{alice, h1, write, topic, "payments", false},
				{alice, h1, read, topic, "payments", true},
				{alice, h1, write, topic, "pa", true}, // shorter than the prefix
			},
		},
		{
			name: "deny ALL denies every operation",
			acls: []Binding{
				bind(topic, "orders", literal, alice, "*", read, allow),
				bind(topic, "orders", literal, "User:*", "*", opAll, deny),
			},
			checks: []check{
				{alice, h1, read, topic, "orders", false},
				{alice, h1, describe, topic, "orders", false},
			},
		},
		{
			name: "wildcard principal and host; exact host",
			acls: []Binding{
				bind(topic, "orders", literal, "User:*", h1, read, allow),
				bind(topic, "audit", literal, alice, "*", write, allow),
				bind(topic, "audit", literal, "User:*", h2, write, deny),
			},
			checks: []check{
				{alice, h1, read, topic, "orders", true},
				{bob, h1, read, topic, "orders", true},
				{bob, h2, read, topic, "orders", false},
				{alice, h1, write, topic, "audit", true},
				{alice, h2, write, topic, "audit", false},
			},
		},
		{
			name: "prefixed allow; nested prefixes; literal wildcard",
			acls: []Binding{
				bind(topic, "app.", prefixed, alice, "*", read, allow),
				bind(topic, "app.private.", prefixed, alice, "*", read, deny),
				bind(group, "*", literal, alice, "*", read, allow),
			},
			checks: []check{
				{alice, h1, read, topic, "app.orders", true},
				{alice, h1, read, topic, "app.", true},
				{alice, h1, read, topic, "app", false},
				{alice, h1, read, topic, "app.private.keys", false},
				{alice, h1, read, group, "anything", true},
				{bob, h1, read, group, "anything", false},
			},
		},
		{
			name: "a * name is not a prefix pattern: PREFIXED * matches only names starting with *",
			acls: []Binding{bind(topic, "*", prefixed, alice, "*", read, allow)},
			checks: []check{
				{alice, h1, read, topic, "orders", false},
				{alice, h1, read, topic, "*x", true},
			},
		},
		{
			name: "implied operations: READ/WRITE/DELETE/ALTER imply DESCRIBE, ALTER_CONFIGS implies DESCRIBE_CONFIGS",
			acls: []Binding{
				bind(topic, "r", literal, alice, "*", read, allow),
				bind(topic, "w", literal, alice, "*", write, allow),
				bind(topic, "d", literal, alice, "*", del, allow),
				bind(topic, "a", literal, alice, "*", alter, allow),
				bind(topic, "c", literal, alice, "*", create, allow),
				bind(topic, "ac", literal, alice, "*", altConfigs, allow),
				bind(topic, "dc", literal, alice, "*", descConfigs, allow),
			},
			checks: []check{
				{alice, h1, describe, topic, "r", true},
				{alice, h1, describe, topic, "w", true},
				{alice, h1, describe, topic, "d", true},
				{alice, h1, describe, topic, "a", true},
				{alice, h1, describe, topic, "c", false}, // CREATE implies nothing
				{alice, h1, descConfigs, topic, "ac", true},
				{alice, h1, describe, topic, "ac", false},
				{alice, h1, altConfigs, topic, "dc", false},
				{alice, h1, read, topic, "w", false}, // WRITE does not imply READ
			},
		},
		{
			name: "super users bypass DENY",
			opts: Options{SuperUsers: []string{"User:admin"}},
			acls: []Binding{bind(topic, "*", literal, "User:*", "*", opAll, deny)},
			checks: []check{
				{"User:admin", h1, write, topic, "orders", true},
				{"User:admin", h1, alter, cluster, ClusterName, true},
				{alice, h1, write, topic, "orders", false},
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := NewMem(c.opts)
			if err := a.Create(c.acls); err != nil {
				t.Fatal(err)
			}
			for _, ch := range c.checks {
				if got := a.Authorize(ch.principal, ch.host, ch.op, ch.rt, ch.name); got != ch.want {
					t.Errorf("Authorize(%s from %s, %s %s %q) = %v, want %v", ch.principal, ch.host, ch.op, ch.rt, ch.name, got, ch.want)
				}
			}
		})
	}
}

// TestAuthorizeByResourceType follows Kafka's AuthorizerTest
// testAuthorizeByResourceType* cases: the question "may this principal
// WRITE some topic", which InitProducerId asks for idempotent producers.
func TestAuthorizeByResourceType(t *testing.T) {
	const alice = "User:alice"
	const h = "10.0.0.1"
	cases := []struct {
		name string
		opts Options
		acls []Binding
		want bool
	}{
		{"nothing", Options{}, nil, false},
		{"allow.everyone with no acls", Options{AllowEveryoneIfNoACLFound: true}, nil, true},
		{"super user", Options{SuperUsers: []string{alice}}, []Binding{bind(topic, "*", literal, alice, "*", write, deny)}, true},
		{"literal allow", Options{}, []Binding{bind(topic, "t", literal, alice, "*", write, allow)}, true},
		{"allow ALL", Options{}, []Binding{bind(topic, "t", literal, alice, "*", opAll, allow)}, true},
		{"implied operations do not count", Options{}, []Binding{bind(topic, "t", literal, alice, "*", opAll, deny), bind(topic, "u", literal, alice, "*", read, allow)}, false},
		{"other principal", Options{}, []Binding{bind(topic, "t", literal, "User:bob", "*", write, allow)}, false},
		{"other host", Options{}, []Binding{bind(topic, "t", literal, alice, "10.0.0.2", write, allow)}, false},
		{"wildcard principal", Options{}, []Binding{bind(topic, "t", literal, "User:*", "*", write, allow)}, true},
		{"literal allow blocked by the same literal deny", Options{}, []Binding{
			bind(topic, "t", literal, alice, "*", write, allow), bind(topic, "t", literal, alice, "*", write, deny)}, false},
		{"literal allow blocked by a deny with ALL", Options{}, []Binding{
			bind(topic, "t", literal, alice, "*", write, allow), bind(topic, "t", literal, "User:*", "*", opAll, deny)}, false},
		{"literal allow blocked by a prefixed deny", Options{}, []Binding{
			bind(topic, "topic1", literal, alice, "*", write, allow), bind(topic, "top", prefixed, alice, "*", write, deny)}, false},
		{"prefixed allow blocked by a shorter prefixed deny", Options{}, []Binding{
			bind(topic, "topic", prefixed, alice, "*", write, allow), bind(topic, "to", prefixed, alice, "*", write, deny)}, false},
		{"prefixed allow not blocked by a longer prefixed deny", Options{}, []Binding{
			bind(topic, "to", prefixed, alice, "*", write, allow), bind(topic, "topic", prefixed, alice, "*", write, deny)}, true},
		{"prefixed allow not blocked by a literal deny", Options{}, []Binding{
			bind(topic, "to", prefixed, alice, "*", write, allow), bind(topic, "to", literal, alice, "*", write, deny)}, true},
		{"one allow survives among blocked ones", Options{}, []Binding{
			bind(topic, "a", literal, alice, "*", write, allow), bind(topic, "a", literal, alice, "*", write, deny),
			bind(topic, "b", literal, alice, "*", write, allow)}, true},
		{"literal deny on * denies everything", Options{}, []Binding{
			bind(topic, "*", literal, alice, "*", write, allow), bind(topic, "*", literal, alice, "*", write, deny)}, false},
		{"wildcard allow", Options{}, []Binding{bind(topic, "*", literal, alice, "*", write, allow)}, true},
		{"prefixed deny on \"\" cannot exist, a 1-char prefix blocks all under it", Options{}, []Binding{
			bind(topic, "x1", literal, alice, "*", write, allow), bind(topic, "x", prefixed, "User:*", "*", write, deny)}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := NewMem(c.opts)
			if err := a.Create(c.acls); err != nil {
				t.Fatal(err)
			}
			if got := a.AuthorizeByResourceType(alice, h, write, topic); got != c.want {
				t.Errorf("AuthorizeByResourceType = %v, want %v (acls %v)", got, c.want, c.acls)
			}
		})
	}
}

func strp(s string) *string { return &s }

// TestFilters checks Describe and Delete filters: ANY, MATCH, LITERAL and
// PREFIXED pattern filters, and the entry fields.
func TestFilters(t *testing.T) {
	all := []Binding{
		bind(topic, "orders", literal, "User:alice", "*", read, allow),       // 0
		bind(topic, "*", literal, "User:bob", "*", write, allow),             // 1
		bind(topic, "ord", prefixed, "User:alice", "10.0.0.1", write, deny),  // 2
		bind(topic, "orders", prefixed, "User:carol", "*", read, allow),      // 3
		bind(group, "orders", literal, "User:alice", "*", read, allow),       // 4
		bind(txnID, "tx", literal, "User:alice", "*", write, allow),          // 5
		bind(cluster, ClusterName, literal, "User:admin", "*", alter, allow), // 6
	}
	anyF := Filter{ResourceType: kmsg.ACLResourceTypeAny, PatternType: kmsg.ACLResourcePatternTypeAny, Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}
	with := func(mod func(*Filter)) Filter { f := anyF; mod(&f); return f }
	cases := []struct {
		name string
		f    Filter
		want []int
	}{
		{"any", anyF, []int{0, 1, 2, 3, 4, 5, 6}},
		{"topic", with(func(f *Filter) { f.ResourceType = topic }), []int{0, 1, 2, 3}},
		{"transactional id", with(func(f *Filter) { f.ResourceType = txnID }), []int{5}},
		{"ANY pattern with a name: exact name, either type", with(func(f *Filter) { f.ResourceName = strp("orders") }), []int{0, 3, 4}},
		{"LITERAL with a name", with(func(f *Filter) { f.ResourceName = strp("orders"); f.PatternType = literal }), []int{0, 4}},
		{"PREFIXED without a name", with(func(f *Filter) { f.PatternType = prefixed }), []int{2, 3}},
		{"MATCH: what applies to topic orders", with(func(f *Filter) {
			f.ResourceType, f.ResourceName, f.PatternType = topic, strp("orders"), kmsg.ACLResourcePatternTypeMatch
		}), []int{0, 1, 2, 3}},
		{"MATCH: what applies to topic ordx", with(func(f *Filter) {
			f.ResourceType, f.ResourceName, f.PatternType = topic, strp("ordx"), kmsg.ACLResourcePatternTypeMatch
		}), []int{1, 2}},
		{"principal", with(func(f *Filter) { f.Principal = strp("User:alice") }), []int{0, 2, 4, 5}},
		{"host", with(func(f *Filter) { f.Host = strp("10.0.0.1") }), []int{2}},
		{"operation and permission", with(func(f *Filter) { f.Operation, f.Permission = write, allow }), []int{1, 5}},
		{"deny", with(func(f *Filter) { f.Permission = deny }), []int{2}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := NewMem(Options{})
			if err := a.Create(all); err != nil {
				t.Fatal(err)
			}
			want := map[Binding]bool{}
			for _, i := range c.want {
				want[all[i]] = true
			}
			got := a.Describe(c.f)
			if len(got) != len(want) {
				t.Fatalf("Describe = %v, want %d bindings %v", got, len(want), c.want)
			}
			for _, b := range got {
				if !want[b] {
					t.Fatalf("Describe returned %v, not in %v", b, c.want)
				}
			}
			deleted, err := a.Delete([]Filter{c.f})
			if err != nil || len(deleted[0]) != len(want) {
				t.Fatalf("Delete = %v, %v; want %d bindings", deleted, err, len(want))
			}
			if a.Len() != len(all)-len(want) || len(a.Describe(c.f)) != 0 {
				t.Fatalf("after Delete: %d bindings left, %d still matched", a.Len(), len(a.Describe(c.f)))
			}
		})
	}
}

func TestValidate(t *testing.T) {
	good := bind(topic, "orders", literal, "User:alice", "*", read, allow)
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	bad := map[string]func(*Binding){
		"resource type ANY":  func(b *Binding) { b.ResourceType = kmsg.ACLResourceTypeAny },
		"resource unknown":   func(b *Binding) { b.ResourceType = kmsg.ACLResourceTypeUnknown },
		"pattern MATCH":      func(b *Binding) { b.PatternType = kmsg.ACLResourcePatternTypeMatch },
		"pattern ANY":        func(b *Binding) { b.PatternType = kmsg.ACLResourcePatternTypeAny },
		"empty name":         func(b *Binding) { b.ResourceName = "" },
		"principal no type":  func(b *Binding) { b.Principal = "alice" },
		"principal no name":  func(b *Binding) { b.Principal = "User:" },
		"empty host":         func(b *Binding) { b.Host = "" },
		"operation ANY":      func(b *Binding) { b.Operation = kmsg.ACLOperationAny },
		"operation 99":       func(b *Binding) { b.Operation = 99 },
		"permission ANY":     func(b *Binding) { b.Permission = kmsg.ACLPermissionTypeAny },
		"permission unknown": func(b *Binding) { b.Permission = 0 },
	}
	for name, mod := range bad {
		b := good
		mod(&b)
		if err := b.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Validate = %v, want ErrInvalid", name, err)
		}
	}
	okFilter := Filter{ResourceType: kmsg.ACLResourceTypeAny, PatternType: kmsg.ACLResourcePatternTypeMatch, Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}
	if err := okFilter.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mod := range map[string]func(*Filter){
		"resource unknown":   func(f *Filter) { f.ResourceType = 0 },
		"pattern unknown":    func(f *Filter) { f.PatternType = 0 },
		"operation unknown":  func(f *Filter) { f.Operation = 0 },
		"permission unknown": func(f *Filter) { f.Permission = 0 },
		"resource 42":        func(f *Filter) { f.ResourceType = 42 },
	} {
		f := okFilter
		mod(&f)
		if err := f.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Validate = %v, want ErrInvalid", name, err)
		}
	}
}

// TestPersisted: bindings survive a reopen, and a power cut after Create
// returned (only synced data survives in the crash clone).
func TestPersisted(t *testing.T) {
	m := vfs.NewMem()
	dir := "/data"
	if err := vfs.MkdirAllDurable(m, dir); err != nil {
		t.Fatal(err)
	}
	a, err := Open(m, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	acls := []Binding{
		bind(topic, "orders", literal, "User:alice", "*", read, allow),
		bind(topic, "orders", literal, "User:alice", "*", read, allow), // duplicate: kept once
		bind(group, "g", prefixed, "User:alice", "10.1.1.1", opAll, deny),
	}
	if err := a.Create(acls); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Delete([]Filter{{ResourceType: group, PatternType: kmsg.ACLResourcePatternTypeAny, Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}}); err != nil {
		t.Fatal(err)
	}
	if err := a.Create([]Binding{bind(txnID, "tx", literal, "User:bob", "*", write, allow)}); err != nil {
		t.Fatal(err)
	}
	crashed := m.CrashClone()
	b, err := Open(crashed, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := b.Describe(Filter{ResourceType: kmsg.ACLResourceTypeAny, PatternType: kmsg.ACLResourcePatternTypeAny, Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny})
	want := []Binding{acls[0], bind(txnID, "tx", literal, "User:bob", "*", write, allow)}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after power cut: %v, want %v", got, want)
	}
	if !b.Authorize("User:bob", "1.2.3.4", write, txnID, "tx") {
		t.Fatal("reopened store does not authorize a stored binding")
	}
}

func TestOpenRefusesBadFile(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"not json":    "{",
		"bad version": `{"version": 7, "acls": []}`,
		"bad binding": `{"version": 1, "acls": [{"resource_type":"ANY","resource_name":"x","pattern_type":"LITERAL","principal":"User:a","host":"*","operation":"READ","permission":"ALLOW"}]}`,
		"bad enum":    `{"version": 1, "acls": [{"resource_type":"TOPICS","resource_name":"x","pattern_type":"LITERAL","principal":"User:a","host":"*","operation":"READ","permission":"ALLOW"}]}`,
	} {
		if err := os.WriteFile(filepath.Join(dir, File), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Open(vfs.OS, dir, Options{}); err == nil {
			t.Errorf("%s: Open succeeded", name)
		}
	}
}

func TestParseSuperUsers(t *testing.T) {
	got, err := ParseSuperUsers(" User:admin ; User:CN=broker,O=kawa;")
	if err != nil || fmt.Sprint(got) != "[User:admin User:CN=broker,O=kawa]" {
		t.Fatalf("ParseSuperUsers = %v, %v", got, err)
	}
	if _, err := ParseSuperUsers("admin"); err == nil {
		t.Fatal("ParseSuperUsers(admin) succeeded")
	}
}

// BenchmarkAuthorize10k measures one authorization among 10,000 bindings
// (issue 14's "authorizer cost per request"): 5,000 literal topic bindings
// for 1,000 principals, 2,500 prefixed ones, 2,500 group bindings; the
// principal asked about has a prefixed ALLOW and the topic a literal entry.
func BenchmarkAuthorize10k(b *testing.B) {
	a := NewMem(Options{})
	var acls []Binding
	for i := range 5000 {
		acls = append(acls, bind(topic, fmt.Sprintf("topic-%d", i), literal, fmt.Sprintf("User:u%d", i%1000), "*", read, allow))
	}
	for i := range 2500 {
		acls = append(acls, bind(topic, fmt.Sprintf("team-%d.", i), prefixed, fmt.Sprintf("User:u%d", i%1000), "*", write, allow))
		acls = append(acls, bind(group, fmt.Sprintf("group-%d", i), literal, fmt.Sprintf("User:u%d", i%1000), "*", read, allow))
	}
	if err := a.Create(acls); err != nil {
		b.Fatal(err)
	}
	if a.Len() != 10000 {
		b.Fatalf("%d bindings", a.Len())
	}
	b.Run("literal", func(b *testing.B) {
		for b.Loop() {
			if !a.Authorize("User:u42", "10.0.0.1", describe, topic, "topic-42") {
				b.Fatal("denied")
			}
		}
	})
	b.Run("prefixed", func(b *testing.B) {
		for b.Loop() {
			if !a.Authorize("User:u7", "10.0.0.1", write, topic, "team-7.orders.v1") {
				b.Fatal("denied")
			}
		}
	})
	b.Run("denied", func(b *testing.B) {
		for b.Loop() {
			if a.Authorize("User:nobody", "10.0.0.1", read, topic, "topic-42") {
				b.Fatal("allowed")
			}
		}
	})
	b.Run("by-resource-type", func(b *testing.B) {
		for b.Loop() {
			if !a.AuthorizeByResourceType("User:u7", "10.0.0.1", write, topic) {
				b.Fatal("denied")
			}
		}
	})
}
