"""kgate.processing in share mode (``Processor(..., mode="share")``) against real brokers.

Share mode reads a share group (KIP-932) through librdkafka's share consumer: processors
share the partitions, a failing record is retried with the keyed mode's backoff and then
dead-lettered (or rejected when there is no dead-letter topic, so it never comes back), a
Delay holds the record within its lock, and a killed processor's records go to the others
once their locks run out. kgate and Kafka 4.4 (the control) each run every test.
"""
import asyncio
import time
import uuid

import pytest
from confluent_kafka import Consumer

from kgate.processing import Processor
from tests.support.clients import create_topic
from tests.support.kafka_reference import broker_under_test
from tests.support.processing import ProcessorProcess, handled, run_until, wait_for
from tests.support.share_consumers import (
    KGATE_SETTINGS,
    SHORT,
    configure_share_group,
    describe_share_group,
    produce_values,
)

pytestmark = pytest.mark.xdist_group("processing_share")

LOCK_MS = 5000


@pytest.fixture(scope="module", params=["kgate", "kafka"])
def broker(request, tmp_path_factory):
    yield from broker_under_test(request.param, tmp_path_factory, "processing-share", KGATE_SETTINGS, SHORT)


def _names(bootstrap: str, partitions: int = 2) -> tuple[str, str]:
    topic, group = f"pshare-{uuid.uuid4().hex[:8]}", f"psg-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, partitions)
    configure_share_group(bootstrap, group, LOCK_MS)
    return topic, group


async def _run_all(apps: list[Processor], done, timeout: float) -> None:
    """Run every processor until ``done()`` holds, then stop them all."""
    first, *others = apps
    tasks = [asyncio.ensure_future(app.run_async()) for app in others]
    try:
        await run_until(first, done, timeout)
    finally:
        for app in others:
            app.stop()
        await asyncio.wait_for(asyncio.gather(*tasks), 30)


async def test_two_processors_share_a_topic_and_every_record_is_handled_once(broker):
    topic, group = _names(broker.bootstrap)
    apps = [Processor(broker.bootstrap, group, [topic], mode="share", concurrency=10) for _ in range(2)]
    seen: list[list[int]] = [[], []]
    for app, mine in zip(apps, seen):
        @app.handler
        async def handle(record, mine=mine):
            await asyncio.sleep(0.005)
            mine.append(int(record.value))

    async def produce_once_joined():
        # Each processor runs two members: records go in once all four are in the group.
        await asyncio.to_thread(wait_for, lambda: len(describe_share_group(broker.bootstrap, group).members) == 4,
                                60, "four members")
        await asyncio.to_thread(produce_values, broker.bootstrap, topic, range(400), 2)

    producing = asyncio.ensure_future(produce_once_joined())
    await _run_all(apps, lambda: producing.done() and len(seen[0]) + len(seen[1]) >= 400, 90)
    producing.result()
    assert sorted(seen[0] + seen[1]) == list(range(400)), "every record handled exactly once"
    assert seen[0] and seen[1], [len(mine) for mine in seen]
    assert all(app.metrics.handled._value.get() == len(mine) for app, mine in zip(apps, seen))


