"""``kgate acls add|list|remove``: access control lists, with kafka-acls.sh's flags.

The flags are Kafka's own (``--allow-principal User:alice --operation Read --topic T
--resource-pattern-type prefixed``), so a runbook written for kafka-acls.sh works with
``kgate acls add`` in place of ``kafka-acls.sh --add``. Every resource named gets
every operation for every principal and host (the cross product, as Kafka's tool
does). ``--producer`` and ``--consumer`` are its shortcuts: WRITE, DESCRIBE and CREATE
on the topics; READ and DESCRIBE on the topics and READ on the groups.

Bindings are made with CreateAcls, listed with DescribeAcls and removed with
DeleteAcls, so the commands manage any Kafka cluster with an authorizer.
"""
from collections.abc import Sequence

from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)

from . import client_options as options
from . import output
from .client_options import Failed, UsageError

CLUSTER_NAME = "kafka-cluster"
OPERATIONS = {op.name.replace("_", "").lower(): op for op in ACLOperation
              if op not in (ACLOperation.UNKNOWN, ACLOperation.ANY)}
PATTERN_TYPES = {p.name.lower(): p for p in ACLResourcePatternType if p != ACLResourcePatternType.UNKNOWN}
# kafka-acls.sh's resource options, and the resource type each names.
RESOURCES = (("topic", ResourceType.TOPIC), ("group", ResourceType.GROUP),
             ("transactional_id", ResourceType.TRANSACTIONAL_ID))


def add_parser(commands) -> None:
    actions = options.family(commands, "acls", help="add, list and remove access control lists",
                             description="Manage ACLs over the Kafka protocol (CreateAcls, DescribeAcls, "
                                         "DeleteAcls) with kafka-acls.sh's flags; the cluster needs an authorizer "
                                         "(authorizer.class.name=acl on kgate).")
    add = options.subcommand(actions, "add", "allow or deny principals operations on resources")
    listed = options.subcommand(actions, "list", "list the ACLs matching the resource and principal given",
                                listing=True)
    remove = options.subcommand(actions, "remove", "remove the ACLs matching the flags given")
    for parser in (add, listed, remove):
        parser.add_argument("--topic", action="append", default=[], metavar="TOPIC", help="a topic (repeatable)")
        parser.add_argument("--group", action="append", default=[], metavar="GROUP", help="a group (repeatable)")
        parser.add_argument("--transactional-id", action="append", default=[], metavar="ID",
                            help="a transactional id (repeatable)")
        parser.add_argument("--cluster", action="store_true", help="the cluster resource")
        parser.add_argument("--resource-pattern-type", default=None, type=str.lower,
                            choices=("literal", "prefixed") if parser is add else tuple(PATTERN_TYPES),
                            help="literal (the default) or prefixed"
                            + ("" if parser is add else "; any or match to find bindings of every pattern type"))
    for parser in (add, remove):
        parser.add_argument("--allow-principal", action="append", default=[], metavar="PRINCIPAL",
                            help="User:NAME allowed (repeatable; User:* for everyone)")
        parser.add_argument("--deny-principal", action="append", default=[], metavar="PRINCIPAL",
                            help="User:NAME denied (repeatable)")
        parser.add_argument("--allow-host", action="append", default=[], metavar="HOST",
                            help="a host the allowed principals connect from (default: any)")
        parser.add_argument("--deny-host", action="append", default=[], metavar="HOST",
                            help="a host the denied principals connect from (default: any)")
        parser.add_argument("--operation", action="append", default=[], metavar="OPERATION",
                            help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, "
                                 "AlterConfigs, IdempotentWrite or All (repeatable)")
    add.add_argument("--producer", action="store_true", help="WRITE, DESCRIBE and CREATE on the topics")
    add.add_argument("--consumer", action="store_true", help="READ and DESCRIBE on the topics, READ on the groups")
    listed.add_argument("--principal", metavar="PRINCIPAL", help="only the bindings of this principal")


def run(args) -> int:
    return options.run(ACTIONS[args.action], args, f"kgate acls {args.action}")


def _operations(args) -> list[ACLOperation]:
    found = []
    for name in args.operation:
        operation = OPERATIONS.get(name.replace("_", "").replace("-", "").lower())
        if operation is None:
            raise UsageError(f"unknown --operation {name!r}; one of {', '.join(sorted(OPERATIONS))}")
        found.append(operation)
    return found


def _resources(args, pattern: ACLResourcePatternType) -> list[tuple[ResourceType, str]]:
    named = [(kind, name) for option, kind in RESOURCES for name in getattr(args, option)]
    if args.cluster:
        named.append((ResourceType.CLUSTER, CLUSTER_NAME))
    if args.cluster and pattern == ACLResourcePatternType.PREFIXED:
        raise UsageError("the cluster resource takes no --resource-pattern-type prefixed")
    return named


def _principals(args) -> list[tuple[str, list[str], ACLPermissionType]]:
    """(principal, hosts, permission) for each --allow-principal and --deny-principal."""
    for principal in args.allow_principal + args.deny_principal:
        kind, _, name = principal.partition(":")
        if not kind or not name:
            raise UsageError(f"principal {principal!r} is not TYPE:NAME, e.g. User:alice")
    return ([(p, args.allow_host or ["*"], ACLPermissionType.ALLOW) for p in args.allow_principal]
            + [(p, args.deny_host or ["*"], ACLPermissionType.DENY) for p in args.deny_principal])


