"""Authorization with real clients: Kafka's ACL authorizer turned on, users over SASL.

admin is a super user; alice and bob start with no ACLs. Bindings are made with
confluent-kafka's AdminClient (CreateAcls/DescribeAcls/DeleteAcls), and their effect is
checked with confluent-kafka, the Java client, and an 0.10-generation client that logs
in with SaslHandshake v0 and raw tokens.
"""
import json
import subprocess
import sys
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicCollection
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kafka import KafkaProducer
from kafka.errors import TopicAuthorizationFailedError
from kafka.protocol.admin import DeleteTopicsRequest, DescribeClusterRequest
from kafka.protocol.admin.acl import CreateAclsRequest, DescribeAclsRequest
from kafka.protocol.api_key import ApiKey
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

from kgate.metadata.acls import Operation, Permission
from kgate.metadata.acls import PatternType as Pattern
from kgate.metadata.acls import ResourceType as Kind
from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.messages import (
    AlterShareGroupOffsetsRequest,
    ConsumerGroupHeartbeatRequest,
    DeleteShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequest,
    ShareGroupHeartbeatRequest,
    StreamsGroupHeartbeatRequest,
)
from tests.support.clients import UserDirectories
from tests.support.compat_matrix import clients
from tests.support.member_process import wait_for
from tests.support.wire import Wire, connect, encode_request, read_response

PASSWORDS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
TIMEOUT = 30


def kgate(*args, check=True) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kgate", *args], capture_output=True, text=True, timeout=60,
                          check=check)


@pytest.fixture(scope="module")
def users(tmp_path_factory) -> UserDirectories:
    return UserDirectories(tmp_path_factory.mktemp("users"), PASSWORDS)


@pytest.fixture
def secured(broker_factory, tmp_path, users):
    users.make(str(tmp_path / "secured"))
    return broker_factory("secured", listeners=("SASL_PLAINTEXT",),
                          **{"authorizer.class.name": "acl", "super.users": "User:admin"})


def login(user):
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": user,
            "sasl.password": PASSWORDS[user]}


def admin_client(broker, user="admin") -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.address("SASL_PLAINTEXT"), **login(user)})


def allow(principal, resource_type, name, operation, pattern=ResourcePatternType.LITERAL) -> AclBinding:
    return AclBinding(resource_type, name, pattern, principal, "*", operation, AclPermissionType.ALLOW)


def create_topic(admin: AdminClient, name: str, config: dict | None = None) -> None:
    admin.create_topics([NewTopic(name, 1, 1, config=config or {})])[name].result(TIMEOUT)


def produce(broker, user, topic, count=5) -> list:
    """Deliver ``count`` records as ``user``; the delivery errors (empty when all went)."""
    producer = Producer({"bootstrap.servers": broker.address("SASL_PLAINTEXT"), "message.timeout.ms": 10_000,
                         **login(user)})
    errors = []
    for i in range(count):
        producer.produce(topic, value=b"v%d" % i, on_delivery=lambda e, _m: e and errors.append(e.code()))
    producer.flush(TIMEOUT)
    return errors


