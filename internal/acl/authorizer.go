package acl

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/vfs"
)

// File is the ACL store's file in the data directory.
const File = "acls.json"

// ClassName is the authorizer.class.name Kawa accepts: Kafka's KRaft
// authorizer, whose rules this package follows.
const ClassName = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"

// Options are the authorizer's broker settings, Kafka's names.
type Options struct {
	// SuperUsers are principals ("User:admin") allowed everything
	// (super.users, which Kafka separates with semicolons).
	SuperUsers []string
	// AllowEveryoneIfNoACLFound allows an operation on a resource that has
	// no binding at all (allow.everyone.if.no.acl.found, default false).
	AllowEveryoneIfNoACLFound bool
}

// Authorizer holds the bindings and answers authorization questions. Safe
// for concurrent use: Authorize never blocks, Create and Delete are
// serialised and return once the change is durable.
type Authorizer struct {
	fsys          vfs.FS
	path          string // "" when kept in memory only
	superUsers    map[string]bool
	allowEveryone bool

	mu  sync.Mutex // serialises changes; readers use idx alone
	idx atomic.Pointer[index]
}

// stored is the file's shape.
type stored struct {
	Version int       `json:"version"`
	ACLs    []Binding `json:"acls"`
}

// Open loads dir/File from fsys (none yet is an empty set). A file that does
// not parse or holds an invalid binding is an error naming it: the broker
// must not start with ACLs it cannot enforce.
func Open(fsys vfs.FS, dir string, o Options) (*Authorizer, error) {
	a := newAuthorizer(o)
	a.fsys, a.path = fsys, filepath.Join(dir, File)
	data, err := vfs.ReadFile(fsys, a.path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		a.idx.Store(buildIndex(nil))
		return a, nil
	case err != nil:
		return nil, fmt.Errorf("acl: %w", err)
	}
	var s stored
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("acl: %s: %w", a.path, err)
	}
	if s.Version != 1 {
		return nil, fmt.Errorf("acl: %s: unknown version %d", a.path, s.Version)
	}
	for _, b := range s.ACLs {
		if err := b.Validate(); err != nil {
			return nil, fmt.Errorf("acl: %s: %s: %w", a.path, b, err)
		}
	}
	a.idx.Store(buildIndex(s.ACLs))
	return a, nil
}

// NewMem returns an authorizer whose bindings are not persisted (tests,
// benchmarks).
func NewMem(o Options) *Authorizer {
	a := newAuthorizer(o)
	a.idx.Store(buildIndex(nil))
	return a
}

func newAuthorizer(o Options) *Authorizer {
	a := &Authorizer{superUsers: map[string]bool{}, allowEveryone: o.AllowEveryoneIfNoACLFound}
	for _, u := range o.SuperUsers {
		if u = strings.TrimSpace(u); u != "" {
			a.superUsers[u] = true
		}
	}
	return a
}

// ParseSuperUsers splits Kafka's super.users value ("User:a;User:b") and
// checks each is "Type:name".
func ParseSuperUsers(s string) ([]string, error) {
	var out []string
	for _, u := range strings.Split(s, ";") {
		if u = strings.TrimSpace(u); u == "" {
			continue
		}
		if typ, name, ok := strings.Cut(u, ":"); !ok || typ == "" || name == "" {
			return nil, fmt.Errorf("super.users: %q is not of the form User:name", u)
		}
		out = append(out, u)
	}
	return out, nil
}

