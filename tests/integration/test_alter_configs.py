"""AlterConfigs and IncrementalAlterConfigs: what changes, what is refused, what survives.

Every change is read back with DescribeConfigs (value and source), every refusal is
checked to have changed nothing, and the live partitions are checked to roll and trim
their ledgers by the new values. Malformed requests that real clients refuse to send
go over a raw connection.
"""
import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)
from kafka.protocol.admin import (
    AlterConfigsRequest,
    DeleteTopicsRequest,
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
)

from kgate.gateway.config import BROKER_SETTINGS
from kgate.gateway.setting_docs import SETTING_DOCS
from kgate.protocol.error_codes import ErrorCode
from tests.support.clients import create_topic
from tests.support.member_process import wait_for
from tests.support.wire import Wire

TOPIC = "configured"
DEFAULT_RETENTION_MS = str(BROKER_SETTINGS["log.retention.ms"][0])
SET, DELETE, APPEND, SUBTRACT = (AlterConfigOpType.SET, AlterConfigOpType.DELETE, AlterConfigOpType.APPEND,
                                 AlterConfigOpType.SUBTRACT)
# Legacy AlterConfigs is deprecated in clients, and exactly what some of these tests exercise.
pytestmark = pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")


def admin(broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def described(client: AdminClient, topic: str = TOPIC) -> dict[str, tuple[str, ConfigSource]]:
    resource = ConfigResource(ResourceType.TOPIC, topic)
    entries = client.describe_configs([resource])[resource].result(timeout=30)
    return {name: (entry.value, ConfigSource(entry.source)) for name, entry in entries.items()}


def dynamic(client: AdminClient, topic: str = TOPIC) -> dict[str, str]:
    return {name: value for name, (value, source) in described(client, topic).items()
            if source == ConfigSource.DYNAMIC_TOPIC_CONFIG}


def incremental(client: AdminClient, resource_name: str, *ops, validate_only=False, kind=ResourceType.TOPIC):
    """Apply ``(config, op, value)`` triples to one resource; return its error code (0 on success)."""
    resource = ConfigResource(kind, resource_name, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=op) for name, op, value in ops])
    future = client.incremental_alter_configs([resource], validate_only=validate_only)[resource]
    return _error_of(future)


def replace(client: AdminClient, resource_name: str, configs: dict, validate_only=False, kind=ResourceType.TOPIC):
    """Legacy AlterConfigs; return the resource's error code (0 on success)."""
    resource = ConfigResource(kind, resource_name, set_config=configs)
    return _error_of(client.alter_configs([resource], validate_only=validate_only)[resource])


def _error_of(future) -> int:
    try:
        future.result(timeout=30)
        return ErrorCode.NONE
    except KafkaException as exc:
        return exc.args[0].code()


def test_incremental_set_delete_append_subtract(broker):
    create_topic(broker.bootstrap, TOPIC, 1, {"retention.ms": "86400000"})
    client = admin(broker)
    assert incremental(client, TOPIC, ("segment.bytes", SET, "2097152"), ("compression.type", SET, "gzip"),
                       ("retention.ms", DELETE, None), ("cleanup.policy", APPEND, "compact")) == ErrorCode.NONE
    assert dynamic(client) == {"segment.bytes": "2097152", "compression.type": "gzip",
                               "cleanup.policy": "delete,compact"}
    assert described(client)["retention.ms"] == (DEFAULT_RETENTION_MS, ConfigSource.DEFAULT_CONFIG)

    assert incremental(client, TOPIC, ("cleanup.policy", SUBTRACT, "delete")) == ErrorCode.NONE
    assert described(client)["cleanup.policy"] == ("compact", ConfigSource.DYNAMIC_TOPIC_CONFIG)
    # Appending what is there already adds nothing.
    assert incremental(client, TOPIC, ("cleanup.policy", APPEND, "compact")) == ErrorCode.NONE
    assert described(client)["cleanup.policy"] == ("compact", ConfigSource.DYNAMIC_TOPIC_CONFIG)

    before = dynamic(client)
    # Subtracting the last policy leaves no valid value; list operations need a list config.
    assert incremental(client, TOPIC, ("cleanup.policy", SUBTRACT, "compact")) == ErrorCode.INVALID_CONFIG
    assert incremental(client, TOPIC, ("retention.ms", APPEND, "5")) == ErrorCode.INVALID_CONFIG
    assert incremental(client, TOPIC, ("segment.bytes", SUBTRACT, "5")) == ErrorCode.INVALID_CONFIG
    # DELETE of a config never set, and of every set one: back to defaults.
    assert incremental(client, TOPIC, ("segment.ms", DELETE, None)) == ErrorCode.NONE
    assert dynamic(client) == before
    assert incremental(client, TOPIC, *[(name, DELETE, None) for name in before]) == ErrorCode.NONE
    assert dynamic(client) == {}


