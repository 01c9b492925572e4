"""A real SparkSession (local[2]) and a real kgate broker for the pipeline tests.

The session does not register the data source: ``format("kgate")`` must work because
kgate is installed, as it will for users; nor does it hide worker tracebacks, so the
tests see the data source's failures as users do. Spark's Python workers run this
venv's interpreter. Spark's own Kafka connector (``format("kafka")``) is on the session's
classpath when scripts/setup-spark has installed it.

The modules form two xdist groups of about equal length, ``spark`` (batch reads and writes,
streaming) and ``spark-jobs`` (the pipeline jobs, Spark's own Kafka connector), each run by
one worker (scripts/test: --dist loadgroup) with one Spark JVM of about 1 GB: one worker for
them all was twenty minutes of a suite run.
"""
import os
import sys
import uuid
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tests.support.broker_process import BrokerProcess
from tests.support.clients import create_topic

os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
KAFKA_CONNECTOR = Path(__file__).resolve().parents[2] / ".cache" / "spark-kafka" / "lib"


# Spark waits a fixed 10 s for each Python worker it starts to connect back (the streaming
# source and sink runners start afresh, pyspark and the data source imported) and fails the
# query otherwise: on a 2-core machine running the rest of the suite beside it that was missed.
# The JVM, and so every worker it starts, runs at this higher priority where the user may raise it.
SPARK_NICE = -5


def spark_priority() -> None:
    """SPARK_NICE for this process, where the user may raise priority (a command's child that
    starts Spark itself, such as ``kgate pipeline land``, runs it first)."""
    try:
        os.nice(SPARK_NICE)
    except PermissionError:
        pass


@pytest.fixture(scope="session")
def spark():
    try:
        os.nice(SPARK_NICE)  # inherited by the JVM started now; this thread goes back below
        raised = True
    except PermissionError:
        raised = False
    try:
        session = _session()
    finally:
        if raised:
            os.nice(-SPARK_NICE)
    yield session
    session.stop()


# The driver JVM with C1 only: the tests' jobs are small, and C2's compilations were half of the JVM's
# CPU (a session and a few small jobs: 72 s of CPU, 38 s with C1 only).
QUICK_JVM = "-XX:TieredStopAtLevel=1"


def _session() -> SparkSession:
    return (SparkSession.builder.master("local[2]").appName("kgate-pipeline-tests")
            .config("spark.ui.enabled", "false")
            .config("spark.driver.extraJavaOptions", QUICK_JVM)
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.jars", ",".join(str(jar) for jar in sorted(KAFKA_CONNECTOR.glob("*.jar"))))
            .getOrCreate())


@pytest.fixture(scope="module")
def kgate(tmp_path_factory):
    """One broker per test module, stopped (by PID) after it; tests use topics of their own."""
    broker = BrokerProcess(str(tmp_path_factory.mktemp("kgate")), {"auto.create.topics.enable": "false"}).start()
    yield broker
    broker.stop()


@pytest.fixture
def topic(kgate):
    """A fresh 3-partition topic."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    create_topic(kgate.bootstrap, name, 3)
    return name


def source_options(broker, topic, **options) -> dict:
    return {"kafka.bootstrap.servers": broker.bootstrap, "subscribe": topic, **options}
