"""Dynamic broker configs: kafka-configs --entity-type brokers --alter against kgate.

A change to this broker's own configs or to the cluster default acts at once on what
is running (a live partition's ledgers roll and trim by it, the next produce is dated by
it, the next accept counts against it), DescribeConfigs names where each value comes
from, static settings and bad values are refused and change nothing, and everything
survives a restart (it lives in the metadata store). That a change reaches every broker
of a cluster is tests/integration/test_cluster.py's.
(confluent-kafka's AdminClient names no cluster default, kafka-configs' --entity-default:
its requests go over a raw connection here.)
"""
import socket
import time

from confluent_kafka import TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME, Consumer, Producer, TopicPartition
from kafka.protocol.admin import DescribeConfigsRequest, IncrementalAlterConfigsRequest
from kafka.protocol.metadata import ApiVersionsRequest

from kgate.gateway.config import ConfigSource
from kgate.protocol.error_codes import ErrorCode
from tests.support.clients import create_topic
from tests.support.member_process import wait_for
from tests.support.wire import TIMEOUT, Wire

SET, DELETE = 0, 1
BROKER = 4
THIS_BROKER, CLUSTER_DEFAULT = "0", ""
IAC = IncrementalAlterConfigsRequest.AlterConfigsResource


def alter(wire: Wire, entity: str, *ops) -> int:
    """IncrementalAlterConfigs of ``(config, op, value)`` on a broker entity; its error code."""
    return wire.call(IncrementalAlterConfigsRequest(resources=[IAC(resource_type=BROKER, resource_name=entity, configs=[
        IAC.AlterableConfig(name=name, config_operation=op, value=value) for name, op, value in ops])],
        validate_only=False), 1).responses[0].error_code


def described(wire: Wire, entity: str = THIS_BROKER) -> dict[str, tuple[str, ConfigSource, bool]]:
    result = wire.call(DescribeConfigsRequest(resources=[DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=BROKER, resource_name=entity, configuration_keys=None)], include_synonyms=True,
        include_documentation=False), 4).results[0]
    assert result.error_code == ErrorCode.NONE
    return {c.name: (c.value, ConfigSource(c.config_source), c.read_only) for c in result.configs}


def test_changes_act_at_once_are_described_by_source_and_survive_a_restart(broker_factory):
    broker = broker_factory(**{"log.retention.check.interval.ms": 100, "num.partitions": 2})
    create_topic(broker.bootstrap, "trimmed", 1)
    wire = Wire(broker.bootstrap)
    # The cluster default makes every produce start a ledger; this broker's own retention then
    # trims all but the open one, on a partition already open: both act on it live.
    assert alter(wire, CLUSTER_DEFAULT, ("log.segment.bytes", SET, "1000")) == ErrorCode.NONE
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 0})
    an_hour_ago = int(time.time() * 1000) - 3_600_000
    for i in range(5):
        producer.produce("trimmed", value=b"v" * 2000, timestamp=an_hour_ago + i)
        assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused"})
    try:
        assert alter(wire, THIS_BROKER, ("log.retention.ms", SET, "60000")) == ErrorCode.NONE
        wait_for(lambda: consumer.get_watermark_offsets(TopicPartition("trimmed", 0), timeout=10)[0] == 4, 20,
                 "the broker's retention to trim the sealed ledgers")
    finally:
        consumer.close()

    before = described(wire)
    assert alter(wire, THIS_BROKER, ("num.partitions", SET, "3")) == ErrorCode.INVALID_REQUEST
    assert alter(wire, CLUSTER_DEFAULT, ("log.retention.ms", SET, "soon")) == ErrorCode.INVALID_REQUEST
    assert alter(wire, THIS_BROKER, ("log.retention.ms", SET, "120000"), ("broker.rack", SET, "b")) \
        == ErrorCode.INVALID_REQUEST
    assert described(wire) == before  # refusals changed nothing, not even their valid parts
    expected = {"log.retention.ms": ("60000", ConfigSource.DYNAMIC_BROKER_CONFIG, False),
                "log.segment.bytes": ("1000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, False),
                "num.partitions": ("2", ConfigSource.STATIC_BROKER_CONFIG, True),
                "auto.create.topics.enable": ("true", ConfigSource.DEFAULT_CONFIG, True)}
    assert {name: before[name] for name in expected} == expected
    assert set(described(wire, CLUSTER_DEFAULT)) == {"log.segment.bytes"}

    wire.close()
    assert broker.stop() == 0
    broker.restart()
    wire = Wire(broker.bootstrap)
    assert {name: described(wire)[name] for name in expected} == expected
    assert alter(wire, CLUSTER_DEFAULT, ("log.segment.bytes", DELETE, None)) == ErrorCode.NONE
    assert described(wire)["log.segment.bytes"][1] == ConfigSource.DEFAULT_CONFIG
    wire.close()


def test_the_cluster_default_timestamp_type_dates_topics_without_their_own(broker):
    create_topic(broker.bootstrap, "dated", 1)
    create_topic(broker.bootstrap, "own-time", 1, {"message.timestamp.type": "CreateTime"})
    with Wire(broker.bootstrap) as wire:
        assert alter(wire, CLUSTER_DEFAULT, ("log.message.timestamp.type", SET, "LogAppendTime")) == ErrorCode.NONE
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for topic in ("dated", "own-time"):
        producer.produce(topic, value=b"v", timestamp=1_700_000_000_000)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "dates", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0) for topic in ("dated", "own-time")])
    read = {}
    deadline = time.monotonic() + 30
    while len(read) < 2 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            read[message.topic()] = message.timestamp()
    consumer.close()
    assert read["own-time"] == (TIMESTAMP_CREATE_TIME, 1_700_000_000_000)
    assert read["dated"][0] == TIMESTAMP_LOG_APPEND_TIME and read["dated"][1] > 1_700_000_000_000


def test_a_lower_connection_limit_applies_to_the_next_accept(broker):
    host, port = broker.bootstrap.rsplit(":", 1)
    with Wire(broker.bootstrap) as held:
        # A limit of one per address closes every connection accepted after it, and keeps the one open.
        assert alter(held, THIS_BROKER, ("max.connections.per.ip", SET, "1")) == ErrorCode.NONE
        refused = socket.create_connection((host, int(port)), timeout=TIMEOUT)
        try:
            assert refused.recv(1) == b""  # closed by the broker at accept
        finally:
            refused.close()
        assert alter(held, THIS_BROKER, ("max.connections.per.ip", DELETE, None)) == ErrorCode.NONE
    with Wire(broker.bootstrap) as admitted:
        assert admitted.call(ApiVersionsRequest(), 0).error_code == ErrorCode.NONE
