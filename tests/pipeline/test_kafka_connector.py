"""Spark's own Kafka connector (``format("kafka")``, spark-sql-kafka-0-10) against kgate, and
against Apache Kafka 4.4 as the control: the same test on both, so a difference is kgate's.

A Spark job written for Kafka must run on kgate with only its bootstrap address changed:
batch writes and reads with headers and explicit partitions, offset ranges, read_committed
over transactions, and a streaming query that resumes from its checkpoint; and a streaming
query that rides through the loss of a broker of two over object storage.
"""
import json
import uuid

import pytest
from confluent_kafka import Producer
from pyspark.sql import functions as F

from tests.support.clients import create_topic
from tests.support.cluster import kill_and_restart_leader, object_storage_pair
from tests.support.kafka_reference import kafka_broker  # noqa: F401 - a fixture
from tests.support.member_process import wait_for
from tests.support.transactions import read_to_end, transactional

from .conftest import KAFKA_CONNECTOR

pytestmark = pytest.mark.xdist_group("spark-jobs")  # one of the two Spark groups (conftest.py)
PARTITIONS = 3


@pytest.fixture(params=["kgate", "kafka"])
def server(request):
    """The broker under test: kgate, or Kafka 4.4 as the control."""
    if not any(KAFKA_CONNECTOR.glob("spark-sql-kafka-*.jar")):
        pytest.fail("Spark's Kafka connector is not installed: run scripts/setup-spark")
    return request.getfixturevalue("kgate" if request.param == "kgate" else "kafka_broker")


def new_topic(server) -> str:
    name = f"spark-kafka-{uuid.uuid4().hex[:10]}"
    create_topic(server.bootstrap, name, PARTITIONS)
    return name


def rows(count: int) -> list[tuple]:
    """Row i: key k<i>, value v<i>, one header h=<i>, partition i mod 3."""
    return [(f"k{i}", f"v{i}", [("h", str(i).encode())], i % PARTITIONS) for i in range(count)]


def write(spark, server, topic, count: int) -> None:
    """In row order: one Spark task writes them all."""
    frame = spark.createDataFrame(rows(count), "key string, value string, "
                                              "headers array<struct<key: string, value: binary>>, partition int")
    (frame.coalesce(1).write.format("kafka").option("kafka.bootstrap.servers", server.bootstrap)
     .option("topic", topic).save())


def read(spark, server, topic, **options) -> list:
    frame = (spark.read.format("kafka").option("kafka.bootstrap.servers", server.bootstrap)
             .option("subscribe", topic).options(**options).load())
    columns = ["CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value", "partition", "offset"]
    return frame.selectExpr(*columns, *(["headers"] if options.get("includeHeaders") == "true" else [])).collect()


def test_a_batch_write_is_read_back_with_keys_headers_partitions_and_contiguous_offsets(spark, server):
    topic = new_topic(server)
    write(spark, server, topic, 300)
    got = read(spark, server, topic, includeHeaders="true")
    assert sorted((r.key, r.value, [(h.key, bytes(h.value)) for h in r.headers], r.partition) for r in got) == \
        sorted((k, v, h, p) for k, v, h, p in rows(300))
    for partition in range(PARTITIONS):
        offsets = sorted(r.offset for r in got if r.partition == partition)
        assert offsets == list(range(100)), f"partition {partition} offsets {offsets[:5]}..."


def test_offset_ranges_read_exactly_the_slice_asked_for(spark, server):
    """startingOffsets and endingOffsets per partition, -2 earliest and -1 latest, as Spark's docs say."""
    topic = new_topic(server)
    write(spark, server, topic, 300)
    got = read(spark, server, topic, startingOffsets=json.dumps({topic: {"0": 10, "1": -2, "2": 95}}),
               endingOffsets=json.dumps({topic: {"0": 20, "1": 5, "2": -1}}))
    assert sorted((r.partition, r.offset) for r in got) == \
        [(0, o) for o in range(10, 20)] + [(1, o) for o in range(5)] + [(2, o) for o in range(95, 100)]
    # Record i went to partition i mod 3, in order: offset o of partition p holds row 3o + p.
    assert all(r.value == f"v{3 * r.offset + r.partition}" for r in got)


