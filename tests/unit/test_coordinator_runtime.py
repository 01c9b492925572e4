"""The coordinator runtime over an in-memory partition writer and a fake clock.

The shard here is a plain key-value table, so what is checked is the runtime's own
part: loading by replay, appending in the log's order, answering once durable,
timers on the clock, unloading, transactions' records and compaction.
"""
import asyncio
import gc
import logging

import pytest

from kgate.gateway.coordinator import Arm, Cancel, CoordinatorRuntime, Result, Shard
from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.errors import KafkaError
from tests.unit.fake_clock import FakeClock, settle
from tests.unit.memory_partition_writer import MemoryPartitionWriter


class Table(Shard[tuple[str, str | None]]):
    """Keys and values; a key armed to expire is deleted when its timer fires."""

    def __init__(self, index):
        self.index = index
        self.values: dict[str, str] = {}
        self.pending: dict[int, dict[str, str | None]] = {}
        self.loaded_at = None
        self.unloaded = False

    def decode(self, key, value):
        return key.decode(), None if value is None else value.decode()

    def encode(self, record):
        key, value = record
        return key.encode(), None if value is None else value.encode()

    def replay(self, record, producer_id=-1):
        key, value = record
        if producer_id >= 0:
            self.pending.setdefault(producer_id, {})[key] = value
        elif value is None:
            self.values.pop(key, None)
        else:
            self.values[key] = value

    def replay_end_transaction(self, producer_id, commit):
        for record in self.pending.pop(producer_id, {}).items():
            if commit:
                self.replay(record)

    def snapshot(self):
        return list(self.values.items())

    def live_records(self):
        return len(self.values)

    def compactable(self):
        return not self.pending

    def on_loaded(self, now):
        self.loaded_at = now
        return Result(None)

    def on_unloaded(self):
        self.unloaded = True

    def timer_fired(self, now, key):
        return Result(None, [(key, None)])


def put(key, value, expire_in=None, then=None):
    def operation(shard, now):
        timers = [] if expire_in is None else [Arm(key, now + expire_in)]
        return Result(shard.values.get(key), [(key, value)], timers, then=then)
    return operation


def runtime_of(writer, clock, min_records=1000):
    return CoordinatorRuntime("__table", writer, clock, Table, min_records)


async def reloaded(writer, index=0) -> Table:
    """The shard a restarted broker (or the partition's next owner) rebuilds from the log."""
    return await runtime_of(writer, FakeClock()).load(index)


async def test_a_write_is_answered_once_durable_and_replayed_in_the_logs_order():
    writer, clock = MemoryPartitionWriter(), FakeClock()
    runtime = runtime_of(writer, clock)
    assert (await runtime.load(0)).loaded_at == clock.now
    writer.gate = asyncio.get_running_loop().create_future()
    first = asyncio.ensure_future(runtime.write(0, put("a", "1")))
    second = asyncio.ensure_future(runtime.write(0, put("a", "2")))
    await settle()
    assert not first.done() and not second.done()
    assert runtime.shard(0).values == {"a": "2"}  # appended (in order), not yet durable
    writer.gate.set_result(None)
    assert await first is None and await second is None  # both ran before either append
    assert (await reloaded(writer)).values == {"a": "2"}


async def test_a_failed_append_fails_the_request_and_changes_nothing():
    writer, clock = MemoryPartitionWriter(), FakeClock()
    runtime = runtime_of(writer, clock)
    await runtime.load(0)
    await runtime.write(0, put("a", "1"))
    writer.failure = OSError("disk full")
    with pytest.raises(KafkaError) as refused:
        await runtime.write(0, put("a", "2"))
    assert refused.value.code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert runtime.shard(0).values == {"a": "1"} and (await reloaded(writer)).values == {"a": "1"}


async def test_timers_fire_on_the_clock_and_are_replaced_cancelled_and_dropped_with_the_partition():
    writer, clock = MemoryPartitionWriter(), FakeClock()
    runtime = runtime_of(writer, clock)
    await runtime.load(0)
    await runtime.write(0, put("a", "1", expire_in=100))
    await runtime.write(0, put("b", "1", expire_in=100))
    await runtime.write(0, put("a", "2", expire_in=300))  # replaces a's timer
    runtime.run(0, lambda shard, now: Result(None, timers=[Cancel("b")]))
    await clock.advance(299)
    assert runtime.shard(0).values == {"a": "2", "b": "1"}
    await clock.advance(1)
    assert runtime.shard(0).values == {"b": "1"}
    assert (await reloaded(writer)).values == {"b": "1"}  # the timer's tombstone is in the log
    await runtime.write(0, put("c", "1", expire_in=10))
    runtime.unload(0)
    await clock.advance(10)
    assert clock.armed == 0 and writer.entries[0][-1].key == b"c"


