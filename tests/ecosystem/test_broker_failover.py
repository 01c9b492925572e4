"""Kafka Connect, Kafka Streams and MirrorMaker 2 (4.4) on two kgate brokers over object
storage (a real SeaweedFS, the S3 WAL, ZooKeeper for metadata), through the kill -9 of a
broker: the point of a stateless broker is that losing one moves ownership, not data, and an
application rides through it.

Each test kills the broker that leads its data while the application writes, then starts it
again, so the next test finds two brokers. What the application wrote must end exactly as
written: no line lost, none twice, in order.
"""
import uuid

import pytest
from confluent_kafka import Consumer

from tests.ecosystem import test_kafka_streams as streams_test
from tests.support.broker_process import BrokerProcess
from tests.support.clients import ConfluentClient, create_topic, end_offsets
from tests.support.cluster import kill_and_restart_leader, object_storage_pair
from tests.support.connect_worker import (
    CLASSES,
    EXACTLY_ONCE_WORKER,
    SINK,
    SOURCE,
    ConnectCluster,
    ConnectWorker,
    TopicReader,
    append,
    wait_lines,
)
from tests.support.member_process import wait_for
from tests.support.mirror_maker import LIB as MM2_LIB
from tests.support.mirror_maker import SOURCE as MM2_SOURCE
from tests.support.mirror_maker import TARGET as MM2_TARGET
from tests.support.mirror_maker import MirrorMaker
from tests.support.streams_application import CLASSES as STREAMS_CLASSES
from tests.support.streams_application import StreamsInstance

# One worker runs the module, so its brokers and Connect group start once (--dist loadgroup).
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("broker_failover")]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, s3_engine):
    with object_storage_pair(tmp_path_factory, s3_engine) as pair:
        yield pair


