"""Share groups (KIP-932) with librdkafka's share consumer (confluent-kafka's ``ShareConsumer``).

The scenarios the Java ``KafkaShareConsumer`` runs in test_share_groups.py, from the
client most Python, Go, .NET and Node users reach Kafka through: implicit
acknowledgement; explicit ACCEPT, RELEASE and REJECT (a released record comes back
with a higher delivery count, a rejected one never); three members of one group on a
two-partition topic; and a member killed while holding records, whose locks run out
and whose records the others then accept. Kafka 4.4 runs every scenario as the control.
"""
import subprocess
import sys
import uuid

import pytest
from confluent_kafka import AcknowledgeType

from tests.support.clients import create_topic
from tests.support.docs import ROOT
from tests.support.kafka_reference import broker_under_test
from tests.support.share_consumers import (
    KGATE_SETTINGS,
    SHORT,
    ShareReader,
    configure_share_group,
    describe_share_group,
    produce_values,
    wait_until,
)

pytestmark = pytest.mark.xdist_group("share_librdkafka")

LOCK_MS = 5000
ACCEPT, RELEASE, REJECT = AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT


@pytest.fixture(scope="module", params=["kgate", "kafka"])
def broker(request, tmp_path_factory):
    """kgate, and Kafka 4.4 as the control: every scenario must pass on both."""
    yield from broker_under_test(request.param, tmp_path_factory, "share-librdkafka", KGATE_SETTINGS, SHORT)


def _group(bootstrap: str, records: int, partitions: int = 2) -> tuple[str, str]:
    topic, group = f"rdshare-{uuid.uuid4().hex[:8]}", f"rdsg-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, partitions)
    configure_share_group(bootstrap, group, LOCK_MS)
    produce_values(bootstrap, topic, range(records), partitions)
    return topic, group


def _after_marker(bootstrap: str, topic: str, group: str, marker: int) -> list[int]:
    """Produce ``marker`` and read the group until it arrives: what the group still had to give."""
    produce_values(bootstrap, topic, range(marker, marker + 1), 1)
    reader = ShareReader(bootstrap, topic, group, None).start()
    try:
        wait_until(lambda: marker in reader.values(), 60, "the marker record")
    finally:
        reader.stop()
    return reader.values()


def test_implicit_acknowledgement_accepts_what_was_polled(broker):
    topic, group = _group(broker.bootstrap, 40)
    reader = ShareReader(broker.bootstrap, topic, group, None).start()
    try:
        wait_until(lambda: len(reader.seen) >= 40, 60, "40 records")
    finally:
        reader.stop()
    assert sorted(reader.values()) == list(range(40)) and not reader.errors
    assert all(count == 1 for _, _, _, count, _ in reader.seen)
    assert _after_marker(broker.bootstrap, topic, group, 1000) == [1000], "implicitly accepted records came again"


def test_released_records_come_back_and_rejected_ones_never(broker):
    topic, group = _group(broker.bootstrap, 30)

    def decide(message) -> AcknowledgeType:
        if message.delivery_count() > 1:
            return ACCEPT
        return (ACCEPT, RELEASE, REJECT)[int(message.value()) % 3]

    reader = ShareReader(broker.bootstrap, topic, group, decide).start()
    try:
        wait_until(lambda: len(reader.values(ACCEPT)) >= 20, 60, "the released records accepted")
    finally:
        reader.stop()
    assert not reader.errors
    assert sorted(reader.values()) == [i for i in range(30) if i % 3 != 2]
    assert sorted(reader.values(REJECT)) == [i for i in range(30) if i % 3 == 2]
    redelivered = {value: count for value, _, _, count, ack in reader.seen if ack == ACCEPT and value % 3 == 1}
    assert sorted(redelivered) == [i for i in range(30) if i % 3 == 1]
    assert set(redelivered.values()) == {2}, "a released record comes back with delivery count 2"
    assert _after_marker(broker.bootstrap, topic, group, 1000) == [1000], "a rejected record came again"


