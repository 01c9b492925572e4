"""Kafka Connect 4.4 on two kgate brokers over object storage (a real SeaweedFS, the S3 WAL,
ZooKeeper for metadata), through the kill -9 of a broker: the point of a stateless broker is
that losing one moves ownership, not data, and an application rides through it.

Each test kills the broker that leads its data while the application writes, then starts it
again, so the next test finds two brokers. What the application wrote must end exactly as
written: no line lost, none twice, in order.
"""
import uuid

import pytest

from tests.support.clients import create_topic
from tests.support.cluster import KgateCluster
from tests.support.connect_worker import CLASSES, ConnectCluster, ConnectWorker, TopicReader, append, wait_lines
from tests.support.member_process import wait_for
from tests.support.zookeeper import ZooKeeperServer, free_ports

# One worker runs the module, so its brokers and Connect group start once (--dist loadgroup).
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("broker_failover")]
SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"
WORKER_SETTINGS = {
    "exactly.once.source.support": "enabled",
    "consumer.isolation.level": "read_committed",
    "offset.flush.interval.ms": "1000",
    "session.timeout.ms": "6000",
    "heartbeat.interval.ms": "1000",
    "scheduled.rebalance.max.delay.ms": "2000",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, s3_engine):
    from tests.conftest import S3_ACCESS_KEY, S3_BUCKET, S3_SECRET_KEY

    zookeeper = ZooKeeperServer(str(tmp_path_factory.mktemp("zookeeper")), free_ports(1)[0]).start().wait_serving()
    with pytest.MonkeyPatch.context() as env:
        env.setenv("AWS_ACCESS_KEY_ID", S3_ACCESS_KEY)
        env.setenv("AWS_SECRET_ACCESS_KEY", S3_SECRET_KEY)
        storage = f"s3://{S3_BUCKET}/{uuid.uuid4().hex}?endpoint={s3_engine.endpoint}&region=us-east-1"
        cluster = KgateCluster(str(tmp_path_factory.mktemp("pair")), zookeeper.address, f"/{uuid.uuid4().hex}",
                               size=2, storage=storage, **{"offsets.topic.num.partitions": 4,
                                                           "transaction.state.log.num.partitions": 4,
                                                           "kgate.s3.wal.commit.interval.ms": 50})
        try:
            yield cluster.start()
        finally:
            cluster.stop()
            zookeeper.stop()


def kill_and_restart_leader(cluster: KgateCluster, topic: str, during) -> int:
    """Kill -9 the broker leading partition 0 of ``topic``, run ``during`` while the other
    serves alone, then start the victim again and wait until both are live."""
    victim = cluster.leaders(topic)[0]
    cluster.brokers[victim].kill()
    survivor = 1 - victim
    cluster.wait_leaders(topic, 1, {survivor})
    during()
    cluster.brokers[victim].restart(timeout=60)
    cluster.wait_live({0, 1}, timeout=60)
    return victim


@pytest.fixture(scope="module")
def connect(cluster, tmp_path_factory):
    if not CLASSES.is_dir():
        pytest.fail("Kafka Connect is not installed: run scripts/setup-ecosystem")
    directory = tmp_path_factory.mktemp("connect")
    group = f"connect-{uuid.uuid4().hex[:8]}"
    workers = [ConnectWorker(directory / f"worker-{n}", cluster.bootstrap, group, WORKER_SETTINGS).start()
               for n in range(2)]
    try:
        for worker in workers:
            wait_for(lambda w=worker: w.rest("GET", "/connectors")[0] == 200 or not w.alive(), 120,
                     f"worker {worker.worker_id} serving its REST API")
            assert worker.alive(), worker.log()[-3000:]
        yield ConnectCluster(cluster.bootstrap, group, workers, directory)
    finally:
        for worker in workers:
            worker.stop()


def test_connect_copies_every_line_once_in_order_through_the_kill_of_the_leading_broker(cluster, connect):
    name = uuid.uuid4().hex[:8]
    topic, source_file, sink_file = f"lines-{name}", connect.directory / f"source-{name}.txt", \
        connect.directory / f"sink-{name}.txt"
    create_topic(cluster.bootstrap, topic, 1)
    source_file.touch()
    connect.rest("POST", "/connectors", {"name": f"sink-{name}", "config": {
        "connector.class": SINK, "file": str(sink_file), "topics": topic, "tasks.max": "1"}}, expect=201)
    connect.rest("POST", "/connectors", {"name": f"source-{name}", "config": {
        "connector.class": SOURCE, "file": str(source_file), "topic": topic, "tasks.max": "1",
        "exactly.once.support": "required", "transaction.boundary": "poll"}}, expect=201)
    connect.wait_state(f"sink-{name}", "RUNNING")
    connect.wait_state(f"source-{name}", "RUNNING")
    committed = TopicReader(cluster.bootstrap, topic, "read_committed")
    try:
        expected = append(source_file, 0, 200)
        wait_lines(sink_file, expected, connect)
        # Lines keep coming while their partition's leader dies and its owner moves.
        expected += append(source_file, len(expected), 300)

        def alone():
            nonlocal expected
            expected += append(source_file, len(expected), 200)
            wait_lines(sink_file, expected, connect, timeout=120)
        kill_and_restart_leader(cluster, topic, alone)
        expected += append(source_file, len(expected), 100)
        wait_lines(sink_file, expected, connect, timeout=120)
        assert committed.to_end() == expected
        for connector in (f"source-{name}", f"sink-{name}"):
            assert connect.status(connector)["tasks"][0]["state"] == "RUNNING", connect.errors()
    finally:
        committed.close()