@pytest.fixture(scope="module")
def connect(cluster, tmp_path_factory):
    if not CLASSES.is_dir():
        pytest.fail("Kafka Connect is not installed: run scripts/setup-ecosystem")
    directory = tmp_path_factory.mktemp("connect")
    group = f"connect-{uuid.uuid4().hex[:8]}"
    workers = [ConnectWorker(directory / f"worker-{n}", cluster.bootstrap, group, EXACTLY_ONCE_WORKER).start()
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


@pytest.fixture(scope="module")
def streams(cluster, tmp_path_factory):
    if not STREAMS_CLASSES.is_dir():
        pytest.fail("the Kafka Streams application is not built: run scripts/setup-ecosystem")
    directory = tmp_path_factory.mktemp("streams")
    application = f"page-counts-{uuid.uuid4().hex[:8]}"
    views, sections, output = (f"{application}-{name}" for name in ("views", "sections", "counts"))
    create_topic(cluster.bootstrap, views, streams_test.PARTITIONS)
    create_topic(cluster.bootstrap, sections, streams_test.PARTITIONS, {"cleanup.policy": "compact"})
    create_topic(cluster.bootstrap, output, streams_test.PARTITIONS)
    streams_test.produce_sections(cluster.bootstrap, sections)
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": f"{application}-check",
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    consumer.subscribe([output])
    instances = [StreamsInstance(directory / f"instance-{n}", cluster.bootstrap, application,
                                 streams_test.SETTINGS) for n in range(2)]
    try:
        yield streams_test.Run(("kgate-pair", "classic"), cluster.bootstrap, application, instances,
                               streams_test.Output(consumer), streams_test.counts(600))
    finally:
        consumer.close()
        for instance in instances:
            instance.stop()


def test_streams_counts_exactly_once_through_the_kill_of_the_leading_broker(cluster, streams):
    """The exactly-once counting application of test_kafka_streams, both instances running,
    while the broker leading its input dies, and on after it is back: every page's count ends
    exact and rose one commit at a time, none counted twice across the failover."""
    views = f"{streams.application}-views"
    streams_test.produce_views(cluster.bootstrap, views, 0, 300)
    for instance in streams.instances:
        instance.start()
    streams.wait_counts(streams_test.counts(300), "the first counts")

    def alone():
        streams_test.produce_views(cluster.bootstrap, views, 300, 200)
        streams.wait_counts(streams_test.counts(500), "the counts with one broker")
    kill_and_restart_leader(cluster, views, alone)
    streams_test.produce_views(cluster.bootstrap, views, 500, 100)
    streams.wait_counts(streams.expected, "the counts with both brokers back")
    for page, values in streams.output.history.items():
        rising = [streams_test.count_of(value) for value in values]
        assert rising == sorted(set(rising)), f"{page}: a count went back or came twice: {rising}"
    for n, instance in enumerate(streams.instances):
        assert "State transition from RUNNING to ERROR" not in instance.log(), f"instance {n}: {instance.errors()}"


def by_partition(bootstrap: str, topic: str, partitions: int) -> list[list[tuple[bytes, bytes]]]:
    """Each partition's (key, value) pairs, from its start to its end."""
    ends = end_offsets(bootstrap, topic, partitions)
    records = ConfluentClient.consume(bootstrap, topic, partitions, sum(ends), timeout=60)
    return [[(r.key, r.value) for r in sorted(records, key=lambda r: r.offset) if r.partition == p]
            for p in range(partitions)]


def test_mirror_maker_copies_every_record_in_order_through_the_kill_of_the_target_broker(
        cluster, tmp_path_factory):
    """MirrorMaker 2 from a kgate broker into the pair, whose broker leading the copy (and a
    share of MM2's offset, config and status topics) dies while records are copied: the copy
    holds every record of each source partition, in order. MM2's producers are not idempotent
    (Connect's default without exactly-once support), so a batch in flight to the broker that
    died may be stored twice, as on Kafka: at least once, each record first where it belongs."""
    if not MM2_LIB.is_dir():
        pytest.fail("MirrorMaker 2 is not installed: run scripts/setup-ecosystem")
    directory = tmp_path_factory.mktemp("mm2")
    source = BrokerProcess(str(directory / "source")).start()
    topic, partitions = f"orders-{uuid.uuid4().hex[:8]}", 3
    # A century: the test records are dated 2023, and the copy takes the source's retention.
    create_topic(source.bootstrap, topic, partitions, {"retention.ms": "3155760000000"})
    mirror_maker = MirrorMaker(directory / "mm2", source.bootstrap, cluster.bootstrap, {
        f"{MM2_SOURCE}->{MM2_TARGET}.topics": topic, "refresh.topics.interval.seconds": "1",
        f"{MM2_TARGET}.offset.flush.interval.ms": "1000"}).start()
    copy, produced = f"{MM2_SOURCE}.{topic}", 0

    def more(count: int) -> None:
        nonlocal produced
        ConfluentClient.produce(source.bootstrap, topic, count, first=produced, **{"enable.idempotence": True})
        produced += count

    def copied() -> None:
        ends = end_offsets(source.bootstrap, topic, partitions)
        try:
            # At or past the source's ends: past them when a retried batch was stored twice.
            wait_for(lambda: all(c >= e for c, e in zip(end_offsets(cluster.bootstrap, copy, partitions), ends)),
                     120, f"{copy} at {ends}")
        except AssertionError as timed_out:
            raise AssertionError(f"{timed_out}\n{mirror_maker.errors()[-6000:]}") from None
    try:
        more(200)
        copied()
        more(200)
        kill_and_restart_leader(cluster, copy, lambda: (more(200), copied()))
        more(100)
        copied()
        for copied_records, records in zip(by_partition(cluster.bootstrap, copy, partitions),
                                           by_partition(source.bootstrap, topic, partitions)):
            assert list(dict.fromkeys(copied_records)) == records
    finally:
        mirror_maker.stop()
        source.stop()
