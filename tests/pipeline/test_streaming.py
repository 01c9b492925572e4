"""Structured Streaming through format("kgate"): landing to Parquet exactly once, and writing back."""
import json
import os

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient
from pyspark.errors import StreamingQueryException

from kgate.pipeline.jobs.land import land
from tests.support import records as R
from tests.support.clients import ConfluentClient, create_topic

from .conftest import source_options
from .spark_records import QUERY_TIMEOUT_S, collect, run

pytestmark = pytest.mark.xdist_group("spark")  # one of the two Spark groups (conftest.py)

N, M = 2000, 700


def test_landing_is_exactly_once_across_runs_and_restarts(spark, kgate, topic, tmp_path):
    output, checkpoint = str(tmp_path / "lake"), str(tmp_path / "checkpoint")
    options = source_options(kgate, topic, startingOffsets="earliest", includeHeaders="true",
                             maxOffsetsPerTrigger="500")
    ConfluentClient.produce(kgate.bootstrap, topic, N)

    batches = run(land(spark, options, output, checkpoint))
    assert len(batches) >= N // 500  # maxOffsetsPerTrigger splits the backlog into micro-batches
    assert max(b["numInputRows"] for b in batches) <= 500
    landed = spark.read.parquet(output)
    R.check_read_back(collect(landed), N)
    assert sorted(os.listdir(output)) == ["_spark_metadata", f"topic={topic}"]
    assert os.listdir(os.path.join(output, f"topic={topic}")) == ["date=2023-11-14"]  # R.timestamp's UTC day

    ConfluentClient.produce(kgate.bootstrap, topic, M, first=N)
    kgate.stop()
    kgate.restart()
    batches = run(land(spark, options, output, checkpoint))
    assert sum(b["numInputRows"] for b in batches) == M
    R.check_read_back(collect(spark.read.parquet(output)), N + M)  # no duplicates, no loss

    assert run(land(spark, options, output, checkpoint)) == []  # nothing new: nothing landed
    assert spark.read.parquet(output).count() == N + M


def test_streaming_offsets_are_checkpointed_in_spark_kafka_shape(spark, kgate, topic, tmp_path):
    ConfluentClient.produce(kgate.bootstrap, topic, 300)
    query = (spark.readStream.format("kgate").options(**source_options(kgate, topic, startingOffsets="earliest"))
             .load().writeStream.format("noop").option("checkpointLocation", str(tmp_path / "cp"))
             .trigger(availableNow=True).start())
    batches = run(query)
    end = batches[-1]["sources"][0]["endOffset"]
    end = end if isinstance(end, dict) else json.loads(end)
    assert set(end) == {topic} and set(end[topic]) == {"0", "1", "2"}
    assert sum(end[topic].values()) == 300


def test_streaming_starts_at_latest_by_default(spark, kgate, topic, tmp_path):
    ConfluentClient.produce(kgate.bootstrap, topic, 100)
    query = (spark.readStream.format("kgate").options(**source_options(kgate, topic)).load()
             .writeStream.format("noop").option("checkpointLocation", str(tmp_path / "cp"))
             .trigger(availableNow=True).start())
    assert run(query) == []


def test_streaming_write_lands_in_the_topic(spark, kgate, topic, tmp_path):
    target = f"{topic}-copy"
    create_topic(kgate.bootstrap, target, 3)
    ConfluentClient.produce(kgate.bootstrap, topic, N)
    copy = (spark.readStream.format("kgate")
            .options(**source_options(kgate, topic, startingOffsets="earliest", includeHeaders="true")).load()
            .select("key", "value", "headers", "partition"))
    query = (copy.writeStream.format("kgate").option("kafka.bootstrap.servers", kgate.bootstrap)
             .option("topic", target).option("checkpointLocation", str(tmp_path / "cp"))
             .trigger(availableNow=True).start())
    assert sum(b["numInputRows"] for b in run(query)) == N
    consumed = ConfluentClient.consume(kgate.bootstrap, target, 3, N, timeout=60)
    R.check_read_back(consumed, N, with_timestamps=None)


def test_records_trimmed_between_runs_are_data_loss(spark, kgate, topic, tmp_path):
    def copy(fail_on_data_loss: str):
        options = source_options(kgate, topic, startingOffsets="earliest", failOnDataLoss=fail_on_data_loss)
        return (spark.readStream.format("kgate").options(**options).load().writeStream.format("noop")
                .option("checkpointLocation", str(tmp_path / "cp")).trigger(availableNow=True).start())

    ConfluentClient.produce(kgate.bootstrap, topic, 300)
    assert sum(b["numInputRows"] for b in run(copy("true"))) == 300
    ConfluentClient.produce(kgate.bootstrap, topic, 300, first=300)
    admin = AdminClient({"bootstrap.servers": kgate.bootstrap})
    ends = {p: int(spark.read.format("kgate").options(**source_options(kgate, topic)).load()
                   .where(f"partition = {p}").selectExpr("max(offset)").first()[0]) + 1 for p in range(3)}
    trimmed = [TopicPartition(topic, p, end - 10) for p, end in ends.items()]  # keep the last 10 of each
    for future in admin.delete_records(trimmed).values():
        future.result(timeout=30)

    with pytest.raises(StreamingQueryException) as failed:
        copy("true").awaitTermination(QUERY_TIMEOUT_S)
    message = str(failed.value)
    assert "are no longer in the log" in message and "set failOnDataLoss=false" in message
    assert "Traceback" not in message
    assert sum(b["numInputRows"] for b in run(copy("false"))) == 30  # what is left, and nothing twice