def read(broker, user, topic, count, group) -> list:
    """``count`` records of ``topic`` read in ``group``, or the first error the consumer reports."""
    consumer = Consumer({"bootstrap.servers": broker.address("SASL_PLAINTEXT"), "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False, **login(user)})
    consumer.subscribe([topic])
    got: list = []
    try:
        def done():
            for message in consumer.consume(count, timeout=0.5):
                got.append(message.error().code() if message.error() else message.value())
            return len(got) >= count or any(isinstance(g, int) for g in got)
        wait_for(done, TIMEOUT, f"{count} records or an error for {user}")
    finally:
        consumer.close()
    return got


def logged_in(broker, user) -> Wire:
    """A raw connection on the SASL listener, logged in as ``user`` with PLAIN."""
    wire = Wire(broker.address("SASL_PLAINTEXT"))
    assert wire.call(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == ErrorCode.NONE
    token = f"\x00{user}\x00{PASSWORDS[user]}".encode()
    assert wire.call(SaslAuthenticateRequest(auth_bytes=token), 1).error_code == ErrorCode.NONE
    return wire


def grant(admin: AdminClient, *bindings: AclBinding) -> None:
    for future in admin.create_acls(list(bindings)).values():
        future.result(TIMEOUT)


def test_a_user_without_acls_gets_topic_authorization_failed(secured):
    admin = admin_client(secured)
    create_topic(admin, "orders")
    assert produce(secured, "alice", "orders") == [KafkaError.TOPIC_AUTHORIZATION_FAILED] * 5
    assert read(secured, "alice", "orders", 1, "alice.readers") == [KafkaError.GROUP_AUTHORIZATION_FAILED]
    grant(admin, allow("User:alice", ResourceType.GROUP, "alice.readers", AclOperation.READ))
    assert read(secured, "alice", "orders", 1, "alice.readers") == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    assert "orders" not in admin_client(secured, "alice").list_topics(timeout=TIMEOUT).topics
    assert produce(secured, "admin", "orders") == []  # a super user needs no ACL


def test_acls_made_with_the_admin_client_take_effect_at_once(secured):
    admin = admin_client(secured)
    create_topic(admin, "orders")
    bindings = [allow("User:alice", ResourceType.TOPIC, "orders", AclOperation.WRITE),
                allow("User:alice", ResourceType.TOPIC, "ord", AclOperation.READ, ResourcePatternType.PREFIXED),
                allow("User:alice", ResourceType.GROUP, "team-a.", AclOperation.READ, ResourcePatternType.PREFIXED)]
    grant(admin, *bindings)
    described = admin.describe_acls(AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, "User:alice",
                                                     None, AclOperation.ANY, AclPermissionType.ANY)).result(TIMEOUT)
    assert sorted(map(str, described)) == sorted(map(str, bindings))
    matching = admin.describe_acls(AclBindingFilter(ResourceType.TOPIC, "orders", ResourcePatternType.MATCH, None,
                                                    None, AclOperation.ANY, AclPermissionType.ANY)).result(TIMEOUT)
    assert sorted(map(str, matching)) == sorted(map(str, bindings[:2]))

    assert produce(secured, "alice", "orders") == []
    assert read(secured, "alice", "orders", 5, "team-a.readers") == [b"v%d" % i for i in range(5)]
    assert read(secured, "alice", "orders", 1, "team-b.readers") == [KafkaError.GROUP_AUTHORIZATION_FAILED]

    write_filter = AclBindingFilter(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, "User:alice", "*",
                                    AclOperation.WRITE, AclPermissionType.ALLOW)
    deleted = admin.delete_acls([write_filter])[write_filter].result(TIMEOUT)
    assert list(map(str, deleted)) == [str(bindings[0])]
    assert produce(secured, "alice", "orders", 1) == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    assert read(secured, "alice", "orders", 5, "team-a.readers2") == [b"v%d" % i for i in range(5)]


def test_alice_cannot_read_alter_or_delete_what_belongs_to_bob(secured):
    """The finding that opened the issue: alice read bob's topic, changed its retention.ms,
    deleted bob's group and then the topic."""
    admin = admin_client(secured)
    create_topic(admin, "bob.orders", {"retention.ms": "86400000"})
    grant(admin, allow("User:bob", ResourceType.TOPIC, "bob.", AclOperation.ALL, ResourcePatternType.PREFIXED),
          allow("User:bob", ResourceType.GROUP, "bob.", AclOperation.ALL, ResourcePatternType.PREFIXED),
          allow("User:alice", ResourceType.GROUP, "alice.", AclOperation.READ, ResourcePatternType.PREFIXED))
    assert produce(secured, "bob", "bob.orders") == []
    assert read(secured, "bob", "bob.orders", 5, "bob.readers") == [b"v%d" % i for i in range(5)]

    alice = admin_client(secured, "alice")
    assert read(secured, "alice", "bob.orders", 1, "alice.readers") == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    resource = ConfigResource(ConfigResource.Type.TOPIC, "bob.orders", incremental_configs=[
        ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as altered:
        alice.incremental_alter_configs([resource])[resource].result(TIMEOUT)
    assert altered.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    with pytest.raises(KafkaException) as group_deleted:
        alice.delete_consumer_groups(["bob.readers"])["bob.readers"].result(TIMEOUT)
    assert group_deleted.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    with pytest.raises(KafkaException) as topic_deleted:
        alice.delete_topics(["bob.orders"])["bob.orders"].result(TIMEOUT)
    assert topic_deleted.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    # Nothing of bob's changed.
    described = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "bob.orders")])
    configs = next(iter(described.values())).result(TIMEOUT)
    assert configs["retention.ms"].value == "86400000"
    assert admin.list_consumer_groups().result(TIMEOUT).valid and "bob.readers" in {
        g.group_id for g in admin.list_consumer_groups().result(TIMEOUT).valid}
    assert {g.group_id for g in alice.list_consumer_groups().result(TIMEOUT).valid} <= {"alice.readers"}
    assert read(secured, "bob", "bob.orders", 5, "bob.again") == [b"v%d" % i for i in range(5)]


def test_the_java_client_and_an_sasl_v0_client_meet_the_same_checks(secured):
    admin = admin_client(secured)
    for name in ("open", "closed"):
        create_topic(admin, name)
    grant(admin, allow("User:alice", ResourceType.TOPIC, "open", AclOperation.WRITE))
    bootstrap = secured.address("SASL_PLAINTEXT")

    java = clients.Java()
    sasl = clients.Sasl("SCRAM-SHA-256", "alice", PASSWORDS["alice"])
    java.produce(bootstrap, "open", 3, sasl=sasl)
    with pytest.raises(clients.DriverFailed, match="TopicAuthorizationException"):
        java.produce(bootstrap, "closed", 3, sasl=sasl)

    # kafka-python pinned to 0.10.0 sends SaslHandshake v0 and then raw SASL frames.
    producer = KafkaProducer(bootstrap_servers=bootstrap, api_version=(0, 10, 0), security_protocol="SASL_PLAINTEXT",
                             sasl_mechanism="PLAIN", sasl_plain_username="alice",
                             sasl_plain_password=PASSWORDS["alice"], max_block_ms=TIMEOUT * 1000, retries=0)
    try:
        producer.send("open", b"old").get(TIMEOUT)
        with pytest.raises(TopicAuthorizationFailedError):
            producer.send("closed", b"old").get(TIMEOUT)
    finally:
        producer.close(5)


@pytest.mark.parametrize("version", [0, 1, 3])
def test_acl_apis_answer_security_disabled_without_an_authorizer(broker, version):
    """As Kafka answers (librdkafka's AdminClient reports it as an empty result, so the wire is read)."""
    sock = connect(broker.bootstrap)
    try:
        sock.sendall(encode_request(DescribeAclsRequest(
            resource_type_filter=Kind.ANY, resource_name_filter=None, pattern_type_filter=Pattern.ANY,
            principal_filter=None, host_filter=None, operation=Operation.ANY, permission_type=Permission.ANY), version))
        assert read_response(sock, ApiKey.DescribeAcls, version, 1).error_code == KafkaError.SECURITY_DISABLED
        sock.sendall(encode_request(CreateAclsRequest(creations=[CreateAclsRequest.AclCreation(
            resource_type=Kind.TOPIC, resource_name="t", resource_pattern_type=Pattern.LITERAL, principal="User:x",
            host="*", operation=Operation.READ, permission_type=Permission.ALLOW)]), version, 2))
        result = read_response(sock, ApiKey.CreateAcls, version, 2).results[0]
        assert result.error_code == KafkaError.SECURITY_DISABLED
    finally:
        sock.close()


def test_kgate_acls_cli_with_kafka_acls_flags(secured):
    def cli(user, *args, check=True):
        return kgate("acls", *args, "--bootstrap-server", secured.address("SASL_PLAINTEXT"),
                     "--security-protocol", "SASL_PLAINTEXT", "--sasl-mechanism", "SCRAM-SHA-512",
                     "--sasl-username", user, "--sasl-password", PASSWORDS[user], check=check)

    added = cli("admin", "add", "--allow-principal", "User:alice", "--operation", "Read", "--operation", "Describe",
                "--topic", "sales.", "--resource-pattern-type", "prefixed")
    assert added.stdout.count("added: ALLOW User:alice") == 2
    cli("admin", "add", "--consumer", "--allow-principal", "User:bob", "--topic", "sales.eu", "--group", "reports")
    cli("admin", "add", "--deny-principal", "User:bob", "--deny-host", "10.1.2.3", "--operation", "All", "--cluster")

    listed = json.loads(cli("admin", "list", "--output", "json").stdout)
    assert {(a["resource_type"], a["name"], a["pattern"], a["principal"], a["host"], a["operation"], a["permission"])
            for a in listed} == {
        ("TOPIC", "sales.", "PREFIXED", "User:alice", "*", "READ", "ALLOW"),
        ("TOPIC", "sales.", "PREFIXED", "User:alice", "*", "DESCRIBE", "ALLOW"),
        ("TOPIC", "sales.eu", "LITERAL", "User:bob", "*", "READ", "ALLOW"),
        ("TOPIC", "sales.eu", "LITERAL", "User:bob", "*", "DESCRIBE", "ALLOW"),
        ("GROUP", "reports", "LITERAL", "User:bob", "*", "READ", "ALLOW"),
        ("CLUSTER", "kafka-cluster", "LITERAL", "User:bob", "10.1.2.3", "ALL", "DENY")}
    # --resource-pattern-type match lists what applies to one topic: alice's prefix and bob's literal.
    matching = json.loads(cli("admin", "list", "--topic", "sales.eu", "--resource-pattern-type", "match",
                              "--output", "json").stdout)
    assert {a["principal"] for a in matching} == {"User:alice", "User:bob"}

    refused = cli("alice", "add", "--allow-principal", "User:alice", "--operation", "All", "--cluster", check=False)
    assert refused.returncode == 1 and "CLUSTER_AUTHORIZATION_FAILED" in refused.stderr

    removed = cli("admin", "remove", "--topic", "sales.", "--resource-pattern-type", "prefixed")
    assert removed.stdout.count("removed: ALLOW User:alice") == 2
    assert {a["principal"] for a in json.loads(cli("admin", "list", "--output", "json").stdout)} == {"User:bob"}
    usage = cli("admin", "add", "--topic", "t", "--operation", "Reed", "--allow-principal", "User:x", check=False)
    assert usage.returncode == 2 and "unknown --operation 'Reed'" in usage.stderr


def test_anyone_may_describe_the_cluster_and_learns_no_operations_without_describe(secured):
    """As Kafka answers: DescribeCluster needs no permission; without DESCRIBE on the cluster
    its authorized operations are none (kgate refused it with CLUSTER_AUTHORIZATION_FAILED).
    Raw requests: librdkafka's describe_cluster asks Metadata instead."""
    with Wire(secured.address("SASL_PLAINTEXT")) as wire:
        assert wire.call(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
        token = b"\0bob\0" + PASSWORDS["bob"].encode()
        assert wire.call(SaslAuthenticateRequest(auth_bytes=token), 2).error_code == 0
        cluster = wire.call(DescribeClusterRequest(include_cluster_authorized_operations=True), 0)
    assert cluster.error_code == 0 and [b.broker_id for b in cluster.brokers] == [0]
    assert not cluster.authorized_operations


def test_authorized_operations_are_the_allowed_ones(secured):
    admin = admin_client(secured)
    create_topic(admin, "orders")
    grant(admin, allow("User:alice", ResourceType.TOPIC, "orders", AclOperation.READ),
          # librdkafka names the cluster resource BROKER (Kafka's code 4, CLUSTER).
          allow("User:alice", ResourceType.BROKER, "kafka-cluster", AclOperation.DESCRIBE))
    alice = admin_client(secured, "alice")
    topic = alice.describe_topics(TopicCollection(["orders"]), include_authorized_operations=True)["orders"]
    assert set(topic.result(TIMEOUT).authorized_operations) == {AclOperation.READ, AclOperation.DESCRIBE}
    cluster = alice.describe_cluster(include_authorized_operations=True).result(TIMEOUT)
    assert set(cluster.authorized_operations) == {AclOperation.DESCRIBE}
    everything = admin.describe_topics(TopicCollection(["orders"]), include_authorized_operations=True)["orders"]
    assert {AclOperation.WRITE, AclOperation.DELETE, AclOperation.ALTER_CONFIGS} <= set(
        everything.result(TIMEOUT).authorized_operations)


def test_a_consumer_group_heartbeat_naming_a_topic_the_member_may_not_describe_is_refused(secured):
    """Kafka fails the heartbeat with TOPIC_AUTHORIZATION_FAILED while any named topic is not
    describable, whether or not it exists (the member was accepted and assigned the others)."""
    admin = admin_client(secured)
    for topic in ("shared", "secret"):
        create_topic(admin, topic)
    grant(admin, allow("User:alice", ResourceType.GROUP, "alice.new", AclOperation.READ),
          allow("User:alice", ResourceType.TOPIC, "shared", AclOperation.READ))

    def heartbeat(wire, topics):
        return wire.call(ConsumerGroupHeartbeatRequest(
            group_id="alice.new", member_id=str(uuid.uuid4()), member_epoch=0, rebalance_timeout_ms=30_000,
            subscribed_topic_names=topics, topic_partitions=[]), 0)
    with logged_in(secured, "alice") as wire:
        for topics in (["shared", "missing", "secret"], ["shared", "secret"], ["shared", "missing"]):
            refused = heartbeat(wire, topics)
            assert (refused.error_code, refused.assignment) == (ErrorCode.TOPIC_AUTHORIZATION_FAILED, None), topics
        accepted = heartbeat(wire, ["shared"])
        assert accepted.error_code == ErrorCode.NONE and accepted.member_epoch == 1


def test_a_topic_id_does_not_reveal_the_name_of_a_topic_the_user_may_not_describe(secured):
    """Kafka answers TOPIC_AUTHORIZATION_FAILED with the name null and the id kept (an id is not
    sensitive, a name is), for Metadata and DeleteTopics by id."""
    admin = admin_client(secured)
    create_topic(admin, "secret")
    with logged_in(secured, "admin") as wire:
        [described] = wire.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="secret")],
                                                allow_auto_topic_creation=False), 12).topics
    secret_id, unknown_id = described.topic_id, uuid.uuid4()

    def by_id(wire, *ids):
        return [(t.error_code, t.name, t.topic_id) for t in wire.call(MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(topic_id=i, name=None) for i in ids],
            allow_auto_topic_creation=False), 12).topics]

    def delete_by_id(wire, topic_id):
        [result] = wire.call(DeleteTopicsRequest(topics=[DeleteTopicsRequest.DeleteTopicState(
            name=None, topic_id=topic_id)], timeout_ms=10_000), 6).responses
        return result.error_code, result.name, result.topic_id
    with logged_in(secured, "alice") as wire:
        assert by_id(wire, secret_id, unknown_id) == [(ErrorCode.TOPIC_AUTHORIZATION_FAILED, None, secret_id),
                                                      (ErrorCode.UNKNOWN_TOPIC_ID, None, unknown_id)]
        assert delete_by_id(wire, secret_id) == (ErrorCode.TOPIC_AUTHORIZATION_FAILED, None, secret_id)
        grant(admin, allow("User:alice", ResourceType.TOPIC, "secret", AclOperation.DESCRIBE))
        assert delete_by_id(wire, secret_id) == (ErrorCode.TOPIC_AUTHORIZATION_FAILED, "secret", secret_id), \
            "may describe, may not delete: the name is hers to know"
        [(error, name, topic_id)] = by_id(wire, secret_id)
        assert (error, name, topic_id) == (ErrorCode.NONE, "secret", secret_id)


