"""Cluster mode against a ZooKeeper that is down, lost, or shared by a broker with the same id."""
import contextlib
import os
import select
import signal
import threading

import pytest
from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.producer import InitProducerIdRequest, ProduceRequest
from kazoo.client import KazooClient

from kgate.protocol.error_codes import ErrorCode
from tests.support.broker_process import BrokerProcess
from tests.support.clients import create_topic
from tests.support.cluster import SESSION_TIMEOUT_MS
from tests.support.member_process import wait_for
from tests.support.ports import free_ports
from tests.support.wire import Wire
from tests.support.zookeeper import ZooKeeperServer
from tests.unit.record_batches import build_batch

pytestmark = pytest.mark.slow


@pytest.fixture
def zookeeper(tmp_path):
    server = ZooKeeperServer(str(tmp_path / "zookeeper"), free_ports(1)[0])
    yield server
    server.stop()


def cluster_broker(tmp_path, zookeeper, node_id, name=None):
    return BrokerProcess(str(tmp_path / (name or f"broker-{node_id}")), {
        "kgate.metadata": f"zookeeper://{zookeeper.address}/faults", "kgate.storage": f"file:{tmp_path / 'shared'}",
        "broker.id": node_id, "zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS,
        "offsets.topic.num.partitions": 3})


def produce_request(topic, records):
    return ProduceRequest(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=records)])])


def produce_one(wire, topic):
    return wire.call(produce_request(topic, build_batch([b"v"])), 7).responses[0].partition_responses[0].error_code


def idempotent_batch(topic, sequence, count=2):
    """Producer 4242's batch of ``count`` records from ``sequence``, as a Produce request."""
    values = [b"s%d" % (sequence + i) for i in range(count)]
    return produce_request(topic, build_batch(values, producer_id=4242, producer_epoch=0, base_sequence=sequence))


def answer(wire, request, correlation_id):
    part = wire.read(request, 7, correlation_id).responses[0].partition_responses[0]
    return ErrorCode(part.error_code), part.base_offset


@contextlib.contextmanager
def stored_first_batch(broker, topic):
    """Connections of an idempotent producer and a probe to a new one-partition ``topic``, once
    the producer's first batch (sequences 0-1) is stored."""
    create_topic(broker.bootstrap, topic, 1)
    with Wire(broker.bootstrap) as producer, Wire(broker.bootstrap) as probe:
        wait_for(lambda: produce_one(probe, topic) == ErrorCode.NONE, 30, "the partition to be served")
        first = idempotent_batch(topic, 0)
        assert answer(producer, first, producer.send(first, 7))[0] == ErrorCode.NONE
        yield producer, probe


def test_a_broker_started_before_zookeeper_says_so_and_waits_for_it(tmp_path, zookeeper):
    broker = cluster_broker(tmp_path, zookeeper, 0)
    outcome = []
    starting = threading.Thread(target=lambda: outcome.append(broker.start(timeout=90)))
    starting.start()
    try:
        wait_for(lambda: os.path.exists(broker.log_path) and
                 f"cannot reach ZooKeeper at {zookeeper.address}/faults; retrying" in open(broker.log_path).read(),
                 30, "the broker to report ZooKeeper unreachable")
        assert not outcome, "the broker reported ready without ZooKeeper"
        zookeeper.start()
        starting.join(90)
        assert outcome, "the broker did not start once ZooKeeper ran"
        create_topic(broker.bootstrap, "after-wait", 1)
        with Wire(broker.bootstrap) as wire:
            wait_for(lambda: produce_one(wire, "after-wait") == ErrorCode.NONE, 30, "the partition to be served")
    finally:
        starting.join(90)
        broker.stop()


def test_produces_fail_retriably_while_zookeeper_is_lost_and_resume_after(tmp_path, zookeeper):
    zookeeper.start().wait_serving()
    broker = cluster_broker(tmp_path, zookeeper, 0).start(timeout=60)
    try:
        create_topic(broker.bootstrap, "guarded", 1)
        with Wire(broker.bootstrap) as wire:
            wait_for(lambda: produce_one(wire, "guarded") == ErrorCode.NONE, 30, "the partition to be served")
            zookeeper.stop()
            # Not acknowledged without a safe owner: a retriable error that sends clients to Metadata.
            wait_for(lambda: produce_one(wire, "guarded") == ErrorCode.NOT_LEADER_FOR_PARTITION, 30,
                     "produces to be refused once ZooKeeper is gone")
            zookeeper.start().wait_serving()
            wait_for(lambda: produce_one(wire, "guarded") == ErrorCode.NONE, 60,
                     "produces to be acknowledged again")
    finally:
        broker.stop()


