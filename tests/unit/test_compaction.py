"""Log compaction over a real file store and embedded metadata store: what a pass keeps,
that offsets never change, tombstones and their delete horizon, the lag and ratio rules,
and the swap's crash safety."""
import asyncio
import os
import random
import signal
import subprocess
import sys
import time

import pytest
from kafka.record.default_records import DefaultRecordBatch

from kgate.protocol import conversion
from kgate.protocol.record import Record
from kgate.protocol.record_batch import read_header
from kgate.protocol.record_compaction import DELETE_HORIZON_FLAG, delete_horizon, read_records, rebuild
from kgate.storage import compaction
from kgate.storage.compaction import CompactionPolicy
from kgate.storage.key_offset_map import KeyOffsetMap
from kgate.storage.managed_ledger import RolloverPolicy
from tests.unit.test_managed_ledger import Partition

NOW = 1_800_000_000_000
POLICY = CompactionPolicy(delete_retention_ms=1000, min_lag_ms=0, max_lag_ms=2**63 - 1, min_dirty_ratio=0.5,
                          segment_bytes=1 << 30)
ROLL_EVERY_BATCH = RolloverPolicy(max_bytes=1)


async def produce(ledger, keyed: list[tuple[bytes | None, bytes | None]], codec: int = 0,
                  timestamp: int = NOW - 100_000, producer: tuple = (-1, -1, -1)) -> int:
    """One batch of (key, value) records; returns its base offset."""
    await ledger.prepare_append()
    records = [Record(i, timestamp + i, key, value, ()) for i, (key, value) in enumerate(keyed)]
    base, durable = ledger.append(len(records), timestamp + len(records) - 1, 2, 0,
                                  lambda b: [conversion.write([r._replace(offset=b + r.offset) for r in records],
                                                              2, codec, producer)])
    await durable
    return base


async def read_all(ledger) -> list[Record]:
    out = []
    offset = ledger.log_start_offset
    while offset < ledger.high_watermark:
        entries = await ledger.read(offset, 1 << 20)
        if not entries:
            break
        for stored in entries:
            out.extend(r for r in conversion.read(stored.payload) if r.offset >= offset)
            offset = stored.header.last_offset + 1
    return out


async def run_inline(fn, *args):
    return fn(*args)


async def compact(ledger, policy=POLICY, now=NOW, map_bytes=1 << 20, producers_last=None):
    found = compaction.cleanable(ledger, policy, now)
    return await compaction.compact(ledger, found, policy, map_bytes, run_inline, now, producers_last or {}, 1 << 26)


@pytest.fixture
def partition(tmp_path):
    return Partition(tmp_path)


@pytest.mark.parametrize("codec", [0, 1, 3, 4])
async def test_latest_record_per_key_survives_at_its_offset(partition, codec):
    ledger = await partition.open(rollover=ROLL_EVERY_BATCH)
    for round_ in range(5):
        await produce(ledger, [(b"k%d" % i, b"v%d-%d" % (i, round_)) for i in range(20)], codec)
    await produce(ledger, [(b"tail", b"open ledger")], codec)
    result = await compact(ledger)
    assert result.swapped and result.records_removed == 80
    records = await read_all(ledger)
    # The last round's records at their own offsets (80..99), then the open ledger's, untouched.
    assert [(r.offset, r.key, r.value) for r in records] == (
        [(80 + i, b"k%d" % i, b"v%d-4" % i) for i in range(20)] + [(100, b"tail", b"open ledger")])
    assert ledger.clean_end == 100
    size = ledger.size_bytes
    await partition.stop(clean=True)
    ledger = await partition.open(rollover=ROLL_EVERY_BATCH)
    assert [(r.offset, r.value) for r in await read_all(ledger)] == [(r.offset, r.value) for r in records]
    assert ledger.size_bytes <= size + 200  # only a new open ledger more
    await partition.stop(clean=True)


async def test_a_batch_keeps_its_offset_span_and_readers_skip_gaps(partition):
    ledger = await partition.open(rollover=ROLL_EVERY_BATCH)
    await produce(ledger, [(b"a", b"1"), (b"b", b"1"), (b"c", b"1")])
    await produce(ledger, [(b"a", b"2"), (b"c", b"2")])
    await produce(ledger, [(b"x", b"open")])
    await compact(ledger)
    entries = await ledger.read(0, 1 << 20)
    first = read_header(entries[0].payload)
    assert (first.base_offset, first.last_offset_delta, first.record_count) == (0, 2, 1)
    assert (entries[0].header.base_offset, entries[0].header.last_offset) == (0, 2)
    # A fetch from inside a gap gets the next batch holding the offset's successors.
    assert [r.offset for r in conversion.read((await ledger.read(1, 1 << 20))[0].payload)] == [1]
    assert [(r.offset, r.key) for r in await read_all(ledger)] == [(1, b"b"), (3, b"a"), (4, b"c"), (5, b"x")]
    await partition.stop(clean=True)