def test_the_share_group_offsets_apis_check_kafkas_acls(secured):
    """DescribeShareGroupOffsets wants Describe on the group and each topic, AlterShareGroupOffsets
    Read on both, DeleteShareGroupOffsets Delete on the group and Read on each topic (Kafka's
    KafkaApis); a refused topic is answered per topic or partition, the others go on."""
    admin = admin_client(secured)
    create_topic(admin, "queue")
    D, A, X = DescribeShareGroupOffsetsRequest, AlterShareGroupOffsetsRequest, DeleteShareGroupOffsetsRequest

    def describe(wire):
        [group] = wire.call(D(groups=[D.DescribeShareGroupOffsetsRequestGroup(group_id="work", topics=[
            D.DescribeShareGroupOffsetsRequestGroup.DescribeShareGroupOffsetsRequestTopic(
                topic_name="queue", partitions=[0])])]), 1).groups
        parts = [(p.error_code, p.start_offset) for t in group.topics for p in t.partitions]
        return group.error_code, parts

    def alter(wire, offset):
        answer = wire.call(A(group_id="work", topics=[A.AlterShareGroupOffsetsRequestTopic(
            topic_name="queue", partitions=[A.AlterShareGroupOffsetsRequestTopic.AlterShareGroupOffsetsRequestPartition(
                partition_index=0, start_offset=offset)])]), 0)
        return answer.error_code, [p.error_code for t in answer.responses for p in t.partitions]

    def delete(wire):
        answer = wire.call(X(group_id="work", topics=[X.DeleteShareGroupOffsetsRequestTopic(topic_name="queue")]), 0)
        return answer.error_code, [t.error_code for t in answer.responses]

    with logged_in(secured, "alice") as wire:
        refused = ErrorCode.GROUP_AUTHORIZATION_FAILED
        assert (describe(wire), alter(wire, 3), delete(wire)) == ((refused, []), (refused, []), (refused, []))
        grant(admin, allow("User:alice", ResourceType.GROUP, "work", AclOperation.DESCRIBE))
        assert describe(wire) == (ErrorCode.NONE, [(ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1)])
        assert alter(wire, 3) == (refused, [])
        # A member with Read on the group and Describe on the topic joins and leaves: the group is empty.
        grant(admin, allow("User:alice", ResourceType.GROUP, "work", AclOperation.READ),
              allow("User:alice", ResourceType.TOPIC, "queue", AclOperation.DESCRIBE))
        for epoch in (0, -1):
            beat = wire.call(ShareGroupHeartbeatRequest(group_id="work", member_id="m" * 22, member_epoch=epoch,
                                                        rack_id=None, subscribed_topic_names=["queue"]), 1)
            assert beat.error_code == ErrorCode.NONE, beat
        assert describe(wire) == (ErrorCode.NONE, [(ErrorCode.NONE, -1)])
        assert alter(wire, 3) == (ErrorCode.NONE, [ErrorCode.TOPIC_AUTHORIZATION_FAILED])
        grant(admin, allow("User:alice", ResourceType.TOPIC, "queue", AclOperation.READ))
        assert alter(wire, 3) == (ErrorCode.NONE, [ErrorCode.NONE])
        assert describe(wire) == (ErrorCode.NONE, [(ErrorCode.NONE, 3)])
        assert delete(wire) == (refused, [])
        grant(admin, allow("User:alice", ResourceType.GROUP, "work", AclOperation.DELETE))
        assert delete(wire) == (ErrorCode.NONE, [ErrorCode.NONE])
        assert describe(wire) == (ErrorCode.NONE, [(ErrorCode.NONE, -1)])