def test_what_needs_zookeeper_while_it_is_lost_is_refused_retriably_and_given_after(tmp_path, zookeeper):
    """A producer id (the broker has taken no block of ids yet), a topic to create on first use
    and one to create by request, asked while ZooKeeper is gone: COORDINATOR_LOAD_IN_PROGRESS,
    LEADER_NOT_AVAILABLE and REQUEST_TIMED_OUT, Kafka's answers, which clients retry, on a
    connection that stays open (fault run seed 21: the broker failed the request and closed the
    connection); once ZooKeeper is back, all three."""
    zookeeper.start().wait_serving()
    broker = cluster_broker(tmp_path, zookeeper, 0).start(timeout=60)
    producer_id = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60_000, producer_id=-1,
                                        producer_epoch=-1)
    auto_created = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="made-on-first-use")],
                                   allow_auto_topic_creation=True)
    created = CreateTopicsRequest(timeout_ms=10_000, validate_only=False, topics=[CreateTopicsRequest.CreatableTopic(
        name="made-by-request", num_partitions=1, replication_factor=1, assignments=[], configs=[])])

    def asked(wire):
        return (wire.call(producer_id, 4).error_code, wire.call(auto_created, 9).topics[0].error_code,
                wire.call(created, 5).topics[0].error_code)
    try:
        with Wire(broker.bootstrap) as wire:
            zookeeper.stop()
            assert asked(wire) == (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.LEADER_NOT_AVAILABLE,
                                   ErrorCode.REQUEST_TIMED_OUT)
            zookeeper.start().wait_serving()
            wait_for(lambda: asked(wire)[:2] == (ErrorCode.NONE, ErrorCode.NONE), 60, "both once ZooKeeper is back")
            assert asked(wire)[2] == ErrorCode.TOPIC_ALREADY_EXISTS  # made by the retry just before
    finally:
        broker.stop()


def test_batches_pipelined_behind_one_refused_before_the_partition_was_served_are_refused_alike(
        tmp_path, zookeeper):
    """Fault run seed 12: a producer's batch was refused while its partition was not yet served
    (NOT_LEADER_FOR_PARTITION), and the batch it had already sent behind it arrived just after
    the partition was served: answered OUT_OF_ORDER_SEQUENCE_NUMBER ("sent sequence 392, expected
    389"), it made librdkafka start a new epoch and send every record not yet acknowledged again
    under new sequences, duplicating one another owner had stored without acknowledging it. The
    batch behind is refused like the first, so the client sends both again, in order."""
    zookeeper.start().wait_serving()
    broker = cluster_broker(tmp_path, zookeeper, 0).start(timeout=60)
    try:
        with stored_first_batch(broker, "pipelined") as (producer, probe):
            zookeeper.stop()
            wait_for(lambda: produce_one(probe, "pipelined") == ErrorCode.NOT_LEADER_FOR_PARTITION, 30,
                     "produces to be refused once ZooKeeper is gone")
            refused, behind = idempotent_batch("pipelined", 2), idempotent_batch("pipelined", 4)
            refused_id = producer.send(refused, 7)
            # Answered (unread, as a client that has not yet heard of it) before the partition is served again.
            assert select.select([producer.sock], [], [], 20)[0], "the refused batch was not answered"
            zookeeper.start().wait_serving()
            wait_for(lambda: produce_one(probe, "pipelined") == ErrorCode.NONE, 60, "the partition to be served again")
            behind_id = producer.send(behind, 7)
            assert answer(producer, refused, refused_id)[0] == ErrorCode.NOT_LEADER_FOR_PARTITION
            assert answer(producer, behind, behind_id)[0] == ErrorCode.NOT_LEADER_FOR_PARTITION
            # Sent again in order, each is stored once, one after the other.
            stored, base = answer(producer, refused, producer.send(refused, 7))
            assert stored == ErrorCode.NONE
            assert answer(producer, behind, producer.send(behind, 7)) == (ErrorCode.NONE, base + 2)
            # A batch that skips sequences with nothing refused before it hears Kafka's answer.
            skipping = idempotent_batch("pipelined", 9)
            assert answer(producer, skipping, producer.send(skipping, 7))[0] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    finally:
        broker.stop()