def test_legacy_alter_configs_replaces_the_whole_set(broker):
    from kafka import KafkaAdminClient
    from kafka.admin import ConfigResource as KafkaPythonResource

    create_topic(broker.bootstrap, TOPIC, 1, {"retention.ms": "86400000", "segment.bytes": "2097152"})
    client = admin(broker)
    assert replace(client, TOPIC, {"max.message.bytes": "2000000"}) == ErrorCode.NONE
    assert dynamic(client) == {"max.message.bytes": "2000000"}
    assert described(client)["retention.ms"] == (DEFAULT_RETENTION_MS, ConfigSource.DEFAULT_CONFIG)
    assert replace(client, TOPIC, {}) == ErrorCode.NONE
    assert dynamic(client) == {}

    kafka_python = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        for incremental_api in (False, True):
            result = kafka_python.alter_configs(
                [KafkaPythonResource("TOPIC", TOPIC, configs={"retention.ms": str(3_600_000 + incremental_api)})],
                incremental=incremental_api)
            assert result == {"topic": {TOPIC: "OK"}}
            assert dynamic(client) == {"retention.ms": str(3_600_000 + incremental_api)}
    finally:
        kafka_python.close()


def test_refusals_change_nothing_and_hold_back_no_other_resource(broker):
    create_topic(broker.bootstrap, TOPIC, 1, {"retention.ms": "86400000"})
    create_topic(broker.bootstrap, "other", 1)
    client = admin(broker)
    kept = dynamic(client)

    assert incremental(client, TOPIC, ("retention.ms", SET, "1"), ("no.such.config", SET, "1")) \
        == ErrorCode.INVALID_CONFIG
    for bad in ("-5", "soon", ""):
        assert incremental(client, TOPIC, ("segment.bytes", SET, bad)) == ErrorCode.INVALID_CONFIG
        # The legacy API would otherwise have dropped retention.ms too.
        assert replace(client, TOPIC, {"segment.bytes": bad}) == ErrorCode.INVALID_CONFIG
    assert incremental(client, TOPIC, ("cleanup.policy", SET, "archive")) == ErrorCode.INVALID_CONFIG
    assert incremental(client, TOPIC, ("no.such.config", DELETE, None)) == ErrorCode.INVALID_CONFIG
    assert replace(client, TOPIC, {"no.such.config": "1"}) == ErrorCode.INVALID_CONFIG
    assert dynamic(client) == kept

    assert incremental(client, TOPIC, ("retention.ms", SET, "1"), validate_only=True) == ErrorCode.NONE
    assert replace(client, TOPIC, {}, validate_only=True) == ErrorCode.NONE
    assert incremental(client, TOPIC, ("segment.bytes", SET, "x"), validate_only=True) == ErrorCode.INVALID_CONFIG
    assert dynamic(client) == kept

    assert incremental(client, "absent", ("retention.ms", SET, "1")) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert replace(client, "absent", {"retention.ms": "1"}) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    offsets_before = dynamic(client, "__consumer_offsets")
    assert incremental(client, "__consumer_offsets", ("retention.ms", SET, "1")) == ErrorCode.POLICY_VIOLATION
    assert replace(client, "__consumer_offsets", {}) == ErrorCode.POLICY_VIOLATION
    assert dynamic(client, "__consumer_offsets") == offsets_before

    # A static broker setting is refused (dynamic ones: tests/integration/test_broker_configs.py).
    assert replace(client, "0", {"num.partitions": "3"}, kind=ResourceType.BROKER) == ErrorCode.INVALID_REQUEST
    assert replace(client, "0", {}, kind=ResourceType.BROKER) == ErrorCode.NONE

    # One request, two resources: the refused one does not hold back the other.
    good = ConfigResource(ResourceType.TOPIC, "other", incremental_configs=[
        ConfigEntry("retention.ms", "3600000", incremental_operation=SET)])
    bad = ConfigResource(ResourceType.TOPIC, TOPIC, incremental_configs=[
        ConfigEntry("retention.ms", "-7", incremental_operation=SET)])
    futures = client.incremental_alter_configs([bad, good])
    assert _error_of(futures[bad]) == ErrorCode.INVALID_CONFIG
    assert _error_of(futures[good]) == ErrorCode.NONE
    assert dynamic(client, "other") == {"retention.ms": "3600000"}
    assert dynamic(client) == kept