def test_a_streams_group_heartbeat_checks_kafkas_acls_and_creates_only_internal_topics_it_may(secured):
    """Read on the group, Describe on every topic the topology names (else
    TOPIC_AUTHORIZATION_FAILED), and the internal topics the broker would create for the group
    made only with Create on the cluster or on the topic: until then the status says which it
    may not create, as Kafka's KafkaApis does."""
    admin = admin_client(secured)
    create_topic(admin, "clicks")
    H = StreamsGroupHeartbeatRequest
    T = H.Topology.Subtopology
    topology = H.Topology(epoch=0, subtopologies=[T(
        subtopology_id="0", source_topics=["clicks"], source_topic_regex=[], repartition_sink_topics=[],
        repartition_source_topics=[], copartition_groups=[],
        state_changelog_topics=[T.TopicInfo(name="app-store-changelog", partitions=0, replication_factor=0,
                                            topic_configs=[T.TopicInfo.KeyValue(key="cleanup.policy",
                                                                                value="compact")])])])

    def join(wire):
        return wire.call(H(group_id="app", member_id="member-1", member_epoch=0, endpoint_information_epoch=0,
                           rebalance_timeout_ms=30_000, topology=topology, active_tasks=[], standby_tasks=[],
                           warmup_tasks=[], process_id="process-1"), 0)

    with logged_in(secured, "alice") as wire:
        assert join(wire).error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
        grant(admin, allow("User:alice", ResourceType.GROUP, "app", AclOperation.READ))
        assert join(wire).error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        grant(admin, allow("User:alice", ResourceType.TOPIC, "clicks", AclOperation.DESCRIBE),
              allow("User:alice", ResourceType.TOPIC, "app-store-changelog", AclOperation.DESCRIBE))
        joined = join(wire)
        assert joined.error_code == ErrorCode.NONE, joined
        assert [s.status_detail for s in joined.status][-1] == "Unauthorized to CREATE on topics app-store-changelog."
        assert "app-store-changelog" not in admin.list_topics(timeout=30).topics
        grant(admin, allow("User:alice", ResourceType.TOPIC, "app-store-changelog", AclOperation.CREATE))
        assert join(wire).error_code == ErrorCode.NONE
        assert "app-store-changelog" in admin.list_topics(timeout=30).topics
        config = admin.describe_configs([ConfigResource("TOPIC", "app-store-changelog")])
        assert [f.result(timeout=30)["cleanup.policy"].value for f in config.values()] == ["compact"]
