"""Access control lists in the metadata store, shared by every broker of the cluster.

Kafka keeps each resource pattern's ACLs in one ZooKeeper node and tells brokers of a
change through a sequence of change nodes. Here too a pattern's ACLs are one node,
written by compare-and-set; every write then bumps one change node, which each broker
watches and answers by reading the whole set again. ACL sets are small next to
topics and change rarely, and a full re-read needs no ordering of change notices:
every broker applies a change as soon as its watch fires.

    /acls/<resource type>/<pattern type>/<quoted name>   [[principal, host, operation, permission], ...]
    /acl-changes                                          bumped after every write
"""
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from urllib.parse import quote, unquote

from kafka.protocol.admin.acl import ACLOperation as Operation
from kafka.protocol.admin.acl import ACLPermissionType as Permission
from kafka.protocol.admin.acl import ACLResourcePatternType as PatternType
from kafka.protocol.admin.acl import ACLResourceType as ResourceType

from .store import MetadataStore, touch, update_node

__all__ = ["Acl", "AclFilter", "AclStore", "Operation", "PatternType", "Permission", "ResourceType",
           "CLUSTER_NAME", "WILDCARD", "invalid_acl"]

ACLS = "/acls"
CHANGES = "/acl-changes"
# The one name a CLUSTER resource has (Kafka's).
CLUSTER_NAME = "kafka-cluster"
# A literal resource name, principal or host that matches every one.
WILDCARD = "*"


@dataclass(frozen=True, slots=True)
class Acl:
    """One ACL binding: a resource pattern and who may (or may not) do what to it, from where."""

    resource_type: ResourceType
    name: str
    pattern: PatternType  # LITERAL or PREFIXED
    principal: str  # "User:alice", or "User:*"
    host: str  # an address, or "*"
    operation: Operation
    permission: Permission  # ALLOW or DENY


@dataclass(frozen=True, slots=True)
class AclFilter:
    """Which bindings DescribeAcls and DeleteAcls mean; ANY and None match everything.

    A MATCH pattern finds the bindings that would apply to the named resource: the
    literal name, the literal wildcard, and every prefix of it.
    """

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: Operation = Operation.ANY
    permission: Permission = Permission.ANY

    def matches(self, acl: Acl) -> bool:
        return (self.resource_type in (ResourceType.ANY, acl.resource_type)
                and self._matches_pattern(acl)
                and self.principal in (None, acl.principal)
                and self.host in (None, acl.host)
                and self.operation in (Operation.ANY, acl.operation)
                and self.permission in (Permission.ANY, acl.permission))

    def _matches_pattern(self, acl: Acl) -> bool:
        if self.pattern == PatternType.MATCH:
            if self.name is None:
                return True
            if acl.pattern == PatternType.LITERAL:
                return acl.name in (self.name, WILDCARD)
            return self.name.startswith(acl.name)
        return self.pattern in (PatternType.ANY, acl.pattern) and self.name in (None, acl.name)

    def invalid(self) -> str | None:
        """Why this filter cannot be used, or None."""
        for value, kind in ((self.resource_type, ResourceType), (self.pattern, PatternType),
                            (self.operation, Operation), (self.permission, Permission)):
            if value == kind.UNKNOWN:
                return f"unknown {kind.__name__}"
        return None


def invalid_acl(acl: Acl) -> str | None:
    """Why Kafka would refuse to create ``acl``, or None."""
    if acl.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
        return "an ACL names one resource type"
    if acl.pattern not in (PatternType.LITERAL, PatternType.PREFIXED):
        return "an ACL's pattern type is LITERAL or PREFIXED"
    if acl.operation in (Operation.ANY, Operation.UNKNOWN):
        return "an ACL names one operation (or ALL)"
    if acl.permission not in (Permission.ALLOW, Permission.DENY):
        return "an ACL's permission type is ALLOW or DENY"
    if not acl.name:
        return "an ACL's resource name is not empty"
    if acl.resource_type == ResourceType.CLUSTER and acl.name != CLUSTER_NAME:
        return f"the cluster resource is named {CLUSTER_NAME!r}"
    kind, _, name = acl.principal.partition(":")
    if not kind or not name:
        return f"principal {acl.principal!r} is not TYPE:NAME (User:alice)"
    if not acl.host:
        return "an ACL's host is an address or '*'"
    return None


def _pattern_path(resource_type: ResourceType, pattern: PatternType, name: str) -> str:
    return f"{ACLS}/{resource_type.name}/{pattern.name}/{quote(name, safe='')}"


class AclStore:
    def __init__(self, store: MetadataStore):
        self._store = store

    def watch(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` after any broker (or tool) changes the ACLs."""
        self._store.watch(CHANGES, callback)

    async def load(self) -> list[Acl]:
        acls = []
        store = self._store
        for type_name in await store.children(ACLS):
            for pattern_name in await store.children(f"{ACLS}/{type_name}"):
                for quoted in await store.children(f"{ACLS}/{type_name}/{pattern_name}"):
                    resource_type, pattern = ResourceType[type_name], PatternType[pattern_name]
                    node = await store.get(_pattern_path(resource_type, pattern, unquote(quoted)))
                    if node is not None:
                        acls.extend(_decode(resource_type, pattern, unquote(quoted), node.data))
        return acls

    async def add(self, acls: Iterable[Acl]) -> None:
        by_pattern: dict[tuple[ResourceType, PatternType, str], list[Acl]] = {}
        for acl in acls:
            by_pattern.setdefault((acl.resource_type, acl.pattern, acl.name), []).append(acl)
        for key, added in by_pattern.items():
            await self._update(*key, set(added).union)
        await self._changed()

    async def remove(self, filters: list[AclFilter]) -> list[list[Acl]]:
        """Delete the bindings each filter matches; per filter, the ones it deleted."""
        removed: list[list[Acl]] = [[] for _ in filters]
        by_pattern: dict[tuple[ResourceType, PatternType, str], list[Acl]] = {}
        for acl in await self.load():
            by_pattern.setdefault((acl.resource_type, acl.pattern, acl.name), []).append(acl)
        for key, held in by_pattern.items():
            doomed = {acl for acl in held if any(f.matches(acl) for f in filters)}
            if not doomed:
                continue
            await self._update(*key, lambda current: current - doomed)  # noqa: B023 (awaited at once)
            for acl in doomed:
                for index, acl_filter in enumerate(filters):
                    if acl_filter.matches(acl):
                        removed[index].append(acl)
        if any(removed):
            await self._changed()
        return removed

    async def _update(self, resource_type: ResourceType, pattern: PatternType, name: str,
                      change: Callable[[set[Acl]], set[Acl]]) -> None:
        """Apply ``change`` to one pattern's node (deleted once it holds no binding)."""
        def changed(data: bytes | None) -> bytes | None:
            held = set(_decode(resource_type, pattern, name, data)) if data is not None else set()
            wanted = change(held)
            return _encode(wanted) if wanted else None
        await update_node(self._store, _pattern_path(resource_type, pattern, name), changed)

    async def _changed(self) -> None:
        await touch(self._store, CHANGES)


def _encode(acls: set[Acl]) -> bytes:
    return json.dumps(sorted([a.principal, a.host, a.operation.name, a.permission.name] for a in acls)).encode()


def _decode(resource_type: ResourceType, pattern: PatternType, name: str, data: bytes) -> list[Acl]:
    return [Acl(resource_type, name, pattern, principal, host, Operation[operation], Permission[permission])
            for principal, host, operation, permission in json.loads(data)]