LegacyResource = AlterConfigsRequest.AlterConfigsResource
IncrementalResource = IncrementalAlterConfigsRequest.AlterConfigsResource


def legacy_resource(name, configs, kind=ResourceType.TOPIC.value):
    return LegacyResource(resource_type=kind, resource_name=name, configs=[
        LegacyResource.AlterableConfig(name=key, value=value) for key, value in configs])


def incremental_resource(name, ops, kind=ResourceType.TOPIC.value):
    return IncrementalResource(resource_type=kind, resource_name=name, configs=[
        IncrementalResource.AlterableConfig(name=key, config_operation=op, value=value) for key, op, value in ops])


@pytest.mark.parametrize("api,version", [("legacy", v) for v in range(3)] + [("incremental", v) for v in range(2)])
def test_malformed_resources_are_invalid_requests(broker, api, version):
    create_topic(broker.bootstrap, TOPIC, 1)
    create_topic(broker.bootstrap, "other", 1)
    if api == "legacy":
        request_class, resource = AlterConfigsRequest, legacy_resource
        malformed = [("twice", [("retention.ms", "1"), ("retention.ms", "2")]), ("null", [("retention.ms", None)])]
        good = legacy_resource("other", [("retention.ms", "3600000")])
    else:
        request_class, resource = IncrementalAlterConfigsRequest, incremental_resource
        malformed = [("twice", [("retention.ms", 0, "1"), ("retention.ms", 1, None)]),
                     ("null", [("retention.ms", 0, None)]), ("bad op", [("retention.ms", 7, "1")])]
        good = incremental_resource("other", [("retention.ms", 0, "3600000")])
    resources = [resource(TOPIC, configs) for _, configs in malformed]
    resources += [resource("x", [], kind=99), good]
    with Wire(broker.bootstrap) as wire:
        response = wire.call(request_class(resources=resources, validate_only=False), version)
        # The same resource twice: both refused.
        twice = wire.call(request_class(resources=[good, good], validate_only=False), version)
    codes = [(r.resource_name, r.error_code) for r in response.responses]
    assert codes == [(TOPIC, ErrorCode.INVALID_REQUEST)] * len(malformed) + \
        [("x", ErrorCode.INVALID_REQUEST), ("other", ErrorCode.NONE)], [r.error_message for r in response.responses]
    assert [r.error_code for r in twice.responses] == [ErrorCode.INVALID_REQUEST] * 2
    client = admin(broker)
    assert dynamic(client) == {}
    assert dynamic(client, "other") == {"retention.ms": "3600000"}