def test_batches_skipping_ahead_of_a_partition_opened_again_here_are_refused_retriably(tmp_path, zookeeper):
    """A broker paused past its metadata session drops its partitions when it resumes and opens
    them again, reading their producers back from the log; clients' connections stay open. A
    batch whose write was given up with the dropped partition is not in that log, and the batch
    its client had pipelined behind it may come first: it gets KAFKA_STORAGE_ERROR, so the client
    sends both again in order, not OUT_OF_ORDER_SEQUENCE_NUMBER, which makes librdkafka start a
    new epoch and send every record not yet acknowledged again (stored twice where one was stored
    but not answered)."""
    zookeeper.start().wait_serving()
    broker = cluster_broker(tmp_path, zookeeper, 0).start(timeout=60)
    claim = "/faults/owners/reopened/0"
    watcher = KazooClient(hosts=zookeeper.address)
    watcher.start(timeout=30)

    def claimed_by():
        """The metadata session holding the partition's claim (None: no claim)."""
        stat = watcher.exists(claim)
        return None if stat is None else stat.ephemeralOwner
    try:
        with stored_first_batch(broker, "reopened") as (producer, probe):
            session = claimed_by()
            broker.process.send_signal(signal.SIGSTOP)
            try:
                wait_for(lambda: claimed_by() is None, 60, "the paused broker's session to expire")
            finally:
                broker.process.send_signal(signal.SIGCONT)
            wait_for(lambda: claimed_by() not in (None, session) and produce_one(probe, "reopened") == ErrorCode.NONE,
                     60, "the partition to be served again")
            assert "dropping every partition" in open(broker.log_path).read()
            behind = idempotent_batch("reopened", 4)
            assert answer(producer, behind, producer.send(behind, 7))[0] == ErrorCode.KAFKA_STORAGE_ERROR
            missing = idempotent_batch("reopened", 2)
            stored, base = answer(producer, missing, producer.send(missing, 7))
            assert stored == ErrorCode.NONE
            assert answer(producer, behind, producer.send(behind, 7)) == (ErrorCode.NONE, base + 2)
    finally:
        watcher.stop()
        watcher.close()
        broker.stop()


def test_a_second_broker_with_the_same_id_refuses_to_start(tmp_path, zookeeper):
    zookeeper.start().wait_serving()
    first = cluster_broker(tmp_path, zookeeper, 7).start(timeout=60)
    try:
        second = cluster_broker(tmp_path, zookeeper, 7, name="impostor")
        # It first waits out the session timeout, in case the registration is its own from before a crash.
        with pytest.raises(RuntimeError, match="exited with 2"):
            second.start(timeout=60)
        assert "broker id 7 is already registered by a live broker" in open(second.log_path).read()
        assert first.alive()
    finally:
        first.stop()


def test_a_derived_broker_id_is_kept_across_restarts(tmp_path, zookeeper):
    zookeeper.start().wait_serving()
    first = cluster_broker(tmp_path, zookeeper, -1, name="derived-a").start(timeout=60)
    second = cluster_broker(tmp_path, zookeeper, -1, name="derived-b").start(timeout=60)
    try:
        ids = {b.data_dir: int(open(os.path.join(b.data_dir, "broker.id")).read()) for b in (first, second)}
        assert len(set(ids.values())) == 2 and min(ids.values()) >= 1000
        first.stop()
        first.restart(timeout=60)
        assert int(open(os.path.join(first.data_dir, "broker.id")).read()) == ids[first.data_dir]
        brokers = wait_for(lambda: (lambda found: found if len(found) == 2 else None)(
            live_broker_ids(first.bootstrap)), 30, "both brokers listed")
        assert brokers == set(ids.values())
    finally:
        first.stop()
        second.stop()


def live_broker_ids(bootstrap):
    from confluent_kafka.admin import AdminClient
    return set(AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).brokers)
