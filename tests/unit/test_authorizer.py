"""The ACL authorizer's rules (Kafka's), the ACL filters of DescribeAcls/DeleteAcls, and
the ACL store on a real (embedded) metadata store, watched as every broker watches it."""
import asyncio
from types import SimpleNamespace

import pytest

from kgate.gateway.authorizer import SUPPORTED_OPERATIONS, Authorizer, bit_field
from kgate.metadata.acls import (
    Acl,
    AclFilter,
    AclStore,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    invalid_acl,
)
from kgate.metadata.stores.embedded import EmbeddedMetadataStore

TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = Permission.ALLOW, Permission.DENY


def acl(name, operation, permission=ALLOW, principal="User:alice", host="*", resource_type=TOPIC, pattern=LITERAL):
    return Acl(resource_type, name, pattern, principal, host, operation, permission)


def settings(super_users="", allow_if_none=False):
    return {"authorizer.class.name": "acl", "super.users": super_users,
            "allow.everyone.if.no.acl.found": allow_if_none}


def connection(user="alice", address="10.0.0.1"):
    return SimpleNamespace(principal=user, peer=f"{address}:5555")


class Denials(list):
    def __call__(self, resource_type, operation):
        self.append((resource_type, operation))


def authorizer(bindings, **kwargs):
    auth = Authorizer(settings(**kwargs), acls=None, on_denied=Denials())
    auth.use(bindings)
    return auth


def test_no_binding_refuses_unless_everyone_is_allowed():
    assert not authorizer([]).allowed(connection(), Operation.READ, TOPIC, "orders")
    assert authorizer([], allow_if_none=True).allowed(connection(), Operation.READ, TOPIC, "orders")
    # A binding for someone else names the resource, so allow.everyone no longer applies.
    named = authorizer([acl("orders", Operation.READ, principal="User:bob")], allow_if_none=True)
    assert not named.allowed(connection(), Operation.READ, TOPIC, "orders")
    assert named.allowed(connection(), Operation.READ, TOPIC, "payments")


def test_literal_wildcard_and_prefixed_patterns():
    auth = authorizer([acl("orders", Operation.READ), acl("team-a.", Operation.WRITE, pattern=PREFIXED),
                       acl("*", Operation.DESCRIBE, principal="User:bob")])
    alice, bob = connection(), connection("bob")
    assert auth.allowed(alice, Operation.READ, TOPIC, "orders")
    assert not auth.allowed(alice, Operation.READ, TOPIC, "orders2")
    assert auth.allowed(alice, Operation.WRITE, TOPIC, "team-a.clicks")
    assert not auth.allowed(alice, Operation.WRITE, TOPIC, "team-b.clicks")
    assert not auth.allowed(alice, Operation.WRITE, TOPIC, "team-a")  # shorter than the prefix
    assert auth.allowed(bob, Operation.DESCRIBE, TOPIC, "anything")
    assert not auth.allowed(bob, Operation.READ, TOPIC, "anything")
    assert not auth.allowed(alice, Operation.READ, GROUP, "orders")  # another resource type


def test_deny_wins_over_allow():
    auth = authorizer([acl("*", Operation.ALL), acl("secret", Operation.READ, DENY),
                       acl("audit.", Operation.ALL, DENY, pattern=PREFIXED)])
    alice = connection()
    assert auth.allowed(alice, Operation.READ, TOPIC, "orders")
    assert not auth.allowed(alice, Operation.READ, TOPIC, "secret")
    assert auth.allowed(alice, Operation.WRITE, TOPIC, "secret")  # denied READ only
    assert not auth.allowed(alice, Operation.DESCRIBE, TOPIC, "audit.log")


def test_principal_and_host_must_match():
    auth = authorizer([acl("orders", Operation.READ, host="10.0.0.1"),
                       acl("orders", Operation.WRITE, principal="User:*")])
    assert auth.allowed(connection(address="10.0.0.1"), Operation.READ, TOPIC, "orders")
    assert not auth.allowed(connection(address="10.0.0.2"), Operation.READ, TOPIC, "orders")
    assert auth.allowed(connection("carol"), Operation.WRITE, TOPIC, "orders")
    assert not auth.allowed(connection(None), Operation.READ, TOPIC, "orders")  # User:ANONYMOUS


def test_implied_operations():
    auth = authorizer([acl("t", Operation.WRITE), acl("c", Operation.ALTER_CONFIGS)])
    alice = connection()
    assert auth.allowed(alice, Operation.DESCRIBE, TOPIC, "t")  # WRITE implies DESCRIBE
    assert not auth.allowed(alice, Operation.READ, TOPIC, "t")
    assert auth.allowed(alice, Operation.DESCRIBE_CONFIGS, TOPIC, "c")
    assert not auth.allowed(alice, Operation.DESCRIBE, TOPIC, "c")
    # A deny of DESCRIBE is not lifted by the implication.
    denied = authorizer([acl("t", Operation.WRITE), acl("t", Operation.DESCRIBE, DENY)])
    assert not denied.allowed(alice, Operation.DESCRIBE, TOPIC, "t")


def test_super_users_may_do_anything():
    auth = authorizer([acl("*", Operation.ALL, DENY, principal="User:*")], super_users="User:admin; User:ops")
    assert auth.allowed(connection("ops"), Operation.DELETE, TOPIC, "orders")
    assert not auth.allowed(connection(), Operation.DELETE, TOPIC, "orders")