def test_three_members_on_two_partitions_each_accept_records_exactly_once(broker):
    topic, group = _group(broker.bootstrap, 0)
    # Ten records a fetch, slowly handled: no member acquires a whole partition at once.
    readers = [ShareReader(broker.bootstrap, topic, group, lambda _m: ACCEPT, pause_s=0.01,
                           **{"max.poll.records": 10}).start() for _ in range(3)]
    try:
        wait_until(lambda: len(describe_share_group(broker.bootstrap, group).members) == 3, 60, "three members")
        produce_values(broker.bootstrap, topic, range(300), 2)
        wait_until(lambda: sum(len(r.values()) for r in readers) >= 300, 120, "300 records accepted")
    finally:
        for reader in readers:
            reader.stop()
    values = sorted(value for reader in readers for value in reader.values())
    assert values == list(range(300)), "every record accepted exactly once"
    assert all(reader.values() for reader in readers), [len(reader.values()) for reader in readers]
    assert not any(reader.errors for reader in readers)


def _assigned(bootstrap: str, group: str) -> list[list[int]]:
    """Each member's assigned partitions, as the group describes them."""
    return [sorted(p for topic in member.assignment.topic_partitions for p in topic.partitions)
            for member in describe_share_group(bootstrap, group).members]


def test_members_joining_one_by_one_split_the_partitions_evenly(broker):
    """The first member takes every partition; each member joining after it takes its share
    from the others, so no partition is read by two members while there are enough of them
    (two members draining one partition while the rest wait was the old rule's stall)."""
    topic, group = _group(broker.bootstrap, 0, partitions=6)
    readers = []
    try:
        for count in (1, 2, 3):
            readers.append(ShareReader(broker.bootstrap, topic, group, lambda _m: ACCEPT).start())
            wanted = sorted([6 // count + (i < 6 % count) for i in range(count)])
            wait_until(lambda wanted=wanted: sorted(map(len, _assigned(broker.bootstrap, group))) == wanted, 60,
                       f"{count} member(s) holding {wanted} partitions")
        assigned = _assigned(broker.bootstrap, group)
        assert sorted(p for parts in assigned for p in parts) == list(range(6)), assigned
    finally:
        for reader in readers:
            reader.stop()


def test_records_a_killed_member_held_go_to_the_others_once_their_locks_expire(broker):
    topic, group = _group(broker.bootstrap, 100)
    holder = subprocess.Popen([sys.executable, "-m", "tests.support.share_consumers", "hold", broker.bootstrap, topic,
                               group], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        lines = []
        for line in holder.stdout:
            if line.startswith("READY"):
                break
            lines.append(line.split())
        held = {int(value): int(count) for _, value, _, _, count in lines}
    finally:
        holder.kill()  # kill -9: no acknowledgement, no leave; its records stay locked until the locks run out
        holder.wait(10)
        holder.stdout.close()
    assert held and set(held.values()) == {1}
    readers = [ShareReader(broker.bootstrap, topic, group, lambda _m: ACCEPT).start() for _ in range(2)]
    try:
        wait_until(lambda: sum(len(r.values()) for r in readers) >= 100, 90, "100 records accepted")
    finally:
        for reader in readers:
            reader.stop()
    assert sorted(value for reader in readers for value in reader.values()) == list(range(100))
    counts = {value: count for reader in readers for value, _, _, count, _ in reader.seen}
    assert all(counts[value] >= 2 for value in held), "the killed member's records came again"


def test_member_killed_leaves_within_its_session(broker):
    """The group forgets the killed member (its session ends), so the group empties."""
    topic, group = _group(broker.bootstrap, 5)
    holder = subprocess.Popen([sys.executable, "-m", "tests.support.share_consumers", "hold", broker.bootstrap, topic,
                               group], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert any(line.startswith("READY") for line in holder.stdout)
        assert len(describe_share_group(broker.bootstrap, group).members) == 1
    finally:
        holder.kill()
        holder.wait(10)
        holder.stdout.close()
    wait_until(lambda: not describe_share_group(broker.bootstrap, group).members, 30, "the group empty")