async def test_tombstones_get_a_horizon_then_go(partition):
    ledger = await partition.open(rollover=ROLL_EVERY_BATCH)
    await produce(ledger, [(b"a", b"1"), (b"b", b"1")])
    await produce(ledger, [(b"a", None)])
    await produce(ledger, [(b"z", b"open")])
    first = await compact(ledger)
    assert first.tombstones_expire_ms == NOW + POLICY.delete_retention_ms
    kept = await ledger.read(2, 1 << 20)
    batch = read_header(kept[0].payload)
    assert batch.attributes & DELETE_HORIZON_FLAG and delete_horizon(batch) == NOW + 1000
    assert [(r.offset, r.key, r.value, r.timestamp) for r in conversion.read(kept[0].payload)] == [
        (2, b"a", None, NOW - 100_000)]
    await produce(ledger, [(b"c", b"1")])  # seals the ledger holding "z"
    # Before the horizon the tombstone stays; after it, it goes.
    await compact(ledger, now=NOW + 999)
    assert (2, b"a") in [(r.offset, r.key) for r in await read_all(ledger)]
    second = await compact(ledger, now=NOW + 1000)
    assert second.tombstones_expire_ms is None
    assert [(r.offset, r.key) for r in await read_all(ledger)] == [(1, b"b"), (3, b"z"), (4, b"c")]
    await partition.stop(clean=True)


async def test_min_lag_ratio_and_max_lag(partition):
    ledger = await partition.open(rollover=ROLL_EVERY_BATCH)
    await produce(ledger, [(b"a", b"1")], timestamp=NOW - 5000)
    await produce(ledger, [(b"a", b"2")], timestamp=NOW - 100)
    await produce(ledger, [(b"z", b"open")])
    lagged = CompactionPolicy(1000, min_lag_ms=1000, max_lag_ms=2**63 - 1, min_dirty_ratio=0.5,
                              segment_bytes=1 << 30)
    found = compaction.cleanable(ledger, lagged, NOW)
    assert len(found.segments) == 1  # the second ledger's record is younger than the lag
    await compaction.compact(ledger, found, lagged, 1 << 20, run_inline, NOW, {}, 1 << 26)
    assert [r.value for r in await read_all(ledger)] == [b"1", b"2", b"open"]
    assert compaction.cleanable(ledger, POLICY, NOW).dirty_ratio == pytest.approx(0.5, abs=0.01)
    assert not compaction.cleanable(ledger, POLICY, NOW).due(POLICY, NOW)
    eager = CompactionPolicy(1000, 0, max_lag_ms=50, min_dirty_ratio=0.5, segment_bytes=1 << 30)
    assert compaction.cleanable(ledger, eager, NOW).due(eager, NOW)
    await partition.stop(clean=True)


async def test_an_emptied_batch_of_a_producers_last_write_is_kept(partition):
    ledger = await partition.open(rollover=ROLL_EVERY_BATCH)
    await produce(ledger, [(b"a", b"1")], producer=(7, 0, 0))
    await produce(ledger, [(b"a", b"2")], producer=(8, 0, 0))
    await produce(ledger, [(b"a", b"3")], producer=(7, 0, 1))
    await produce(ledger, [(b"z", b"open")])
    await compact(ledger, producers_last={7: 2, 8: 1})
    entries = await ledger.read(0, 1 << 20)
    headers = [read_header(e.payload) for e in entries]
    assert [(h.base_offset, h.producer_id, h.record_count) for h in headers] == [(1, 8, 0), (2, 7, 1), (3, -1, 1)]
    await partition.stop(clean=True)


async def test_a_full_map_compacts_what_it_covers(partition):
    ledger = await partition.open(rollover=ROLL_EVERY_BATCH)
    for round_ in range(2):
        for part in range(2):
            await produce(ledger, [(b"k%d-%d" % (part, i), b"%d" % round_) for i in range(15_000)])
    await produce(ledger, [(b"z", b"open")])
    result = await compact(ledger, map_bytes=1 << 20)  # 32,768 slots hold 29,491 keys: one batch of 15,000
    assert result.swapped and ledger.clean_end == 15_000
    records = await read_all(ledger)
    latest = {}
    for record in records:
        latest[record.key] = record.value
    assert len(latest) == 30_001 and all(v == b"1" for k, v in latest.items() if k != b"z")
    while compaction.cleanable(ledger, POLICY, NOW).dirty_bytes:
        await compact(ledger)
    assert ledger.clean_end == 60_000 and len(await read_all(ledger)) == 30_001
    await partition.stop(clean=True)


