// Package acl is Kawa's authorizer: the ACL bindings, their durable store and
// Kafka's evaluation rules (KIP-11, KIP-290 prefixed patterns; the semantics
// of Kafka's StandardAuthorizer, org.apache.kafka.metadata.authorizer).
//
// A binding grants or denies one operation on a resource pattern to a
// principal from a host. A request is allowed when the principal is a super
// user, or no matching DENY binding exists and a matching ALLOW binding does;
// a resource with no binding at all (for anyone) is allowed only with
// allow.everyone.if.no.acl.found. The broker asks; this package never
// imports it.
//
// Reads are lock-free (an immutable index behind an atomic pointer), so
// authorizing costs a few map lookups however many bindings exist; changes
// are serialised, persisted with vfs.WriteFileAtomic and only then visible.
package acl

import (
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Wildcard is the resource name, principal name and host that match every
// resource, principal and host (Kafka's ResourcePattern.WILDCARD_RESOURCE,
// "User:*" and host "*").
const Wildcard = "*"

// WildcardPrincipal matches every principal.
const WildcardPrincipal = "User:*"

// ClusterName is the name of the one CLUSTER resource.
const ClusterName = "kafka-cluster"

// Binding is one ACL (Kafka's AclBinding): a resource pattern (type, name,
// LITERAL or PREFIXED) and an access control entry (principal "Type:name",
// host, operation, ALLOW or DENY).
type Binding struct {
	ResourceType kmsg.ACLResourceType        `json:"resource_type"`
	ResourceName string                      `json:"resource_name"`
	PatternType  kmsg.ACLResourcePatternType `json:"pattern_type"`
	Principal    string                      `json:"principal"`
	Host         string                      `json:"host"`
	Operation    kmsg.ACLOperation           `json:"operation"`
	Permission   kmsg.ACLPermissionType      `json:"permission"`
}

func (b Binding) String() string {
	return fmt.Sprintf("(pattern=%s:%s:%s, principal=%s, host=%s, operation=%s, permission=%s)",
		b.ResourceType, b.PatternType, b.ResourceName, b.Principal, b.Host, b.Operation, b.Permission)
}

// ErrInvalid wraps every reason a binding or a filter is refused; the broker
// answers it INVALID_REQUEST (Kafka's InvalidRequestException).
var ErrInvalid = errors.New("invalid ACL")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// Validate checks that b can be stored, as Kafka's AclControlManager does:
// a concrete resource type (not ANY or UNKNOWN), a non-empty name (the
// cluster's is ClusterName), LITERAL or PREFIXED, a principal of the form
// "Type:name", a host, a concrete operation and permission. Errors wrap
// ErrInvalid.
func (b Binding) Validate() error {
	switch b.ResourceType {
	case kmsg.ACLResourceTypeTopic, kmsg.ACLResourceTypeGroup, kmsg.ACLResourceTypeCluster,
		kmsg.ACLResourceTypeTransactionalId, kmsg.ACLResourceTypeDelegationToken, kmsg.ACLResourceTypeUser:
	default:
		return invalid("resource type %s is not a resource type a binding can name", b.ResourceType)
	}
	switch b.PatternType {
	case kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLResourcePatternTypePrefixed:
	default:
		return invalid("pattern type %s is not LITERAL or PREFIXED", b.PatternType)
	}
	if b.ResourceName == "" {
		return invalid("resource name must not be empty")
	}
	if typ, name, ok := strings.Cut(b.Principal, ":"); !ok || typ == "" || name == "" {
		return invalid("principal %q is not of the form Type:name", b.Principal)
	}
	if b.Host == "" {
		return invalid("host must not be empty (use * for every host)")
	}
	if b.Operation < kmsg.ACLOperationAll || b.Operation > kmsg.ACLOperationDescribeTokens {
		return invalid("operation %s is not an operation a binding can name", b.Operation)
	}
	if b.Permission != kmsg.ACLPermissionTypeAllow && b.Permission != kmsg.ACLPermissionTypeDeny {
		return invalid("permission %s is not ALLOW or DENY", b.Permission)
	}
	return nil
}

// Filter selects bindings for DescribeAcls and DeleteAcls (Kafka's
// AclBindingFilter). ResourceType ANY, a nil name, principal or host,
// operation ANY and permission ANY match everything. PatternType ANY matches
// bindings of either type with exactly the filter's name; LITERAL and
// PREFIXED match that type and name; MATCH matches the bindings that apply
// to the resource named: LITERAL with that name or *, PREFIXED whose name is
// a prefix of it.
type Filter struct {
	ResourceType kmsg.ACLResourceType
	ResourceName *string
	PatternType  kmsg.ACLResourcePatternType
	Principal    *string
	Host         *string
	Operation    kmsg.ACLOperation
	Permission   kmsg.ACLPermissionType
}

// Validate refuses a filter with an UNKNOWN element (Kafka's
// findIndefiniteField), which clients send for values they could not map;
// errors wrap ErrInvalid.
func (f Filter) Validate() error {
	switch {
	case f.ResourceType == kmsg.ACLResourceTypeUnknown || f.ResourceType > kmsg.ACLResourceTypeUser:
		return invalid("unknown resource type %d", f.ResourceType)
	case f.PatternType == kmsg.ACLResourcePatternTypeUnknown || f.PatternType > kmsg.ACLResourcePatternTypePrefixed:
		return invalid("unknown pattern type %d", f.PatternType)
	case f.Operation == kmsg.ACLOperationUnknown || f.Operation > kmsg.ACLOperationDescribeTokens:
		return invalid("unknown operation %d", f.Operation)
	case f.Permission == kmsg.ACLPermissionTypeUnknown || f.Permission > kmsg.ACLPermissionTypeAllow:
		return invalid("unknown permission type %d", f.Permission)
	}
	return nil
}

// Matches reports whether f selects b (Kafka's AclBindingFilter.matches).
func (f Filter) Matches(b Binding) bool {
	if f.ResourceType != kmsg.ACLResourceTypeAny && f.ResourceType != b.ResourceType {
		return false
	}
	switch f.PatternType {
	case kmsg.ACLResourcePatternTypeAny, kmsg.ACLResourcePatternTypeMatch:
	default:
		if f.PatternType != b.PatternType {
			return false
		}
	}
	if f.ResourceName != nil {
		name := *f.ResourceName
		if f.PatternType != kmsg.ACLResourcePatternTypeMatch {
			if name != b.ResourceName {
				return false
			}
		} else if !patternApplies(b, name) {
			return false
		}
	}
	if f.Principal != nil && *f.Principal != b.Principal {
		return false
	}
	if f.Host != nil && *f.Host != b.Host {
		return false
	}
	if f.Operation != kmsg.ACLOperationAny && f.Operation != b.Operation {
		return false
	}
	return f.Permission == kmsg.ACLPermissionTypeAny || f.Permission == b.Permission
}

// patternApplies reports whether b's resource pattern covers the resource
// named name (of b's type).
func patternApplies(b Binding, name string) bool {
	if b.PatternType == kmsg.ACLResourcePatternTypePrefixed {
		return strings.HasPrefix(name, b.ResourceName)
	}
	return b.ResourceName == name || b.ResourceName == Wildcard
}

// grants reports whether a binding's operation covers the operation asked
// for. A DENY covers only its own operation and ALL; an ALLOW also covers
// the operations Kafka implies: READ, WRITE, DELETE and ALTER imply
// DESCRIBE, ALTER_CONFIGS implies DESCRIBE_CONFIGS (StandardAuthorizerData's
// IMPLIES_DESCRIBE and IMPLIES_DESCRIBE_CONFIGS).
func grants(b Binding, op kmsg.ACLOperation) bool {
	if b.Operation == op || b.Operation == kmsg.ACLOperationAll {
		return true
	}
	if b.Permission != kmsg.ACLPermissionTypeAllow {
		return false
	}
	switch op {
	case kmsg.ACLOperationDescribe:
		switch b.Operation {
		case kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationDelete, kmsg.ACLOperationAlter:
			return true
		}
	case kmsg.ACLOperationDescribeConfigs:
		return b.Operation == kmsg.ACLOperationAlterConfigs
	}
	return false
}

// appliesTo reports whether b's principal and host cover the request's.
func appliesTo(b Binding, principal, host string) bool {
	return (b.Principal == principal || b.Principal == WildcardPrincipal) && (b.Host == host || b.Host == Wildcard)
}
