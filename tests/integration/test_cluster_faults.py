"""Cluster mode against a ZooKeeper that is down, lost, or shared by a broker with the same id."""
import os
import threading

import pytest
from kafka.protocol.producer import ProduceRequest

from kgate.protocol.error_codes import ErrorCode
from tests.support.broker_process import BrokerProcess
from tests.support.clients import create_topic
from tests.support.cluster import SESSION_TIMEOUT_MS
from tests.support.member_process import wait_for
from tests.support.wire import Wire
from tests.support.zookeeper import ZooKeeperServer, free_ports
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


def produce_one(wire, topic):
    request = ProduceRequest(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=build_batch([b"v"]))])])
    return wire.call(request, 7).responses[0].partition_responses[0].error_code


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