def test_altered_configs_survive_a_restart(broker):
    create_topic(broker.bootstrap, TOPIC, 2, {"retention.ms": "86400000"})
    create_topic(broker.bootstrap, "other", 1, {"segment.bytes": "2097152"})
    client = admin(broker)
    assert incremental(client, TOPIC, ("retention.ms", DELETE, None), ("segment.ms", SET, "60000"),
                       ("cleanup.policy", APPEND, "compact")) == ErrorCode.NONE
    assert replace(client, "other", {"max.message.bytes": "2000000"}) == ErrorCode.NONE
    expected = {TOPIC: dynamic(client), "other": dynamic(client, "other")}
    assert expected == {TOPIC: {"segment.ms": "60000", "cleanup.policy": "delete,compact"},
                        "other": {"max.message.bytes": "2000000"}}
    assert broker.stop() == 0
    broker.restart()
    client = admin(broker)
    assert {name: dynamic(client, name) for name in expected} == expected


def test_live_partition_rolls_and_trims_by_the_new_values(broker_factory):
    """segment.bytes small makes every produce start a ledger; retention.ms short then trims all
    but the open one. Without either taking effect live, the log start would stay at 0."""
    broker = broker_factory(**{"log.retention.check.interval.ms": 100})
    create_topic(broker.bootstrap, TOPIC, 1)
    client = admin(broker)
    assert incremental(client, TOPIC, ("segment.bytes", SET, "1000")) == ErrorCode.NONE
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 0})
    an_hour_ago = int(time.time() * 1000) - 3_600_000
    for i in range(5):
        producer.produce(TOPIC, value=b"v" * 2000, timestamp=an_hour_ago + i)
        assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused"})
    try:
        def log_start():
            return consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10)[0]
        assert consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10) == (0, 5)
        assert incremental(client, TOPIC, ("retention.ms", SET, "60000")) == ErrorCode.NONE
        # Five entries, one per ledger: the four sealed ones go, the open one stays.
        wait_for(lambda: log_start() == 4, 20, "retention to trim the sealed ledgers")
    finally:
        consumer.close()


KAFKA_ONLY_CONFIGS = {"delete.retention.ms": "3600000", "min.insync.replicas": "2", "min.compaction.lag.ms": "1000",
                      "unclean.leader.election.enable": "true", "message.downconversion.enable": "false"}


def test_kafkas_topic_configs_are_accepted_stored_and_described_with_their_types(broker):
    """What provisioning tools send on CreateTopics: stored as TOPIC_CONFIG, the rest DEFAULT_CONFIG;
    a bad value is INVALID_CONFIG naming the config, and changes nothing."""
    create_topic(broker.bootstrap, TOPIC, 1, KAFKA_ONLY_CONFIGS)
    client = admin(broker)
    assert dynamic(client) == KAFKA_ONLY_CONFIGS
    resource = ConfigResource(ResourceType.TOPIC, TOPIC)
    entries = client.describe_configs([resource])[resource].result(timeout=30)
    assert (entries["flush.messages"].value, ConfigSource(entries["flush.messages"].source)) == (
        str(2**63 - 1), ConfigSource.DEFAULT_CONFIG)

    future = client.incremental_alter_configs([ConfigResource(ResourceType.TOPIC, TOPIC, incremental_configs=[
        ConfigEntry("min.cleanable.dirty.ratio", "2", incremental_operation=SET)])])
    with pytest.raises(KafkaException) as refused:
        list(future.values())[0].result(timeout=30)
    error = refused.value.args[0]
    assert error.code() == ErrorCode.INVALID_CONFIG and "min.cleanable.dirty.ratio" in error.str()
    assert dynamic(client) == KAFKA_ONLY_CONFIGS


