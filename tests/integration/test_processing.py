"""kgate.processing against a real kgate broker with the real client (confluent-kafka).

Each test produces records whose value carries their index, runs a processor in this
process (or in a subprocess where it must be killed or measured) and checks the
guarantee the framework states: order per key with parallelism across keys, records
that fail for good in the dead-letter topic with their failure, delays honoured,
commits that never pass an unfinished record.
"""
import asyncio
import random

import pytest

from kgate.processing import Processor
from tests.support.clients import create_topic
from tests.support.processing import (
    BROKER_SETTINGS,
    CONSUMER_CONFIG,
    committed,
    index_of,
    key_of,
    produce_keyed,
    run_until,
)

pytestmark = pytest.mark.slow


@pytest.fixture
def broker(broker_factory):
    return broker_factory(**BROKER_SETTINGS)


async def test_records_of_a_key_run_in_order_and_keys_in_parallel(broker):
    count, keys, partitions = 100_000, 2_000, 8
    create_topic(broker.bootstrap, "events", partitions)
    produce_keyed(broker.bootstrap, "events", count, keys)
    app = Processor(broker.bootstrap, "order", ["events"], concurrency=1_000, max_records=20_000,
                    commit_interval_ms=200, config=CONSUMER_CONFIG)
    seen: dict[bytes, list[int]] = {}
    running: set[bytes] = set()
    overlaps, most_at_once = [], [0]

    @app.handler
    async def handle(record):
        if record.key in running:
            overlaps.append(record.key)
        running.add(record.key)
        most_at_once[0] = max(most_at_once[0], len(running))
        await asyncio.sleep(random.random() * 0.002)
        running.discard(record.key)
        seen.setdefault(record.key, []).append(index_of(record))

    await run_until(app, lambda: sum(map(len, seen.values())) >= count, timeout=60)
    assert not overlaps, f"{len(overlaps)} records ran beside another of their key, e.g. {overlaps[0]!r}"
    for k in range(keys):
        assert seen[key_of(k, keys)] == list(range(k, count, keys)), f"key {k} out of order or incomplete"
    assert most_at_once[0] > 100, f"at most {most_at_once[0]} keys ran at once"
    offsets = committed(broker.bootstrap, "order", "events", partitions)
    assert sum(offsets.values()) == count, offsets