def test_denials_are_counted_each_time_and_logged_once_a_minute(caplog):
    auth = authorizer([])
    alice = connection()
    with caplog.at_level("INFO", logger="kgate.gateway.authorizer"):
        for _ in range(3):
            assert not auth.allowed(alice, Operation.READ, TOPIC, "orders")
        assert not auth.allowed(alice, Operation.READ, TOPIC, "orders", quietly=True)
    assert auth._on_denied == [(TOPIC, Operation.READ)] * 3
    assert len([r for r in caplog.records if "denied" in r.message]) == 1


def test_decisions_follow_new_bindings():
    auth = authorizer([])
    assert not auth.allowed(connection(), Operation.READ, TOPIC, "orders")
    auth.use([acl("orders", Operation.READ)])
    assert auth.allowed(connection(), Operation.READ, TOPIC, "orders")
    auth.use([])
    assert not auth.allowed(connection(), Operation.READ, TOPIC, "orders")


def test_allowed_somewhere():
    auth = authorizer([acl("team-a.", Operation.WRITE, pattern=PREFIXED)])
    assert auth.allowed_somewhere(connection(), Operation.WRITE, TOPIC)
    assert not auth.allowed_somewhere(connection("bob"), Operation.WRITE, TOPIC)
    denied_everywhere = authorizer([acl("team-a.", Operation.WRITE, pattern=PREFIXED),
                                    acl("*", Operation.WRITE, DENY)])
    assert not denied_everywhere.allowed_somewhere(connection(), Operation.WRITE, TOPIC)


def test_authorized_operations_bit_field():
    auth = authorizer([acl("orders", Operation.READ)])
    assert auth.authorized_operations(connection(), TOPIC, "orders") == bit_field(
        [Operation.READ, Operation.DESCRIBE])
    disabled = Authorizer({"authorizer.class.name": "", "super.users": "",
                           "allow.everyone.if.no.acl.found": False}, acls=None, on_denied=Denials())
    assert disabled.authorized_operations(connection(), GROUP, "g") == bit_field(SUPPORTED_OPERATIONS[GROUP])
    assert disabled.allowed(connection(), Operation.DELETE, TOPIC, "anything")


@pytest.mark.parametrize("acl_filter,matched", [
    (AclFilter(), {"orders", "team-a.", "*"}),
    (AclFilter(name="orders"), {"orders"}),
    (AclFilter(pattern=PREFIXED), {"team-a."}),
    (AclFilter(name="team-a.x", pattern=PatternType.MATCH), {"team-a.", "*"}),
    (AclFilter(name="orders", pattern=PatternType.MATCH), {"orders", "*"}),
    (AclFilter(principal="User:bob"), set()),
    (AclFilter(operation=Operation.WRITE), {"team-a."}),
    (AclFilter(resource_type=GROUP), set()),
])
def test_filters(acl_filter, matched):
    bindings = [acl("orders", Operation.READ), acl("team-a.", Operation.WRITE, pattern=PREFIXED),
                acl("*", Operation.DESCRIBE)]
    assert {b.name for b in bindings if acl_filter.matches(b)} == matched


@pytest.mark.parametrize("binding", [
    acl("orders", Operation.ANY),
    acl("orders", Operation.READ, Permission.ANY),
    acl("orders", Operation.READ, pattern=PatternType.MATCH),
    acl("", Operation.READ),
    acl("my-cluster", Operation.ALTER, resource_type=CLUSTER),
    acl("orders", Operation.READ, principal="alice"),
    acl("orders", Operation.READ, resource_type=ResourceType.ANY),
])
def test_invalid_bindings_are_refused(binding):
    assert invalid_acl(binding)


def test_a_prefixed_star_is_a_valid_binding_for_names_that_start_with_a_star():
    """Kafka 4.4 creates it (found by the conformance suite): '*' is a plain character in a prefix."""
    binding = acl("*", Operation.READ, pattern=PREFIXED)
    assert invalid_acl(binding) is None
    auth = authorizer([binding])
    assert auth.allowed(connection(), Operation.READ, TOPIC, "*orders")
    assert not auth.allowed(connection(), Operation.READ, TOPIC, "orders")


async def test_store_round_trip_and_watch(tmp_path):
    metadata = EmbeddedMetadataStore(str(tmp_path / "m.sqlite"))
    store = AclStore(metadata)
    changed = asyncio.Event()
    store.watch(changed.set)
    odd = acl("group/with:odd%chars", Operation.READ, resource_type=GROUP)
    bindings = [acl("orders", Operation.READ), acl("orders", Operation.WRITE), odd,
                acl("team-a.", Operation.ALL, DENY, pattern=PREFIXED)]
    await store.add(bindings)
    await asyncio.wait_for(changed.wait(), 5)
    assert sorted(map(repr, await store.load())) == sorted(map(repr, bindings))
    await store.add(bindings[:1])  # adding what is there changes nothing
    assert len(await store.load()) == 4
    changed.clear()
    removed = await store.remove([AclFilter(name="orders", operation=Operation.WRITE), AclFilter(resource_type=GROUP)])
    assert removed == [[bindings[1]], [odd]]
    await asyncio.wait_for(changed.wait(), 5)
    assert sorted(map(repr, await store.load())) == sorted(map(repr, [bindings[0], bindings[3]]))
    assert await metadata.children("/acls/GROUP/LITERAL") == []  # an emptied pattern's node goes