def test_every_described_config_written_back_with_message_format_version_confluent(broker):
    """What tools do to pin an old message format: describe, then AlterConfigs all of it plus
    message.format.version. kgate accepts it and describes it stored (and ignored, as Kafka 3.x)."""
    create_topic(broker.bootstrap, TOPIC, 1, {"retention.ms": "86400000"})
    client = admin(broker)
    everything = {name: value for name, (value, _source) in described(client).items()}
    assert replace(client, TOPIC, {**everything, "message.format.version": "0.10.2"}) == ErrorCode.NONE
    assert dynamic(client) == {**everything, "message.format.version": "0.10.2"}
    assert replace(client, TOPIC, {**everything, "message.format.version": "9.9"}) == ErrorCode.INVALID_CONFIG


def test_every_described_config_written_back_with_message_format_version_kafka_python(broker):
    """The same with kafka-python's admin client, which also reads Kafka's config types."""
    from kafka import KafkaAdminClient
    from kafka.admin import ConfigResource as KafkaPythonResource

    create_topic(broker.bootstrap, TOPIC, 1, {"retention.ms": "86400000"})
    kafka_python = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        described_all = kafka_python.describe_configs([KafkaPythonResource("TOPIC", TOPIC)], config_filter="all")
        entries = described_all["topic"][TOPIC]
        everything = {name: entry["value"] for name, entry in entries.items()}
        types = {name: entries[name]["config_type"] for name in (
            "min.cleanable.dirty.ratio", "segment.index.bytes", "preallocate", "cleanup.policy", "retention.ms")}
        assert types == {"min.cleanable.dirty.ratio": "DOUBLE", "segment.index.bytes": "INT",
                         "preallocate": "BOOLEAN", "cleanup.policy": "LIST", "retention.ms": "LONG"}
        result = kafka_python.alter_configs(
            [KafkaPythonResource("TOPIC", TOPIC, configs={**everything, "message.format.version": "2.8"})],
            incremental=False)
        assert result == {"topic": {TOPIC: "OK"}}
    finally:
        kafka_python.close()
    assert dynamic(admin(broker)) == {**everything, "message.format.version": "2.8"}


TOPIC_RESOURCE, BROKER = 2, 4  # DescribeConfigs resource types


def test_describe_configs_answers_documentation_when_asked(broker):
    """DescribeConfigs v3+ with include_documentation: each broker setting's text from the
    documentation site's table, each topic config what kgate does with it; none unasked."""
    create_topic(broker.bootstrap, "documented", 1)
    resources = [DescribeConfigsRequest.DescribeConfigsResource(resource_type=BROKER, resource_name="0",
                                                                configuration_keys=["log.retention.ms"]),
                 DescribeConfigsRequest.DescribeConfigsResource(resource_type=TOPIC_RESOURCE,
                                                                resource_name="documented",
                                                                configuration_keys=["flush.ms", "retention.ms"])]
    with Wire(broker.bootstrap) as wire:
        asked = wire.call(DescribeConfigsRequest(resources=resources, include_synonyms=False,
                                                 include_documentation=True), 4)
        unasked = wire.call(DescribeConfigsRequest(resources=resources, include_synonyms=False,
                                                   include_documentation=False), 4)
    docs = {c.name: c.documentation for result in asked.results for c in result.configs}
    assert docs["log.retention.ms"] == SETTING_DOCS["log.retention.ms"].text
    assert docs["retention.ms"] == "kgate: acts"
    assert docs["flush.ms"].startswith("kgate: accepted and ignored (") and "fsync" in docs["flush.ms"]
    assert all(c.documentation is None for result in unasked.results for c in result.configs)


def _synonyms(wire: Wire, resource_type: int, name: str, keys: list[str]) -> dict:
    """Each config's (value, source, read-only, [(synonym, value, source)]) as DescribeConfigs v4 answers."""
    result = wire.call(DescribeConfigsRequest(resources=[DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=resource_type, resource_name=name, configuration_keys=keys)], include_synonyms=True,
        include_documentation=False), 4).results[0]
    assert result.error_code == ErrorCode.NONE
    return {c.name: (c.value, c.config_source, c.read_only, [(s.name, s.value, s.source) for s in c.synonyms])
            for c in result.configs}


