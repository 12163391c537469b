package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/cmd/internal/cli"
)

const aclUsage = `usage: kawa acl <create|list|delete> [flags]

  kawa acl create --allow-principal User:alice --operation Read --topic orders [--group g]
                  [--resource-pattern-type literal|prefixed] [--allow-host H] [--deny-principal P]
  kawa acl list   [--topic T] [--group G] [--transactional-id X] [--cluster] [--principal P]
                  [--resource-pattern-type literal|prefixed|match|any]
  kawa acl delete (the same filters as list)

Kafka's ACLs, in kafka-acls' vocabulary, through CreateAcls, DescribeAcls and
DeleteAcls (the broker needs --authorizer-class-name). Principals are
Type:name (User:alice, User:CN=app,O=Example for a client certificate);
operations are Kafka's (All, Read, Write, Create, Delete, Alter, Describe,
ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite); every flag
naming a principal, host, operation or resource may repeat, and create makes
every combination. --host sets --allow-host and --deny-host at once; hosts
default to * on create. list and delete without a resource flag match every
resource, without a principal every principal; their pattern type defaults
to any (create's to literal); match selects the ACLs that apply to the named
resource (literal, * and prefixes). Every form takes --brokers and
--command-config.
`

// aclCmds are the subcommands of `kawa acl`.
var aclCmds = []adminCmd{
	{name: "create", synopsis: "kawa acl create --allow-principal P --operation OP (--topic T | --group G | --transactional-id X | --cluster) ...", setup: aclCreate},
	{name: "list", synopsis: "kawa acl list [--topic T] [--group G] [--transactional-id X] [--cluster] [--principal P] ...", setup: aclList},
	{name: "delete", synopsis: "kawa acl delete [the filters of list]", setup: aclDelete},
}

// runACL implements `kawa acl`.
func runACL(args []string, _ io.Reader, stdout io.Writer) error {
	return runAdmin("acl", aclUsage, aclCmds, args, stdout)
}

// repeated is a flag that may be given many times (and takes commas).
type repeated []string

func (r *repeated) String() string { return strings.Join(*r, ",") }

func (r *repeated) Set(s string) error {
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			*r = append(*r, v)
		}
	}
	return nil
}

// aclFlags are the flags every `kawa acl` form declares.
type aclFlags struct {
	fs                          *cli.FlagSet
	allow, deny, principal      repeated
	allowHost, denyHost, host   repeated
	ops, topics, groups, txnIDs repeated
	cluster                     *bool
	pattern                     *string
}

func newACLFlags(fs *cli.FlagSet, defaultPattern string) *aclFlags {
	f := &aclFlags{fs: fs}
	fs.Var(&f.allow, "allow-principal", "principal to allow, Type:name (repeatable)")
	fs.Var(&f.deny, "deny-principal", "principal to deny, Type:name (repeatable)")
	fs.Var(&f.allowHost, "allow-host", "host the allowed principals connect from (repeatable; default *)")
	fs.Var(&f.denyHost, "deny-host", "host the denied principals connect from (repeatable; default *)")
	fs.Var(&f.host, "host", "host for both --allow-host and --deny-host (repeatable)")
	fs.Var(&f.ops, "operation", "operation: All, Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite (repeatable)")
	fs.Var(&f.topics, "topic", "topic resource (repeatable; * for every topic)")
	fs.Var(&f.groups, "group", "consumer group resource (repeatable)")
	fs.Var(&f.txnIDs, "transactional-id", "transactional ID resource (repeatable)")
	f.cluster = fs.Bool("cluster", false, "the cluster resource")
	f.pattern = fs.String("resource-pattern-type", defaultPattern, "literal, prefixed, match or any (match and any: list and delete only)")
	return f
}

