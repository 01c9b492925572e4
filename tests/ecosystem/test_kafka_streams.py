"""A Kafka Streams 4.4 application (ecosystem/streams/PageCounts.java) on kgate, and on
Apache Kafka 4.4 as the control: the same test on both, so a difference is kgate's.

Two instances with a standby replica, exactly_once_v2, two repartition topics, a windowed
count in a persistent store (its changelog compacted) and a KTable join; one instance is
killed with kill -9 mid-run and started again on its state directory. The output, read
with read_committed, must hold exactly the expected counts: nothing counted twice across
the kill, nothing lost.
"""
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

from tests.support.broker_process import BrokerProcess
from tests.support.clients import create_topic
from tests.support.kafka_reference import kafka_broker  # noqa: F401 - a fixture
from tests.support.member_process import wait_for

# One worker runs the module, so its brokers start once (scripts/test: --dist loadgroup).
pytestmark = pytest.mark.xdist_group("ecosystem")
APP = Path(__file__).resolve().parents[2] / ".cache" / "ecosystem" / "streams"
PARTITIONS = 3
PAGES = 5
HOUR_MS = 3_600_000
WINDOW = 1_700_000_000_000 // HOUR_MS * HOUR_MS  # every view falls in this hour


@pytest.fixture(scope="module")
def kgate(tmp_path_factory):
    broker = BrokerProcess(str(tmp_path_factory.mktemp("kgate"))).start()
    yield broker
    broker.stop()


@pytest.fixture(params=["kgate", "kafka"])
def server(request):
    """The broker under test: kgate, or Kafka 4.4 as the control."""
    if not (APP / "classes").is_dir():
        pytest.fail("the Kafka Streams application is not built: run scripts/setup-ecosystem")
    return request.getfixturevalue("kgate" if request.param == "kgate" else "kafka_broker")


class Instance:
    """One application instance: a JVM started on its own state directory, stopped by PID."""

    def __init__(self, bootstrap: str, application_id: str, state_dir: Path, log: Path):
        self.command = ["java", "-cp", f"{APP / 'classes'}:{APP / 'lib'}/*", "PageCounts",
                        bootstrap, application_id, str(state_dir), "classic"]
        self.log = log
        self.process: subprocess.Popen | None = None

    def start(self) -> "Instance":
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT)
        return self

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(30)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.kill()


def produce_views(bootstrap: str, first: int, count: int) -> None:
    """View j: user u<j mod 37> reads page p<j mod 5>, stamped inside the window."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for j in range(first, first + count):
        producer.produce("views", key=f"u{j % 37}", value=f"p{j % PAGES}", timestamp=WINDOW + j)
    assert producer.flush(30) == 0


def latest_counts(consumer: Consumer, seen: dict[str, str]) -> dict[str, str]:
    for message in consumer.consume(500, timeout=0.5):
        assert message.error() is None, message.error()
        seen[message.key().decode()] = message.value().decode()
    return seen


def test_counts_stay_exact_across_a_kill_9_of_one_of_two_instances(server, tmp_path):
    application = f"page-counts-{uuid.uuid4().hex[:8]}"
    # Topic names are the application's own (fixed in its topology): each test run has its own broker.
    for name in ("views", "sections", "counts"):
        create_topic(server.bootstrap, name, PARTITIONS, {"cleanup.policy": "compact"} if name == "sections" else None)
    # Java's partitioner (murmur2), so the table is partitioned as Streams partitions the join's
    # other side; stamped before the views, so the table is loaded before they are joined.
    sections = Producer({"bootstrap.servers": server.bootstrap, "partitioner": "murmur2_random"})
    for page in range(PAGES):
        sections.produce("sections", key=f"p{page}", value=f"s{page % 2}", timestamp=WINDOW - 60_000)
    assert sections.flush(30) == 0
    produce_views(server.bootstrap, 0, 300)
    instances = [Instance(server.bootstrap, application, tmp_path / f"state-{n}",
                          tmp_path / f"instance-{n}.log").start() for n in range(2)]
    reader = Consumer({"bootstrap.servers": server.bootstrap, "group.id": f"{application}-check",
                       "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    reader.subscribe(["counts"])
    seen: dict[str, str] = {}
    try:
        first = {f"p{page}": f"s{page % 2}:{WINDOW}:60" for page in range(PAGES)}
        wait_for(lambda: latest_counts(reader, seen) == first, 120, "the first counts", interval=0)
        instances[0].kill()
        produce_views(server.bootstrap, 300, 300)
        instances[0].start()
        final = {f"p{page}": f"s{page % 2}:{WINDOW}:120" for page in range(PAGES)}
        wait_for(lambda: latest_counts(reader, seen) == final, 180, "the final counts", interval=0)
        # Nothing more comes: no count went past its final value while the instances settle.
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            assert latest_counts(reader, seen) == final
    finally:
        reader.close()
        for instance in instances:
            instance.stop()
        for n in range(2):
            log = (tmp_path / f"instance-{n}.log").read_text(errors="replace")
            assert "State transition from RUNNING to ERROR" not in log, log[-3000:]