// Authorize reports whether principal ("User:alice") connecting from host
// (the client's IP address, as Kafka compares it) may perform op on the
// resource of type rt named name (ClusterName for the cluster). Kafka's
// order: super users are allowed; a matching DENY denies; a matching ALLOW
// (operations implied included) allows; a resource no binding covers is
// allowed only with allow.everyone.if.no.acl.found; anything else is denied.
func (a *Authorizer) Authorize(principal, host string, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	if a.superUsers[principal] {
		return true
	}
	idx := a.idx.Load()
	found, allowed := false, false
	check := func(bs []Binding) bool { // false: a DENY decided
		for _, b := range bs {
			found = true
			if !appliesTo(b, principal, host) || !grants(b, op) {
				continue
			}
			if b.Permission == kmsg.ACLPermissionTypeDeny {
				return false
			}
			allowed = true
		}
		return true
	}
	if !check(idx.literal[resKey{rt, name}]) || !check(idx.literal[resKey{rt, Wildcard}]) {
		return false
	}
	for _, n := range idx.prefixLens[rt] {
		if n > len(name) {
			break
		}
		if !check(idx.prefixed[resKey{rt, name[:n]}]) {
			return false
		}
	}
	if !found {
		return a.allowEveryone
	}
	return allowed
}

// AuthorizeByResourceType reports whether principal from host may perform op
// on at least one resource of type rt, with Kafka's rules (the default
// Authorizer.authorizeByResourceType, used for "IDEMPOTENT_WRITE on the
// cluster or WRITE on any topic"): allowed when the check on a resource no
// one names is (super users, allow.everyone.if.no.acl.found, wildcard
// bindings); denied outright by a LITERAL DENY on *; otherwise allowed when
// a LITERAL or PREFIXED ALLOW for op (or ALL) exists that no LITERAL DENY of
// the same name and no PREFIXED DENY on a prefix of its name dominates.
// Implied operations do not count here, as in Kafka.
func (a *Authorizer) AuthorizeByResourceType(principal, host string, op kmsg.ACLOperation, rt kmsg.ACLResourceType) bool {
	// Kafka checks a hard-coded name first, so super users and the
	// no-ACL default are answered as for any one resource.
	if a.Authorize(principal, host, op, rt, "hardcode") {
		return true
	}
	idx := a.idx.Load()
	denyLiteral, denyPrefixed := map[string]bool{}, map[string]bool{}
	var allowLiteral, allowPrefixed []string
	bs := idx.byType[typePrincipal{rt, principal}]
	if principal != WildcardPrincipal {
		bs = append(slices.Clip(bs), idx.byType[typePrincipal{rt, WildcardPrincipal}]...)
	}
	for _, b := range bs {
		if !appliesTo(b, principal, host) || (b.Operation != op && b.Operation != kmsg.ACLOperationAll) {
			continue
		}
		literal := b.PatternType == kmsg.ACLResourcePatternTypeLiteral
		switch {
		case b.Permission == kmsg.ACLPermissionTypeDeny && literal && b.ResourceName == Wildcard:
			return false
		case b.Permission == kmsg.ACLPermissionTypeDeny && literal:
			denyLiteral[b.ResourceName] = true
		case b.Permission == kmsg.ACLPermissionTypeDeny:
			denyPrefixed[b.ResourceName] = true
		case literal && b.ResourceName == Wildcard:
			return true
		case literal:
			allowLiteral = append(allowLiteral, b.ResourceName)
		default:
			allowPrefixed = append(allowPrefixed, b.ResourceName)
		}
	}
	dominated := func(name string) bool {
		for i := 1; i <= len(name); i++ {
			if denyPrefixed[name[:i]] {
				return true
			}
		}
		return false
	}
	for _, n := range allowLiteral {
		if !denyLiteral[n] && !dominated(n) {
			return true
		}
	}
	for _, n := range allowPrefixed {
		if !dominated(n) {
			return true
		}
	}
	return false
}

// Describe returns the bindings f matches, in a stable order (resource type,
// pattern type, name, principal, host, operation, permission).
func (a *Authorizer) Describe(f Filter) []Binding {
	var out []Binding
	for _, b := range a.idx.Load().all {
		if f.Matches(b) {
			out = append(out, b)
		}
	}
	return out
}

// Len is the number of bindings.
func (a *Authorizer) Len() int { return len(a.idx.Load().all) }

// Create adds bindings (each already valid: Binding.Validate) and returns
// once they are durable; bindings that exist already are kept once. On a
// storage error nothing changes.
func (a *Authorizer) Create(bs []Binding) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	cur := a.idx.Load()
	have := make(map[Binding]bool, len(cur.all))
	for _, b := range cur.all {
		have[b] = true
	}
	next := slices.Clone(cur.all)
	for _, b := range bs {
		if !have[b] {
			have[b] = true
			next = append(next, b)
		}
	}
	if len(next) == len(cur.all) {
		return nil
	}
	return a.replace(next)
}

