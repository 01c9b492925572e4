"""Batch reads and writes through format("kgate") against a live broker."""
import signal
import subprocess
import sys

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import functions as F

from kgate import pipeline
from kgate.pipeline.errors import BrokerError
from kgate.pipeline.offsets import PartitionRange
from kgate.pipeline.options import parse_read
from kgate.pipeline.source import read_range
from tests.support import records as R
from tests.support.broker_process import BrokerProcess
from tests.support.clients import ConfluentClient, create_topic

from .conftest import source_options
from .spark_records import SOURCE_SCHEMA, collect

pytestmark = pytest.mark.xdist_group("spark")  # one of the two Spark groups (conftest.py)

N = 3000


@pytest.fixture(scope="module")
def filled(kgate):
    """A 3-partition topic holding records 0..N-1, produced by an independent client."""
    name = "filled"
    create_topic(kgate.bootstrap, name, 3)
    ConfluentClient.produce(kgate.bootstrap, name, N)
    return name


def read(spark, broker, topic, **options):
    return spark.read.format("kgate").options(**source_options(broker, topic, **options)).load()


def test_batch_read_returns_every_record_intact(spark, kgate, filled):
    frame = read(spark, kgate, filled, includeHeaders="true")
    assert frame.rdd.getNumPartitions() == 3  # one Spark partition per topic partition
    records = collect(frame)
    assert len(records) == N
    R.check_read_back(records, N)  # keys, values, headers, timestamps; contiguous offsets from 0
    assert {row.topic for row in frame.select("topic").distinct().collect()} == {filled}
    assert {row.timestampType for row in frame.select("timestampType").distinct().collect()} == {0}


def test_schema_is_spark_kafka_source_schema(spark, kgate, filled):
    assert read(spark, kgate, filled).schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,timestamp:timestamp,"
        "timestampType:int>")
    assert read(spark, kgate, filled, includeHeaders="true").schema["headers"].dataType.simpleString() == \
        "array<struct<key:string,value:binary>>"


def test_register_by_hand(spark, kgate, filled):
    pipeline.register(spark)
    assert read(spark, kgate, filled).count() == N


def test_subscribe_pattern_and_assign(spark, kgate, filled):
    pattern = {"kafka.bootstrap.servers": kgate.bootstrap, "subscribePattern": "fill.*"}
    assert spark.read.format("kgate").options(**pattern).load().count() == N
    assign = {"kafka.bootstrap.servers": kgate.bootstrap, "assign": '{"filled": [0, 2]}'}
    partitions = spark.read.format("kgate").options(**assign).load().groupBy("partition").count().collect()
    whole = read(spark, kgate, filled).groupBy("partition").count().collect()
    assert {row.partition: row["count"] for row in partitions} == \
        {row.partition: row["count"] for row in whole if row.partition in (0, 2)}


def test_offset_json_bounds_and_min_partitions(spark, kgate, filled):
    starting = '{"filled": {"0": 10, "1": -2, "2": 0}}'
    ending = '{"filled": {"0": 110, "1": 50, "2": -1}}'
    frame = read(spark, kgate, filled, startingOffsets=starting, endingOffsets=ending, minPartitions="8")
    assert frame.rdd.getNumPartitions() >= 8
    offsets = {}
    for row in frame.select("partition", "offset").collect():
        offsets.setdefault(row.partition, []).append(row.offset)
    ends = read(spark, kgate, filled).groupBy("partition").agg(F.max("offset").alias("last")).collect()
    last = {row.partition: row.last for row in ends}
    assert sorted(offsets[0]) == list(range(10, 110))
    assert sorted(offsets[1]) == list(range(0, 50))
    assert sorted(offsets[2]) == list(range(0, last[2] + 1))


def test_starting_timestamp(spark, kgate, filled):
    first = 1234
    frame = read(spark, kgate, filled, startingTimestamp=str(R.timestamp(first)))
    keys = {R.index_of_key(bytes(row.key)) for row in frame.select("key").collect()}
    assert keys == set(range(first, N))


