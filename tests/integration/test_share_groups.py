"""Share groups (KIP-932) with Kafka 4.4's Java ``KafkaShareConsumer`` (tests/integration/share/ShareDriver.java).

A consumer acquires records and is killed holding them; once their lock (the group's
``share.record.lock.duration.ms``, set short through IncrementalAlterConfigs) runs out,
three other consumers of the 2-partition topic receive them again with a higher
delivery count, the consumers share the records, and every record is accepted exactly once;
the group, empty again, is deleted. Kafka 4.4 runs the same scenario as the control.
"""
import glob
import os
import queue
import subprocess
import threading
import time
import uuid

import pytest
from kafka.protocol.admin import DeleteGroupsRequest

from kgate.protocol.error_codes import ErrorCode
from tests.support.broker_process import terminate
from tests.support.kafka_reference import broker_under_test
from tests.support.share_consumers import KGATE_SETTINGS, SHORT, describe_share_group
from tests.support.wire import Wire

pytestmark = pytest.mark.xdist_group("share")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LIB = os.path.join(ROOT, ".cache", "kafka", "lib")
JARS = ("kafka-clients-4.4.0.jar", "lz4-java-*.jar", "snappy-java-*.jar", "zstd-jni-*.jar", "slf4j-api-*.jar")
RECORDS = 300
LOCK_MS = 8000  # long enough for the three consumers to start and join before the locks run out


@pytest.fixture(scope="module")
def driver(tmp_path_factory) -> list[str]:
    classpath = ":".join(path for pattern in JARS for path in glob.glob(os.path.join(LIB, pattern)))
    if "kafka-clients-4.4.0.jar" not in classpath:
        pytest.fail("Kafka 4.4's jars are missing: run scripts/setup-kafka")
    classes = str(tmp_path_factory.mktemp("share-driver"))
    subprocess.run(["javac", "-d", classes, "-cp", classpath,
                    os.path.join(ROOT, "tests", "integration", "share", "ShareDriver.java")],
                   check=True, capture_output=True, timeout=300)
    return ["java", "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-cp", f"{classes}:{classpath}", "ShareDriver"]


@pytest.fixture(scope="module", params=["kgate", "kafka"])
def broker(request, tmp_path_factory):
    """kgate, and Kafka 4.4 as the control: the same scenario must pass on both."""
    yield from broker_under_test(request.param, tmp_path_factory, "share", KGATE_SETTINGS, SHORT)


class Member:
    """A driver process whose output lines are read as they come."""

    def __init__(self, command: list[str]):
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.strip())

    def wait_for(self, prefix: str, timeout: float) -> list[str]:
        """Lines up to the first starting with ``prefix`` (AssertionError after ``timeout`` s)."""
        deadline = time.monotonic() + timeout
        while not any(line.startswith(prefix) for line in self.seen):
            try:
                self.seen.append(self.lines.get(timeout=max(deadline - time.monotonic(), 0.01)))
            except queue.Empty:
                if time.monotonic() >= deadline:
                    raise AssertionError(f"no {prefix} line within {timeout} s: {self.seen[-5:]}") from None
        return self.seen

    def finish(self, timeout: float) -> list[str]:
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            terminate(self.process, 5)
            raise
        self.process.stdout and self.process.stdout.close()
        while not self.lines.empty():
            self.seen.append(self.lines.get())
        return self.seen


def _records(lines: list[str], kind: str) -> list[tuple[int, int, int, int]]:
    """(value, partition, offset, delivery count) of each line of ``kind``."""
    return [tuple(int(field) for field in line.split()[1:]) for line in lines if line.startswith(kind + " ")]


def test_records_a_killed_consumer_held_are_redelivered_and_each_is_accepted_once(driver, broker):
    topic, group = f"share-{uuid.uuid4().hex[:8]}", f"sg-{uuid.uuid4().hex[:8]}"
    subprocess.run([*driver, "setup", broker.bootstrap, topic, group, str(LOCK_MS)], check=True, timeout=120,
                   capture_output=True)
    subprocess.run([*driver, "produce", broker.bootstrap, topic, str(RECORDS)], check=True, timeout=120,
                   capture_output=True)
    holder = Member([*driver, "hold", broker.bootstrap, topic, group])
    try:
        held = _records(holder.wait_for("HELD", 60), "HELD")
    finally:
        holder.process.kill()  # kill -9: its records stay locked until their lock runs out
        holder.process.wait(10)
    assert held and all(count == 1 for *_, count in held)
    members = [Member([*driver, "accept", broker.bootstrap, topic, group, "15000"]) for _ in range(3)]
    try:
        outputs = [member.finish(150) for member in members]
    finally:
        for member in members:
            terminate(member.process, 5)
    accepted = [_records(lines, "ACCEPTED") for lines in outputs]
    values = sorted(value for records in accepted for value, *_ in records)
    assert values == list(range(RECORDS)), "every record accepted exactly once"
    redelivered = {value: count for records in accepted for value, _, _, count in records}
    assert all(redelivered[value] >= 2 for value, *_ in held), "the killed consumer's records came again"
    # The consumers share the records: at least two of the three got some. Whether the third
    # does depends on when its JVM joins (the others may have taken everything by then), on
    # kgate and on Kafka 4.4 alike.
    assert sum(1 for records in accepted if records) >= 2, [len(records) for records in accepted]

    described = describe_share_group(broker.bootstrap, group)
    assert described.error_code == ErrorCode.NONE and described.assignor_name == "simple"
    # The three closed (left); the killed one goes when its session ends. Then the group may be deleted.
    deadline = time.monotonic() + 30
    while describe_share_group(broker.bootstrap, group).members and time.monotonic() < deadline:
        time.sleep(0.2)
    with Wire(broker.bootstrap) as wire:
        [deleted] = wire.call(DeleteGroupsRequest(groups_names=[group]), 2).results
    assert deleted.error_code == ErrorCode.NONE
    assert describe_share_group(broker.bootstrap, group).error_code == ErrorCode.GROUP_ID_NOT_FOUND