def _pattern(args, default: ACLResourcePatternType) -> ACLResourcePatternType:
    return PATTERN_TYPES[args.resource_pattern_type] if args.resource_pattern_type else default


def _wanted(args, resources) -> list:
    """(resource type, name, operation) of each ACL to add: the operations asked for, and what
    --producer and --consumer stand for (as Kafka's kafka-acls expands them)."""
    wanted = [(kind, name, op) for kind, name in resources for op in _operations(args)]
    topics = [(kind, name) for kind, name in resources if kind == ResourceType.TOPIC]
    groups = [(kind, name) for kind, name in resources if kind == ResourceType.GROUP]
    if (args.producer or args.consumer) and not topics:
        raise UsageError("--producer and --consumer need --topic")
    if args.producer:
        wanted += [(k, n, op) for k, n in topics for op in (ACLOperation.WRITE, ACLOperation.DESCRIBE,
                                                             ACLOperation.CREATE)]
    if args.consumer:
        if not groups:
            raise UsageError("--consumer needs --group")
        wanted += [(k, n, op) for k, n in topics for op in (ACLOperation.READ, ACLOperation.DESCRIBE)]
        wanted += [(k, n, ACLOperation.READ) for k, n in groups]
    if not wanted:
        raise UsageError("give a resource (--topic, --group, --transactional-id, --cluster) and --operation, "
                         "or --producer/--consumer")
    return wanted


def _add(args) -> None:
    pattern = _pattern(args, ACLResourcePatternType.LITERAL)
    resources = _resources(args, pattern)
    principals = _principals(args)
    if not principals:
        raise UsageError("give --allow-principal or --deny-principal")
    wanted = _wanted(args, resources)
    acls = [ACL(principal, host, op, permission, ResourcePattern(kind, name, pattern))
            for kind, name, op in dict.fromkeys(wanted) for principal, hosts, permission in principals
            for host in hosts]
    with options.admin(args) as admin:
        result = admin.create_acls(acls)
    if result["failed"]:
        # kafka-python reports each failure as its error class, without the broker's message.
        raise Failed("; ".join(sorted({options.error_named(error.__name__) for error in result["failed"]})))
    for acl in result["succeeded"]:
        print(f"added: {_describe(acl)}")


def _list(args) -> None:
    pattern = _pattern(args, ACLResourcePatternType.LITERAL)
    # No resource named: a filter on every resource (a filter's name None matches any name).
    named = _resources(args, pattern)
    resources: Sequence[tuple[ResourceType, str | None]] = named if named else [(ResourceType.ANY, None)]
    if resources == [(ResourceType.ANY, None)] and not args.resource_pattern_type:
        pattern = ACLResourcePatternType.ANY  # nothing named: every binding
    found: list[ACL] = []
    with options.admin(args) as admin:
        for kind, name in resources:
            acls, _ = admin.describe_acls(ACLFilter(args.principal, None, ACLOperation.ANY, ACLPermissionType.ANY,
                                                    ResourcePatternFilter(kind, name, pattern)))
            found.extend(acls)
    found.sort(key=_sort_key)
    output.listing(args, ("RESOURCE-TYPE", "NAME", "PATTERN", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION"),
                   [_row(acl) for acl in found],
                   [dict(zip(("resource_type", "name", "pattern", "principal", "host", "operation", "permission"),
                             _row(acl))) for acl in found])


def _remove(args) -> None:
    pattern = _pattern(args, ACLResourcePatternType.LITERAL)
    resources = _resources(args, pattern)
    if not resources:
        raise UsageError("give the resource whose ACLs to remove (--topic, --group, --transactional-id, --cluster)")
    # No principal named: a filter on every principal and host (None matches any).
    named = _principals(args)
    principals: Sequence[tuple[str | None, Sequence[str | None], ACLPermissionType]] = (
        named if named else [(None, [None], ACLPermissionType.ANY)])
    operations = _operations(args) or [ACLOperation.ANY]
    filters = [ACLFilter(principal, host, op, permission, ResourcePatternFilter(kind, name, pattern))
               for kind, name in resources for op in operations for principal, hosts, permission in principals
               for host in hosts]
    with options.admin(args) as admin:
        results = admin.delete_acls(filters)
    removed = 0
    for _filter, matched, error in results:
        if error.errno:
            raise Failed(options.error_named(error.__name__))
        for acl in matched:
            removed += 1
            print(f"removed: {_describe(acl)}")
    if not removed:
        print("no ACL matched")


def _row(acl: ACL) -> tuple:
    pattern = acl.resource_pattern
    return (pattern.resource_type.name, pattern.resource_name, pattern.pattern_type.name, acl.principal, acl.host,
            acl.operation.name, acl.permission_type.name)


def _describe(acl: ACL) -> str:
    kind, name, pattern, principal, host, operation, permission = _row(acl)
    return f"{permission} {principal} from {host} {operation} on {kind} {name!r} ({pattern})"


def _sort_key(acl: ACL) -> tuple:
    return tuple(str(v) for v in _row(acl))


ACTIONS = {"add": _add, "list": _list, "remove": _remove}
