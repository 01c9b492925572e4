"""Kafka's ACL authorizer: the one place that decides who may do what to which resource.

Every handler asks it (through ``Context.allowed``) before it acts, with Kafka's
resources and operations, and answers a refusal with Kafka's error code for the
resource. The rules are Kafka's (``AclAuthorizer``, ``StandardAuthorizer``):

- a super user (``super.users``) may do anything;
- a DENY binding matching the principal, the host and the operation (or ALL) refuses,
  whatever else allows: deny wins;
- an ALLOW binding matching them allows; READ, WRITE, DELETE and ALTER each imply
  DESCRIBE, and ALTER_CONFIGS implies DESCRIBE_CONFIGS;
- otherwise the request is refused, unless no binding names the resource at all and
  ``allow.everyone.if.no.acl.found`` is set.

A binding names a resource literally (the name, or ``*`` for all) or by prefix. The
bindings live in the metadata store (``metadata/acls.py``) and are re-read whenever
any broker changes them. Produce and fetch ask once per topic per request, so
decisions are cached until the bindings change.
"""
import logging
import time
from collections.abc import Callable, Iterable

from kgate.metadata.acls import WILDCARD, Acl, AclStore, Operation, PatternType, Permission, ResourceType

log = logging.getLogger(__name__)

ANONYMOUS = "User:ANONYMOUS"
# Kafka's authorizer class names, taken to mean kgate's own ACL authorizer so that a
# broker configuration written for Kafka works unchanged.
AUTHORIZER_NAMES = ("acl", "kafka.security.authorizer.AclAuthorizer",
                    "org.apache.kafka.metadata.authorizer.StandardAuthorizer")