async def test_an_unloaded_partition_answers_not_coordinator_even_to_an_append_in_flight():
    writer, clock = MemoryPartitionWriter(), FakeClock()
    runtime = runtime_of(writer, clock)
    shard = await runtime.load(0)
    in_flight = asyncio.ensure_future(runtime.write(0, put("a", "1")))
    runtime.unload(0)
    with pytest.raises(KafkaError) as refused:
        await in_flight
    assert refused.value.code == ErrorCode.NOT_COORDINATOR and shard.unloaded and writer.records() == 0
    with pytest.raises(KafkaError) as refused:
        runtime.run(0, put("a", "1"))
    assert refused.value.code == ErrorCode.NOT_COORDINATOR and not runtime.owns(0)


async def test_a_partition_taken_while_it_is_read_is_not_served():
    writer = MemoryPartitionWriter()
    writer.moving.add(0)
    runtime = runtime_of(writer, FakeClock())
    assert await runtime.load(0) is None and not runtime.owns(0)


async def test_follow_up_work_starts_once_durable_and_stops_with_the_partition():
    writer, clock = MemoryPartitionWriter(), FakeClock()
    runtime = runtime_of(writer, clock)
    await runtime.load(0)
    steps = []

    async def follow_up():
        steps.append("started")
        await clock.sleep(1000)
        steps.append("finished")

    writer.gate = asyncio.get_running_loop().create_future()
    writing = asyncio.ensure_future(runtime.write(0, put("a", "1", then=follow_up)))
    await settle()
    assert steps == []
    writer.gate.set_result(None)
    await writing
    await settle()
    assert steps == ["started"]
    runtime.unload(0)
    await clock.advance(1000)
    assert steps == ["started"]


async def test_a_transactions_records_count_from_its_commit_marker_and_block_compaction():
    writer, clock = MemoryPartitionWriter(), FakeClock()
    runtime = runtime_of(writer, clock, min_records=2)
    await runtime.load(0)

    def in_transaction(producer_id, key):
        return lambda shard, now: Result(None, [(key, "t")], producer=(producer_id, 0))

    await runtime.write(0, in_transaction(7, "committed"))
    await runtime.write(0, in_transaction(8, "aborted"))
    for i in range(10):
        await runtime.write(0, put("k", str(i)))
    assert writer.rolls == 0  # open transactions: a snapshot would lose their records
    assert (await reloaded(writer)).pending == {7: {"committed": "t"}, 8: {"aborted": "t"}}
    writer.end_transaction(0, 7, commit=True)
    runtime.transaction_ended(0, 7, True)
    writer.end_transaction(0, 8, commit=False)
    runtime.transaction_ended(0, 8, False)
    assert runtime.shard(0).values == {"committed": "t", "k": "9"} == (await reloaded(writer)).values
    await runtime.write(0, put("k", "10"))
    await settle()
    assert writer.rolls == 1


async def test_compaction_keeps_a_snapshot_that_replays_to_the_same_state():
    writer, clock = MemoryPartitionWriter(), FakeClock()
    runtime = runtime_of(writer, clock, min_records=20)
    await runtime.load(0)
    for i in range(21):
        await runtime.write(0, put(f"k{i % 3}", str(i)))
    await settle()
    assert writer.rolls == 1 and writer.records() == 3
    assert (await reloaded(writer)).values == runtime.shard(0).values == {"k0": "18", "k1": "19", "k2": "20"}
    await runtime.write(0, put("k0", None))
    assert (await reloaded(writer)).values == runtime.shard(0).values == {"k1": "19", "k2": "20"}


async def test_a_partition_that_moves_with_a_long_log_is_compacted_by_its_new_owner():
    writer = MemoryPartitionWriter()
    first = runtime_of(writer, FakeClock(), min_records=1000)
    await first.load(0)
    for i in range(30):
        await first.write(0, put("k", str(i)))
    first.unload(0)
    second = runtime_of(writer, FakeClock(), min_records=20)
    assert (await second.load(0)).values == {"k": "29"}
    await settle()
    assert writer.rolls == 1 and writer.records() == 1
    assert (await reloaded(writer)).values == {"k": "29"}


async def test_a_failed_append_nobody_waits_for_is_logged_once(caplog):
    writer, clock = MemoryPartitionWriter(), FakeClock()
    runtime = runtime_of(writer, clock)
    await runtime.load(0)
    await runtime.write(0, put("a", "1", expire_in=10))
    writer.failure = OSError("disk full")
    with caplog.at_level(logging.WARNING):
        await clock.advance(10)  # the timer's tombstone cannot be stored
        gc.collect()
    assert runtime.shard(0).values == {"a": "1"}
    assert [r.getMessage() for r in caplog.records] == ["__table: storing records failed: disk full"]