def failure(action) -> str:
    with pytest.raises(PySparkException) as caught:
        action()
    message = str(caught.value)
    assert "Traceback" not in message
    return message


def test_bad_input_fails_with_a_message_naming_the_option(spark, kgate, filled):
    assert "kgate option 'subscribe': topic 'no-such-topic' does not exist" in \
        failure(lambda: read(spark, kgate, "no-such-topic").collect())
    assert "kgate option 'startingOffsets': malformed JSON" in \
        failure(lambda: read(spark, kgate, filled, startingOffsets='{"filled": {0: 1}').collect())
    assert "kgate option 'endingOffsets': 'earliest' is not allowed" in \
        failure(lambda: read(spark, kgate, filled, endingOffsets="earliest").collect())
    assert "kgate option 'minPartitions': expected a positive integer" in \
        failure(lambda: read(spark, kgate, filled, minPartitions="many").collect())
    assert "kgate option 'kafka.auto.offset.reset': not supported" in \
        failure(lambda: read(spark, kgate, filled, **{"kafka.auto.offset.reset": "earliest"}).collect())
    both = source_options(kgate, filled, subscribePattern="fill.*")
    assert "give exactly one of subscribe, subscribePattern or assign" in \
        failure(lambda: spark.read.format("kgate").options(**both).load().collect())


def test_offsets_out_of_range(spark, kgate, filled):
    beyond = '{"filled": {"0": 999999, "1": 0, "2": 0}}'
    message = failure(lambda: read(spark, kgate, filled, startingOffsets=beyond).collect())
    assert "kgate option 'startingOffsets': filled-0 offset 999999 is out of range" in message
    assert "failOnDataLoss" in message
    # failOnDataLoss=false: partition 0 starts at its end, so only partitions 1 and 2 are read.
    rows = read(spark, kgate, filled, startingOffsets=beyond, failOnDataLoss="false").select("partition").collect()
    assert len(rows) == N - read(spark, kgate, filled).where("partition = 0").count()
    assert {row.partition for row in rows} == {1, 2}


def test_unreachable_brokers_fail_within_the_deadline(spark, kgate, filled):
    options = {"kafka.bootstrap.servers": "127.0.0.1:1", "subscribe": filled,
               "kafka.default.api.timeout.ms": "3000"}
    message = failure(lambda: spark.read.format("kgate").options(**options).load().collect())
    assert "kafka.bootstrap.servers=127.0.0.1:1" in message


def test_stopped_broker_fails_the_read_instead_of_hanging(spark, tmp_path):
    broker = BrokerProcess(str(tmp_path / "paused")).start()
    try:
        create_topic(broker.bootstrap, "paused", 1)
        ConfluentClient.produce(broker.bootstrap, "paused", 10)
        frame = read(spark, broker, "paused", **{"kafka.default.api.timeout.ms": "2000",
                                                "kafkaConsumer.pollTimeoutMs": "2000"})
        broker.process.send_signal(signal.SIGSTOP)  # connections stay open; nothing answers
        try:
            message = failure(frame.collect)
        finally:
            broker.process.send_signal(signal.SIGCONT)
        assert "failed within 2000 ms (kafka.default.api.timeout.ms)" in message
    finally:
        broker.stop()