def test_read_committed_reads_only_committed_transactions(spark, server):
    topic = new_topic(server)
    producer = transactional(server.bootstrap, f"{topic}-tx")
    for name, count, commit in (("first", 30, True), ("aborted", 20, False), ("last", 10, True)):
        producer.begin_transaction()
        for i in range(count):
            producer.produce(topic, value=f"{name}-{i}".encode(), partition=i % PARTITIONS)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.flush(30)  # stored, then aborted
            producer.abort_transaction(30)
    committed = read(spark, server, topic, **{"kafka.isolation.level": "read_committed"})
    assert sorted(r.value for r in committed) == sorted([f"first-{i}" for i in range(30)] +
                                                        [f"last-{i}" for i in range(10)])
    assert len(read(spark, server, topic)) == 60  # read_uncommitted, Spark's default


def test_a_streaming_query_resumes_from_its_checkpoint_and_copies_each_record_once(spark, server, tmp_path):
    """Two runs of the same query (trigger availableNow) over one checkpoint, with records
    added between them: the sink holds every source record exactly once."""
    source, sink = new_topic(server), new_topic(server)
    checkpoint = str(tmp_path / "checkpoint")

    def run_once() -> None:
        stream = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", server.bootstrap)
                  .option("subscribe", source).option("startingOffsets", "earliest").load())
        copied = stream.select("key", F.upper(F.col("value").cast("string")).alias("value"))
        query = (copied.writeStream.format("kafka").option("kafka.bootstrap.servers", server.bootstrap)
                 .option("topic", sink).option("checkpointLocation", checkpoint)
                 .trigger(availableNow=True).start())
        assert query.awaitTermination(120), "the query did not end within 120 s"
        assert query.exception() is None, query.exception()

    write(spark, server, source, 120)
    run_once()
    assert sorted(read_to_end(server.bootstrap, sink, PARTITIONS, "read_uncommitted")) == \
        sorted(f"V{i}".encode() for i in range(120))
    write(spark, server, source, 60)  # rows 0..59 again: the source now holds 180 records
    run_once()
    assert sorted(read_to_end(server.bootstrap, sink, PARTITIONS, "read_uncommitted", group="again")) == \
        sorted([f"V{i}".encode() for i in range(120)] + [f"V{i}".encode() for i in range(60)])


@pytest.fixture(scope="module")
def pair(tmp_path_factory, s3_engine):
    with object_storage_pair(tmp_path_factory, s3_engine) as cluster:
        yield cluster


def test_a_streaming_query_copies_each_record_once_through_the_kill_of_the_leading_broker(spark, pair, tmp_path):
    """A query from kgate into files (Spark's exactly-once sink) runs on two brokers over object
    storage while the broker leading its source dies and comes back: the files hold every
    source record exactly once."""
    source = new_topic(pair)
    checkpoint, output = str(tmp_path / "checkpoint"), str(tmp_path / "copy")
    stream = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", pair.bootstrap)
              .option("subscribe", source).option("startingOffsets", "earliest").load())
    query = (stream.selectExpr("CAST(value AS STRING) AS value").writeStream.format("parquet")
             .option("path", output).option("checkpointLocation", checkpoint)
             .trigger(processingTime="500 milliseconds").start())
    written = 0

    def more(count: int) -> None:
        nonlocal written
        producer = Producer({"bootstrap.servers": pair.bootstrap, "enable.idempotence": True})
        for i in range(written, written + count):
            producer.produce(source, value=f"v{i}", partition=i % PARTITIONS)
        assert producer.flush(60) == 0
        written += count

    def through() -> int:
        """Records of the source the query has committed a batch to the files through (the
        source's offsets are contiguous: an idempotent producer, no transactions)."""
        assert query.exception() is None, query.exception()
        progress = query.lastProgress
        ends = json.loads(progress["sources"][0]["endOffset"] or "{}").get(source, {}) if progress else {}
        return sum(ends.values())

    def caught_up() -> None:
        wait_for(lambda: through() >= written, 120, f"{written} records copied", interval=0.5)
    try:
        more(300)
        caught_up()
        more(200)
        kill_and_restart_leader(pair, source, lambda: (more(200), caught_up()))
        more(100)
        caught_up()
    finally:
        query.stop()
    assert query.exception() is None, query.exception()
    copied = spark.read.schema("value string").parquet(output).collect()
    assert sorted(row.value for row in copied) == sorted(f"v{i}" for i in range(written))