async def test_a_failing_record_is_retried_then_dead_lettered_and_a_delayed_one_comes_back(broker):
    topic, group = _names(broker.bootstrap)
    dead = f"{topic}-dlq"
    create_topic(broker.bootstrap, dead, 1)
    produce_values(broker.bootstrap, topic, range(50), 2)
    app = Processor(broker.bootstrap, group, [topic], mode="share", concurrency=10, max_retries=2,
                    retry_backoff_ms=(100, 400), dead_letter_topic=dead)
    attempts: dict[int, list[float]] = {}
    handled_values: list[int] = []

    @app.handler
    async def handle(record):
        value = int(record.value)
        attempts.setdefault(value, []).append(time.monotonic())
        if value == 7:
            raise RuntimeError("record 7 never works")
        if value == 9 and len(attempts[9]) == 1:
            raise Processor.Delay(1.0)
        handled_values.append(value)

    await run_until(app, lambda: len(handled_values) >= 49 and app.metrics.dead_lettered._value.get() == 1, 60)
    assert sorted(handled_values) == [v for v in range(50) if v != 7]
    assert len(attempts[7]) == 3, "two retries after the first attempt"
    gaps = [later - earlier for earlier, later in zip(attempts[7], attempts[7][1:])]
    assert gaps[0] >= 0.05 and gaps[1] >= 0.1, f"backoff of at least half of 100 ms, then 200 ms: {gaps}"
    assert len(attempts[9]) == 2 and attempts[9][1] - attempts[9][0] >= 1.0, "the delay was honoured"
    assert app.metrics.retries._value.get() == 2 and app.metrics.delays._value.get() == 1
    [letter] = _read(broker.bootstrap, dead, 1)
    assert letter.value() == b"7"
    headers = dict(letter.headers())
    assert headers["kgate.errors.attempts"] == b"3" and headers["kgate.errors.topic"] == topic.encode()
    assert await _handled_after_marker(broker.bootstrap, topic, group) == [1000], "accepted records came back"


async def test_without_a_dead_letter_topic_a_failed_record_is_rejected_and_never_returns(broker):
    topic, group = _names(broker.bootstrap)
    produce_values(broker.bootstrap, topic, range(20), 2)
    app = Processor(broker.bootstrap, group, [topic], mode="share", concurrency=5, max_retries=1,
                    retry_backoff_ms=(10, 10))
    handled_values: list[int] = []

    @app.handler
    async def handle(record):
        if int(record.value) == 3:
            raise ValueError("record 3 never works")
        handled_values.append(int(record.value))

    await run_until(app, lambda: len(handled_values) >= 19 and app.metrics.rejected._value.get() == 1, 60)
    assert sorted(handled_values) == [v for v in range(20) if v != 3]
    assert await _handled_after_marker(broker.bootstrap, topic, group) == [1000], "the rejected record came back"


def test_records_a_killed_processor_held_are_handled_by_the_other(broker, tmp_path):
    topic, group = _names(broker.bootstrap)
    produce_values(broker.bootstrap, topic, range(300), 2)
    settings = dict(bootstrap=broker.bootstrap, group=group, topic=topic, concurrency=20, handler_ms=1,
                    mode="share")
    killed = ProcessorProcess(str(tmp_path), log=tmp_path / "killed.log", stall_after=100, **settings).start()
    try:
        wait_for(lambda: len(handled(tmp_path / "killed.log")) >= 100, 60, "a hundred handled, then stalled")
    finally:
        killed.kill()  # kill -9 with records acquired and unacknowledged: their locks must run out
    first = handled(tmp_path / "killed.log")
    other = ProcessorProcess(str(tmp_path), log=tmp_path / "other.log", **settings).start()
    try:
        wait_for(lambda: len(set(first) | set(handled(tmp_path / "other.log"))) >= 300, 90, "all handled")
    finally:
        assert other.stop() == 0
    second = handled(tmp_path / "other.log")
    assert len(set(first) | set(second)) == 300, "every record handled by one or the other"
    assert len(second) == len(set(second)), "the other processor handled a record twice"


async def _handled_after_marker(bootstrap: str, topic: str, group: str) -> list[int]:
    """Write record 1000 and run a share-mode processor of the group until it handles it:
    what it handles is what the group still had to give."""
    await asyncio.to_thread(produce_values, bootstrap, topic, range(1000, 1001), 1)
    app = Processor(bootstrap, group, [topic], mode="share", concurrency=5)
    seen: list[int] = []

    @app.handler
    async def handle(record):
        seen.append(int(record.value))

    await run_until(app, lambda: 1000 in seen, 60)
    return seen


def _read(bootstrap: str, topic: str, count: int) -> list:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{uuid.uuid4().hex[:6]}",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: list = []
    deadline = time.monotonic() + 30
    try:
        while len(got) < count and time.monotonic() < deadline:
            got += [m for m in consumer.consume(count, 0.5) if m.error() is None]
    finally:
        consumer.close()
    return got