// Delete removes the bindings each filter matches and returns them, one
// slice per filter (a binding two filters match is reported under both, as
// Kafka does); it returns once the removal is durable. On a storage error
// nothing changes.
func (a *Authorizer) Delete(fs []Filter) ([][]Binding, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	cur := a.idx.Load()
	out := make([][]Binding, len(fs))
	gone := map[Binding]bool{}
	for i, f := range fs {
		for _, b := range cur.all {
			if f.Matches(b) {
				out[i] = append(out[i], b)
				gone[b] = true
			}
		}
	}
	if len(gone) == 0 {
		return out, nil
	}
	next := make([]Binding, 0, len(cur.all)-len(gone))
	for _, b := range cur.all {
		if !gone[b] {
			next = append(next, b)
		}
	}
	return out, a.replace(next)
}

// replace persists all, then publishes it. Called with mu held.
func (a *Authorizer) replace(all []Binding) error {
	idx := buildIndex(all)
	if a.path != "" {
		data, err := json.MarshalIndent(stored{Version: 1, ACLs: idx.all}, "", "  ")
		if err != nil {
			return fmt.Errorf("acl: %w", err)
		}
		if err := vfs.WriteFileAtomic(a.fsys, a.path, append(data, '\n')); err != nil {
			return fmt.Errorf("acl: %w", err)
		}
	}
	a.idx.Store(idx)
	return nil
}

// resKey names one resource pattern of one type.
type resKey struct {
	rt   kmsg.ACLResourceType
	name string
}

// index is an immutable view of the bindings, built on every change so
// Authorize needs no lock.
type index struct {
	all        []Binding                      // sorted (compareBindings)
	literal    map[resKey][]Binding           // LITERAL bindings by type and name (* included)
	prefixed   map[resKey][]Binding           // PREFIXED bindings by type and prefix
	prefixLens map[kmsg.ACLResourceType][]int // distinct prefix lengths per type, ascending
	byType     map[typePrincipal][]Binding    // by type and principal, for AuthorizeByResourceType
}

type typePrincipal struct {
	rt        kmsg.ACLResourceType
	principal string
}

func buildIndex(all []Binding) *index {
	all = slices.Clone(all)
	slices.SortFunc(all, compareBindings)
	idx := &index{
		all: all, literal: map[resKey][]Binding{}, prefixed: map[resKey][]Binding{},
		prefixLens: map[kmsg.ACLResourceType][]int{}, byType: map[typePrincipal][]Binding{},
	}
	for _, b := range all {
		k := resKey{b.ResourceType, b.ResourceName}
		tp := typePrincipal{b.ResourceType, b.Principal}
		idx.byType[tp] = append(idx.byType[tp], b)
		if b.PatternType == kmsg.ACLResourcePatternTypePrefixed {
			if len(idx.prefixed[k]) == 0 {
				idx.prefixLens[b.ResourceType] = append(idx.prefixLens[b.ResourceType], len(b.ResourceName))
			}
			idx.prefixed[k] = append(idx.prefixed[k], b)
		} else {
			idx.literal[k] = append(idx.literal[k], b)
		}
	}
	for rt, lens := range idx.prefixLens {
		slices.Sort(lens)
		idx.prefixLens[rt] = slices.Compact(lens)
	}
	return idx
}

func compareBindings(x, y Binding) int {
	return cmp.Or(
		cmp.Compare(x.ResourceType, y.ResourceType),
		cmp.Compare(x.PatternType, y.PatternType),
		cmp.Compare(x.ResourceName, y.ResourceName),
		cmp.Compare(x.Principal, y.Principal),
		cmp.Compare(x.Host, y.Host),
		cmp.Compare(x.Operation, y.Operation),
		cmp.Compare(x.Permission, y.Permission),
	)
}