// builder turns the flags into kadm's ACL builder; create selects the
// create rules (resources and operations required, hosts default to *).
func (f *aclFlags) builder(create bool) (*kadm.ACLBuilder, error) {
	pattern, err := kmsg.ParseACLResourcePatternType(*f.pattern)
	if err != nil {
		return nil, f.fs.UsageErr("--resource-pattern-type %q: want literal, prefixed, match or any", *f.pattern)
	}
	var ops []kadm.ACLOperation
	for _, o := range f.ops {
		op, err := kmsg.ParseACLOperation(o)
		if err != nil || op == kmsg.ACLOperationUnknown {
			return nil, f.fs.UsageErr("--operation %q is not a Kafka ACL operation", o)
		}
		ops = append(ops, op)
	}
	allowHosts := append(append([]string{}, f.allowHost...), f.host...)
	denyHosts := append(append([]string{}, f.denyHost...), f.host...)
	hasResource := len(f.topics)+len(f.groups)+len(f.txnIDs) > 0 || *f.cluster
	b := kadm.NewACLs().ResourcePatternType(pattern)
	if create {
		if len(f.allow)+len(f.deny) == 0 {
			return nil, f.fs.UsageErr("create needs --allow-principal or --deny-principal")
		}
		if len(ops) == 0 || !hasResource {
			return nil, f.fs.UsageErr("create needs --operation and a resource (--topic, --group, --transactional-id or --cluster)")
		}
		if len(f.principal) > 0 {
			return nil, f.fs.UsageErr("--principal is a list/delete filter; create takes --allow-principal/--deny-principal")
		}
		if len(allowHosts) == 0 {
			allowHosts = []string{"*"}
		}
		if len(denyHosts) == 0 {
			denyHosts = []string{"*"}
		}
		b.MaybeAllow(f.allow...).MaybeDeny(f.deny...)
		if len(f.allow) > 0 {
			b.MaybeAllowHosts(allowHosts...)
		}
		if len(f.deny) > 0 {
			b.MaybeDenyHosts(denyHosts...)
		}
		b.MaybeTopics(f.topics...).MaybeGroups(f.groups...).MaybeTransactionalIDs(f.txnIDs...).MaybeClusters(*f.cluster)
		return b.Operations(ops...), nil
	}
	// Filters: --principal matches both permissions; no principal at all matches any.
	allow, deny := append(append([]string{}, f.allow...), f.principal...), append(append([]string{}, f.deny...), f.principal...)
	switch {
	case len(f.allow)+len(f.deny)+len(f.principal) == 0:
		b.Allow().Deny()
	case len(f.allow) > 0 && len(f.deny) == 0 && len(f.principal) == 0:
		b.MaybeAllow(allow...)
	case len(f.deny) > 0 && len(f.allow) == 0 && len(f.principal) == 0:
		b.MaybeDeny(deny...)
	default:
		b.MaybeAllow(allow...).MaybeDeny(deny...)
	}
	b.AllowHosts(allowHosts...).DenyHosts(denyHosts...)
	if !hasResource {
		b.AnyResource()
	} else {
		b.MaybeTopics(f.topics...).MaybeGroups(f.groups...).MaybeTransactionalIDs(f.txnIDs...).MaybeClusters(*f.cluster)
	}
	if len(ops) == 0 {
		ops = []kadm.ACLOperation{kadm.OpAny}
	}
	return b.Operations(ops...), nil
}

// aclLine prints one binding: resource type, pattern type, name,
// principal, host, operation, permission.
func aclLine(w io.Writer, rt kmsg.ACLResourceType, pt kmsg.ACLResourcePatternType, name, principal, host string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) {
	fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", rt, pt, name, principal, host, op, perm)
}

const aclHeader = "RESOURCE-TYPE\tPATTERN\tNAME\tPRINCIPAL\tHOST\tOPERATION\tPERMISSION\n"

func aclCreate(fs *cli.FlagSet) adminFunc {
	f := newACLFlags(fs, "literal")
	return func(ctx context.Context, adm *kadm.Client, _ []string, stdout io.Writer) error {
		b, err := f.builder(true)
		if err != nil {
			return err
		}
		rs, err := adm.CreateACLs(ctx, b)
		if err != nil {
			return err
		}
		var errs []error
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprint(tw, "CREATED\t"+aclHeader)
		for _, r := range rs {
			if r.Err != nil {
				errs = append(errs, fmt.Errorf("%s %s %s %s: %w", r.Type, r.Name, r.Principal, r.Operation, cli.WithMessage(r.Err, r.ErrMessage)))
				continue
			}
			fmt.Fprint(tw, "\t")
			aclLine(tw, r.Type, r.Pattern, r.Name, r.Principal, r.Host, r.Operation, r.Permission)
		}
		tw.Flush()
		return errors.Join(errs...)
	}
}

func aclList(fs *cli.FlagSet) adminFunc   { return aclFiltered(fs, false) }
func aclDelete(fs *cli.FlagSet) adminFunc { return aclFiltered(fs, true) }

// aclFiltered is list (DescribeAcls) or, with del, delete (DeleteAcls): the
// bindings the filter flags select, printed once each.
func aclFiltered(fs *cli.FlagSet, del bool) adminFunc {
	f := newACLFlags(fs, "any")
	fs.Var(&f.principal, "principal", "only ACLs of this principal, allowed or denied (repeatable)")
	return func(ctx context.Context, adm *kadm.Client, _ []string, stdout io.Writer) error {
		b, err := f.builder(false)
		if err != nil {
			return err
		}
		var rows []kadm.DescribedACL
		var errs []error
		if del {
			rs, err := adm.DeleteACLs(ctx, b)
			if err != nil {
				return err
			}
			for _, r := range rs {
				if r.Err != nil {
					errs = append(errs, cli.WithMessage(r.Err, r.ErrMessage))
				}
				for _, d := range r.Deleted {
					rows = append(rows, kadm.DescribedACL{Principal: d.Principal, Host: d.Host, Type: d.Type, Name: d.Name, Pattern: d.Pattern, Operation: d.Operation, Permission: d.Permission})
				}
			}
		} else {
			rs, err := adm.DescribeACLs(ctx, b)
			if err != nil {
				return err
			}
			for _, r := range rs {
				if r.Err != nil {
					errs = append(errs, cli.WithMessage(r.Err, r.ErrMessage))
				}
				rows = append(rows, r.Described...)
			}
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		prefix := ""
		if del {
			prefix = "\t"
			fmt.Fprint(tw, "DELETED")
		}
		fmt.Fprint(tw, prefix+aclHeader)
		seen := map[kadm.DescribedACL]bool{} // the filters of one builder can overlap
		for _, d := range rows {
			if !seen[d] {
				seen[d] = true
				fmt.Fprint(tw, prefix)
				aclLine(tw, d.Type, d.Pattern, d.Name, d.Principal, d.Host, d.Operation, d.Permission)
			}
		}
		tw.Flush()
		return errors.Join(errs...)
	}
}