def test_key_offset_map_holds_its_capacity_in_fixed_memory():
    key_map = KeyOffsetMap(1 << 20)
    assert key_map.memory_bytes <= 1 << 20
    for i in range(key_map.capacity):
        key_map.put(b"key-%d" % i, i)
    key_map.put(b"key-7", 10**9)
    assert key_map.get(b"key-7") == 10**9 and key_map.get(b"key-8") == 8 and key_map.get(b"other") == -1
    assert not key_map.room_for(1)
    with pytest.raises(OverflowError):
        key_map.put(b"one more", 1)


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_rebuilt_batch_keeps_offsets_timestamps_and_producer(codec):
    records = [Record(100 + i, 1000 + i, b"k%d" % i, None if i == 3 else b"v%d" % i, (("h", b"1"),))
               for i in range(6)]
    batch = conversion.write(records, 2, codec, (5, 1, 10), 3)
    header = read_header(batch)
    kept = [r for r in read_records(batch, header, 1 << 20) if r.offset_delta in (1, 3, 4)]
    for horizon in (None, 99_999):
        rebuilt = rebuild(header, kept, horizon)
        new = read_header(rebuilt)
        assert (new.base_offset, new.last_offset_delta, new.record_count) == (100, 5, 3)
        assert (new.producer_id, new.producer_epoch, new.base_sequence, new.partition_leader_epoch) == (5, 1, 10, 3)
        assert delete_horizon(new) == horizon and new.max_timestamp == 1004
        assert [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in
                DefaultRecordBatch(bytearray(rebuilt))] == [
            (101, 1001, b"k1", b"v1", [("h", b"1")]), (103, 1003, b"k3", None, [("h", b"1")]),
            (104, 1004, b"k4", b"v4", [("h", b"1")])]
        DefaultRecordBatch(bytearray(rebuilt)).validate_crc()


KEYS = 200


async def produce_round(ledger, round_: int) -> None:
    """Every key once, with the round as its value, in batches of 20 (a ledger each)."""
    for first in range(0, KEYS, 20):
        await produce(ledger, [(b"k%d" % i, b"%d" % round_) for i in range(first, first + 20)])


async def check_after_crash(partition: Partition, acked: int) -> None:
    ledger = await partition.open(rollover=ROLL_EVERY_BATCH)
    records = await read_all(ledger)
    offsets = [record.offset for record in records]
    assert offsets == sorted(set(offsets)), "offsets must increase"
    latest: dict[bytes, int] = {}
    for record in records:
        round_ = int(record.value)
        assert round_ >= latest.get(record.key, -1), f"{record.key!r} went back to round {round_}"
        latest[record.key] = round_
    assert len(latest) == KEYS and min(latest.values()) >= acked, "an acknowledged round was lost"
    # A kill between a rollover's creating its ledger and listing it leaves that ledger empty
    # and unlisted (as before compaction existed); compaction must leave nothing else behind.
    chained = {segment.info.ledger_id for segment in ledger._segments}
    files = {name for name in os.listdir(partition.ledgers_dir) if name.endswith(".ledger")}
    orphans = [name for name in files if int(name.split(".")[0]) not in chained
               and os.path.getsize(os.path.join(partition.ledgers_dir, name))]
    assert not orphans, f"ledgers with data left outside the chain: {orphans}"
    await partition.stop(clean=True)


def test_kill_9_at_any_moment_leaves_the_old_or_the_new_ledgers(tmp_path):
    """SIGKILL lands at random moments of a loop of appends and compaction passes (each pass
    writes new ledgers, swaps them in with one chain write and deletes the old): every
    reopen reads the whole log, with every acknowledged round's values and no orphan ledger."""
    rng = random.Random(24)
    acked = -1
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for _trial in range(10):
        child = subprocess.Popen([sys.executable, "-m", "tests.support.compaction_child", str(tmp_path),
                                  str(acked + 1)], stdout=subprocess.PIPE, cwd=root)
        assert child.stdout is not None
        first = child.stdout.readline()
        assert first.startswith(b"acked "), "the child did not start its loop"
        time.sleep(rng.uniform(0, 0.4))  # the moment of the kill, varied on purpose
        child.send_signal(signal.SIGKILL)
        rest, _ = child.communicate(timeout=30)
        acked = max(int(line.split()[1]) for line in [first, *rest.splitlines()])
        asyncio.run(check_after_crash(Partition(tmp_path), acked))