def test_a_task_whose_broker_stops_answering_fails_at_the_poll_deadline(tmp_path):
    """The task side of the deadline: records stop coming in the middle of a range."""
    broker = BrokerProcess(str(tmp_path / "stalling")).start()
    try:
        create_topic(broker.bootstrap, "stalling", 1)
        ConfluentClient.produce(broker.bootstrap, "stalling", 30_000, **{"batch.num.messages": 20})
        options = parse_read({"kafka.bootstrap.servers": broker.bootstrap, "subscribe": "stalling",
                              "kafkaConsumer.pollTimeoutMs": "2000", "kafka.default.api.timeout.ms": "2000",
                              # small fetches, so most of the range is still on the broker when it stops
                              "kafka.max.partition.fetch.bytes": "20000", "kafka.fetch.max.bytes": "20000",
                              "kafka.message.max.bytes": "10000",
                              "kafka.queued.max.messages.kbytes": "20"}, streaming=False)
        batches = read_range(options, PartitionRange("stalling", 0, 0, 30_000), SOURCE_SCHEMA)
        first = next(batches)  # at most BATCH_RECORDS; the consumer's queue holds 20 KiB more at most
        assert 0 < first.num_rows < 30_000
        broker.process.send_signal(signal.SIGSTOP)
        try:
            with pytest.raises(BrokerError, match=r"no record for 2000 ms \(kafkaConsumer.pollTimeoutMs\)"):
                for _batch in batches:
                    pass
        finally:
            broker.process.send_signal(signal.SIGCONT)
    finally:
        broker.stop()


def test_batch_write_lands_in_the_topic(spark, kgate, topic):
    rows = [(R.key(i), R.value(i), [(name, value) for name, value in R.headers(i)], i % 3) for i in range(N)]
    frame = spark.createDataFrame(rows, "key binary, value binary, headers array<struct<key:string,value:binary>>, "
                                        "partition int")
    frame.write.format("kgate").option("kafka.bootstrap.servers", kgate.bootstrap).option("topic", topic) \
        .mode("append").save()
    consumed = ConfluentClient.consume(kgate.bootstrap, topic, 3, N, timeout=60)
    R.check_read_back(consumed, N, with_timestamps=None)
    assert all(record.partition == R.index_of(record) % 3 for record in consumed)


def test_undelivered_records_fail_the_write(spark, kgate):
    frame = spark.createDataFrame([(b"k%d" % i, b"v") for i in range(10)], "key binary, value binary")
    message = failure(lambda: frame.write.format("kgate").option("kafka.bootstrap.servers", kgate.bootstrap)
                      .option("topic", "no-such-topic").option("kafka.delivery.timeout.ms", "3000")
                      .mode("append").save())
    assert f"writing to kafka.bootstrap.servers={kgate.bootstrap}: " in message
    assert "first failure no-such-topic-" in message


def test_write_refuses_a_frame_without_value_or_topic(spark, kgate):
    frame = spark.createDataFrame([("a",)], "key string")
    message = failure(lambda: frame.write.format("kgate").option("kafka.bootstrap.servers", kgate.bootstrap)
                      .mode("append").save())
    assert "kgate option 'value'" in message


def test_sasl_with_spark_kafka_options(spark, broker_factory, tmp_path):
    """Spark's SASL options (a JAAS login module line) work unchanged."""
    subprocess.run([sys.executable, "-m", "kgate", "users", "--create", "--data-dir", str(tmp_path / "secured"), "add",
                    "alice", "--password", "alice-secret"], check=True, capture_output=True)
    broker = broker_factory("secured", listeners=("SASL_PLAINTEXT",))
    create_topic(broker.bootstrap, "secret", 3)
    ConfluentClient.produce(broker.bootstrap, "secret", 500)
    jaas = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="%s";'
    sasl = {"kafka.bootstrap.servers": broker.address("SASL_PLAINTEXT"), "kafka.security.protocol": "SASL_PLAINTEXT",
            "kafka.sasl.mechanism": "SCRAM-SHA-256", "kafka.sasl.jaas.config": jaas % "alice-secret",
            "subscribe": "secret", "includeHeaders": "true", "kafka.default.api.timeout.ms": "10000"}
    R.check_read_back(collect(spark.read.format("kgate").options(**sasl).load()), 500)
    wrong = {**sasl, "kafka.sasl.jaas.config": jaas % "wrong"}
    message = failure(lambda: spark.read.format("kgate").options(**wrong).load().collect())
    assert f"kafka.bootstrap.servers={broker.address('SASL_PLAINTEXT')}" in message
    assert "Authentication failed" in message