# What each resource type's authorized-operations bit field may hold (Kafka's).
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[Operation, ...]] = {
    ResourceType.TOPIC: (Operation.READ, Operation.WRITE, Operation.CREATE, Operation.DELETE, Operation.ALTER,
                         Operation.DESCRIBE, Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS),
    ResourceType.GROUP: (Operation.READ, Operation.DESCRIBE, Operation.DELETE),
    ResourceType.CLUSTER: (Operation.CREATE, Operation.CLUSTER_ACTION, Operation.DESCRIBE_CONFIGS,
                           Operation.ALTER_CONFIGS, Operation.IDEMPOTENT_WRITE, Operation.ALTER, Operation.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (Operation.DESCRIBE, Operation.WRITE),
}
_IMPLIED_BY = {
    Operation.DESCRIBE: (Operation.DESCRIBE, Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER),
    Operation.DESCRIBE_CONFIGS: (Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS),
}
DENIAL_LOG_SECONDS = 60.0
# Bounds on the caches a stream of distinct names could otherwise grow without end.
MAX_CACHED = 100_000


def principal_of(connection) -> str:
    """Kafka's principal for a connection: ``User:<SASL name>``, or ``User:ANONYMOUS``."""
    return f"User:{connection.principal}" if connection.principal is not None else ANONYMOUS


def host_of(connection) -> str:
    return connection.peer.rpartition(":")[0].strip("[]")


def bit_field(operations: Iterable[Operation]) -> set[int]:
    """Kafka's authorized operations (bit N set when operation N is allowed), as the bit
    numbers kafka-python's schema classes encode into that field."""
    return {int(operation) for operation in operations}


class Authorizer:
    def __init__(self, settings, acls: AclStore, on_denied: Callable[[ResourceType, Operation], None]):
        self.enabled = bool(settings["authorizer.class.name"])
        self.super_users = frozenset(p.strip() for p in settings["super.users"].split(";") if p.strip())
        self._allow_if_unnamed = settings["allow.everyone.if.no.acl.found"]
        self.acls = acls
        self._on_denied = on_denied
        self._literal: dict[tuple[ResourceType, str], list[Acl]] = {}
        self._prefixed: dict[ResourceType, dict[str, list[Acl]]] = {}
        self._decisions: dict[tuple, bool] = {}
        self._logged: dict[tuple, float] = {}
        self.bindings: list[Acl] = []

    async def start(self, changed: Callable[[], None]) -> None:
        """Load the bindings, and call ``changed`` whenever any broker alters them."""
        if self.enabled:
            self.acls.watch(changed)
            await self.reload()

    async def reload(self, _key=None) -> None:
        self.use(await self.acls.load())

    def use(self, bindings: list[Acl]) -> None:
        literal: dict[tuple[ResourceType, str], list[Acl]] = {}
        prefixed: dict[ResourceType, dict[str, list[Acl]]] = {}
        for acl in bindings:
            if acl.pattern == PatternType.LITERAL:
                literal.setdefault((acl.resource_type, acl.name), []).append(acl)
            else:
                prefixed.setdefault(acl.resource_type, {}).setdefault(acl.name, []).append(acl)
        self._literal, self._prefixed, self.bindings = literal, prefixed, bindings
        self._decisions = {}
        log.info("authorizer: %d ACL bindings in force", len(bindings))

    def allowed(self, connection, operation: Operation, resource_type: ResourceType, name: str,
                quietly: bool = False) -> bool:
        if not self.enabled:
            return True
        # Keyed by the connection's own fields: the principal and host strings are made only on a miss.
        key = (connection.principal, connection.peer, operation, resource_type, name)
        decision = self._decisions.get(key)
        if decision is None:
            decision = self._decide(principal_of(connection), host_of(connection), operation, resource_type, name)
            if len(self._decisions) >= MAX_CACHED:
                self._decisions.clear()
            self._decisions[key] = decision
        if not decision and not quietly:
            self._denied(principal_of(connection), host_of(connection), operation, resource_type, name)
        return decision

    def allowed_somewhere(self, connection, operation: Operation, resource_type: ResourceType) -> bool:
        """Whether some binding lets the principal do ``operation`` to a resource of the type,
        and no wildcard binding denies it everywhere."""
        if not self.enabled:
            return True
        principal, host = principal_of(connection), host_of(connection)
        if principal in self.super_users:
            return True
        bindings = [acl for acl in self.bindings if acl.resource_type == resource_type]
        if not bindings:
            return self._allow_if_unnamed
        applies = _applying(bindings, principal, host)
        if any(_denies(acl, operation) and acl.pattern == PatternType.LITERAL and acl.name == WILDCARD
               for acl in applies):
            return False
        return _allows(applies, operation)

    def authorized_operations(self, connection, resource_type: ResourceType, name: str) -> set[int]:
        """The bit field of the resource's operations this connection may use (all of them
        without an authorizer, as Kafka answers)."""
        supported = SUPPORTED_OPERATIONS[resource_type]
        if not self.enabled:
            return bit_field(supported)
        principal, host = principal_of(connection), host_of(connection)
        return bit_field(op for op in supported if self._decide(principal, host, op, resource_type, name))

    def _decide(self, principal: str, host: str, operation: Operation, resource_type: ResourceType,
                name: str) -> bool:
        if principal in self.super_users:
            return True
        bindings = self._matching(resource_type, name)
        if not bindings:
            return self._allow_if_unnamed
        applies = _applying(bindings, principal, host)
        if any(_denies(acl, operation) for acl in applies):
            return False
        return _allows(applies, operation)

    def _matching(self, resource_type: ResourceType, name: str) -> list[Acl]:
        found = self._literal.get((resource_type, name), []) + self._literal.get((resource_type, WILDCARD), [])
        prefixes = self._prefixed.get(resource_type)
        if prefixes:
            for end in range(1, len(name) + 1):
                found += prefixes.get(name[:end], ())
        return found

    def _denied(self, principal: str, host: str, operation: Operation, resource_type: ResourceType,
                name: str) -> None:
        self._on_denied(resource_type, operation)
        now = time.monotonic()
        logged = (principal, resource_type, name)
        if now - self._logged.get(logged, -DENIAL_LOG_SECONDS) >= DENIAL_LOG_SECONDS:
            if len(self._logged) >= MAX_CACHED:
                self._logged.clear()
            self._logged[logged] = now
            log.info("authorization denied: %s from %s may not %s %s %r (further denials of this principal on "
                     "this resource are not logged for %.0f s)", principal, host, operation.name,
                     resource_type.name, name, DENIAL_LOG_SECONDS)


def _applying(bindings: list[Acl], principal: str, host: str) -> list[Acl]:
    """The bindings that speak of this principal connecting from this host."""
    return [acl for acl in bindings if acl.principal in (principal, "User:*") and acl.host in (host, WILDCARD)]


def _denies(acl: Acl, operation: Operation) -> bool:
    return acl.permission == Permission.DENY and acl.operation in (operation, Operation.ALL)


def _allows(applying: list[Acl], operation: Operation) -> bool:
    allowing = _IMPLIED_BY.get(operation, (operation,))
    return any(acl.permission == Permission.ALLOW and (acl.operation == Operation.ALL or acl.operation in allowing)
               for acl in applying)
