"""The pipeline jobs: ``kgate pipeline land`` as users run it, and the minute counts."""
import json
import os
import subprocess
import sys
from collections import Counter

import pytest
from confluent_kafka import Producer

from kgate.cli import pipeline_jobs
from kgate.pipeline.jobs.minute_counts import minute_counts
from tests.support import records as R
from tests.support.clients import ConfluentClient, create_topic

from .conftest import QUICK_JVM, source_options, spark_priority
from .spark_records import collect, run

pytestmark = pytest.mark.xdist_group("spark-jobs")  # one of the two Spark groups (conftest.py)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MINUTE_MS = 60_000


def kgate_cli(*args, timeout=240, python_code=None) -> subprocess.CompletedProcess:
    """``kgate`` as a user runs it: no PYSPARK_* settings (the command picks its own Python for Spark);
    at the Spark JVM's priority of the other tests (conftest.py: SPARK_NICE)."""
    command = [sys.executable, "-c", python_code, *args] if python_code else \
        [sys.executable, "-m", "kgate", *args]
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYSPARK_")}
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                          env={**env, "SPARK_LOCAL_IP": "127.0.0.1"}, preexec_fn=spark_priority)


def land_command(broker, topic, tmp_path, *extra):
    return ["pipeline", "land", "--bootstrap-server", broker.bootstrap, "--subscribe", topic,
            "--checkpoint", str(tmp_path / "checkpoint"), "--output", str(tmp_path / "lake"),
            "--master", "local[2]", "--conf", "spark.ui.enabled=false",
            "--conf", f"spark.driver.extraJavaOptions={QUICK_JVM}", *extra]


@pytest.mark.parametrize("source", ["kgate", "kafka"])
def test_kgate_pipeline_land(spark, kgate, topic, tmp_path, source):
    """On either source: the kgate data source, or Spark's own Kafka connector (``--source kafka``)."""
    ConfluentClient.produce(kgate.bootstrap, topic, 1000)
    done = kgate_cli(*land_command(kgate, topic, tmp_path, "--source", source))
    assert done.returncode == 0, done.stderr[-2000:]
    R.check_read_back(collect(spark.read.parquet(str(tmp_path / "lake"))), 1000)


def test_kgate_pipeline_land_reports_failures_in_one_line(kgate, tmp_path):
    done = kgate_cli(*land_command(kgate, "no-such-topic", tmp_path))
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        f"kgate pipeline land: kgate option 'subscribe': topic 'no-such-topic' does not exist at "
        f"kafka.bootstrap.servers={kgate.bootstrap}")


def test_kgate_pipeline_usage_errors_exit_2_before_spark_starts(kgate, tmp_path):
    done = kgate_cli(*land_command(kgate, "t", tmp_path, "--starting-offsets", '{"t": {"0": "x"}}'))
    assert done.returncode == 2
    assert done.stderr.strip() == "kgate pipeline land: kgate option 'startingOffsets': t-0: offset 'x' is not " \
                                  "an offset, -2 (earliest) or -1 (latest)"
    without_spark = "import sys; sys.modules['pyspark'] = None; from kgate.command import main; sys.exit(main())"
    done = kgate_cli(*land_command(kgate, "t", tmp_path), python_code=without_spark)
    assert done.returncode == 2
    assert done.stderr.strip() == "kgate pipeline land: " + pipeline_jobs.INSTALL_HINT
    assert "scripts/setup-spark" in pipeline_jobs.INSTALL_HINT  # how to get it from this repository


def test_minute_counts_are_written_back_to_a_topic(spark, kgate, topic, tmp_path):
    first_minute = 1_700_000_040_000  # a whole minute
    producer = Producer({"bootstrap.servers": kgate.bootstrap, "acks": "all"})
    expected = Counter()
    for i in range(60):  # 4 s apart: 15 records a minute over 4 minutes, 4 keys
        timestamp = first_minute + i * 4_000
        key = b"user%d" % (i % 4)
        producer.produce(topic, key=key, value=b"x", timestamp=timestamp)
        expected[(timestamp // MINUTE_MS * MINUTE_MS, key.decode())] += 1
    assert producer.flush(30) == 0
    output = f"{topic}-counts"
    create_topic(kgate.bootstrap, output, 1)

    run(minute_counts(spark, source_options(kgate, topic, startingOffsets="earliest"), output,
                      str(tmp_path / "checkpoint")))

    counted = {}
    for record in ConfluentClient.consume(kgate.bootstrap, output, 1, len(expected), timeout=60):
        document = json.loads(record.value)
        assert record.key == document["key"].encode() and document["topic"] == topic
        counted[(document["minute"], document["key"])] = document["count"]  # the last one wins
    assert counted == dict(expected)