def test_synonyms_are_the_ones_kafka_lists(broker_factory):
    """Kafka 4.4's answer with the same server configuration (log.retention.minutes=60,
    log.roll.hours=24), as the conformance suite recorded it: a topic config's own value,
    then the layers of its broker setting from the setting itself on (so retention.ms and
    segment.ms, whose ms settings are set nowhere, list none although the minutes and hours
    give their values), Kafka's broker names for the settings kgate lacks, and nothing for a
    config Kafka gives no broker setting (or one without a default)."""
    broker = broker_factory(**{"log.retention.minutes": 60, "log.roll.hours": 24})
    create_topic(broker.bootstrap, "synonyms", 1, {"retention.ms": "86400000", "cleanup.policy": "compact"})
    long_max = str(2**63 - 1)
    with Wire(broker.bootstrap) as wire:
        topic = _synonyms(wire, TOPIC_RESOURCE, "synonyms", [
            "retention.ms", "segment.ms", "cleanup.policy", "flush.messages", "flush.ms", "segment.jitter.ms",
            "message.timestamp.after.max.ms", "leader.replication.throttled.replicas", "compression.gzip.level"])
        settings = _synonyms(wire, BROKER, "0", ["log.retention.ms", "log.retention.minutes", "log.retention.hours",
                                                 "log.roll.ms", "log.roll.hours", "delete.topic.enable",
                                                 "log.message.timestamp.after.max.ms"])
    static, default, own = 4, 5, 1
    assert topic == {
        "retention.ms": ("86400000", own, False, [("retention.ms", "86400000", own)]),
        "segment.ms": ("86400000", default, False, []),
        "cleanup.policy": ("compact", own, False, [("cleanup.policy", "compact", own),
                                                   ("log.cleanup.policy", "delete", default)]),
        "flush.messages": (long_max, default, False, [("log.flush.interval.messages", long_max, default)]),
        "flush.ms": (long_max, default, False, []),
        "segment.jitter.ms": ("0", default, False, []),
        "message.timestamp.after.max.ms": (long_max, default, False,
                                           [("log.message.timestamp.after.max.ms", long_max, default)]),
        "leader.replication.throttled.replicas": ("", default, False, []),
        "compression.gzip.level": ("-1", default, False, [("compression.gzip.level", "-1", default)]),
    }
    assert settings == {
        "log.retention.ms": (None, default, False, []),
        "log.retention.minutes": ("60", static, True, [("log.retention.minutes", "60", static),
                                                       ("log.retention.hours", "168", default)]),
        "log.retention.hours": ("168", default, True, [("log.retention.hours", "168", default)]),
        "log.roll.ms": (None, default, False, []),
        "log.roll.hours": ("24", static, True, [("log.roll.hours", "24", static), ("log.roll.hours", "168", default)]),
        "delete.topic.enable": ("true", default, True, [("delete.topic.enable", "true", default)]),
        "log.message.timestamp.after.max.ms": (long_max, default, False, [
            ("log.message.timestamp.after.max.ms", long_max, default)]),
    }


@pytest.mark.parametrize("version, error", [(2, ErrorCode.INVALID_REQUEST), (4, ErrorCode.TOPIC_DELETION_DISABLED)])
def test_delete_topic_enable_false_refuses_every_deletion(broker_factory, version, error):
    """Kafka's answer with delete.topic.enable=false: each topic refused, INVALID_REQUEST to
    clients older than TOPIC_DELETION_DISABLED (DeleteTopics v3); the topic stays."""
    broker = broker_factory(**{"delete.topic.enable": "false"})
    create_topic(broker.bootstrap, "kept", 1)
    with Wire(broker.bootstrap) as wire:
        answer = wire.call(DeleteTopicsRequest(topic_names=["kept", "never-created"], timeout_ms=30_000), version)
    assert [(r.name, r.error_code) for r in answer.responses] == [("kept", error), ("never-created", error)]
    assert "kept" in admin(broker).list_topics(timeout=30).topics
