"""Reading, compaction and garbage collection of the object store against an in-memory
bucket with injected faults: a ranged GET cut short is damage and is not cached, compaction
moves a sealed ledger into objects of its own (and the loser of a race keeps nothing of
its own), a failed PUT leaves the ledger as it was, and a WAL object goes only once no live
ledger is in it."""
import asyncio

import pytest

from kgate.storage.ledger import CorruptLedger
from kgate.storage.store_capabilities import Housekeeping, Instrumented, Staging
from kgate.storage.stores.file_store import FileLedgerStore
from kgate.storage.stores.s3_store import S3LedgerStore
from tests.unit.memory_bucket import MemoryBucket, payload

LEDGERS = (7, 8)
ENTRIES = 3


def store(bucket: MemoryBucket, writer: str) -> S3LedgerStore:
    return S3LedgerStore(bucket, writer, commit_interval_ms=0)  # type: ignore[arg-type]


async def two_closed_ledgers(bucket: MemoryBucket) -> None:
    """LEDGERS written side by side (so they share WAL objects), then closed."""
    writer = store(bucket, "w1")
    ledgers = [writer.create_ledger(ledger_id) for ledger_id in LEDGERS]
    for entry_id in range(ENTRIES):
        entries = [(ledger, ledger.add_entry([payload(ledger.ledger_id, entry_id)])) for ledger in ledgers]
        await asyncio.wait_for(asyncio.gather(*(ledger.sync(entry) for ledger, entry in entries)), 5)
    for ledger in ledgers:
        await ledger.close()
    writer.close()


async def read_all(ledger) -> list[bytes]:
    return [bytes(e) for e in await ledger.read_range(0, ledger.last_add_confirmed)]


def expected(ledger_id: int) -> list[bytes]:
    return [payload(ledger_id, i) for i in range(ENTRIES)]


def wal_keys(bucket: MemoryBucket) -> list[str]:
    return sorted(key for key in bucket.objects if key.startswith("wal/"))


async def test_a_ranged_get_cut_short_is_damage_and_is_not_cached():
    bucket = MemoryBucket()
    await two_closed_ledgers(bucket)
    ledger = await store(bucket, "w2").open_ledger(7, ENTRIES - 1)
    bucket.cut[wal_keys(bucket)[0]] = 1
    with pytest.raises(CorruptLedger, match="cut short"):
        await ledger.read_range(0, ENTRIES - 1)
    bucket.cut.clear()
    assert await read_all(ledger) == expected(7)


async def test_compaction_moves_a_sealed_ledger_into_its_own_objects_and_readers_follow():
    bucket = MemoryBucket()
    await two_closed_ledgers(bucket)
    early = await store(bucket, "w2").open_ledger(7, ENTRIES - 1)  # keeps the index it read now
    compactor = store(bucket, "w3")
    opened = [await compactor.open_ledger(ledger_id, ENTRIES - 1) for ledger_id in LEDGERS]
    assert compactor.compaction_backlog()[0] == 2
    assert await compactor.compact_round() == 2
    assert compactor.compaction_backlog() == (0, 0)
    own = sorted(key.rsplit("/", 1)[1] for key in bucket.objects if key.startswith("ledgers/0000000000000000007/"))
    assert own[:2] == ["compacted", f"data-{0:020d}-{ENTRIES - 1:020d}-w3-{own[1][-8:]}"] and own[2:] == ["writer"]
    for ledger in opened:
        assert await read_all(ledger) == expected(ledger.ledger_id)

    async def live() -> set[int]:
        return set(LEDGERS)
    shared = wal_keys(bucket)
    assert shared and await compactor.collect_garbage(live) == len(shared)
    assert wal_keys(bucket) == []
    # A reader that had the old index finds its objects gone and reads the ledger's new ones.
    assert await read_all(early) == expected(7)
    compactor.close()


async def test_the_loser_of_a_compaction_race_deletes_its_objects_and_takes_the_winners():
    bucket = MemoryBucket()
    await two_closed_ledgers(bucket)
    first, second = store(bucket, "w2"), store(bucket, "w3")
    late = await second.open_ledger(7, ENTRIES - 1)
    await first.open_ledger(7, ENTRIES - 1)
    assert await first.compact_round() == 1
    assert await second.compact_round() == 1  # done: by the other broker
    data = [key for key in bucket.objects if "/data-" in key]
    assert len(data) == 1 and "-w2-" in data[0]
    assert not late.needs_compaction() and await read_all(late) == expected(7)


async def test_a_compaction_that_loses_to_an_earlier_one_of_the_same_broker_keeps_the_winners_objects():
    """A ledger reopened while its compaction ran keeps the old index, so the same broker
    compacts it again: the same entries, the same writer. The loser's objects must not be
    the winner's under the same names, or cleaning up after losing deletes the data."""
    bucket = MemoryBucket()
    await two_closed_ledgers(bucket)
    done, stale = store(bucket, "w2"), store(bucket, "w2")
    await done.open_ledger(7, ENTRIES - 1)
    reopened = await stale.open_ledger(7, ENTRIES - 1)
    assert await done.compact_round() == 1
    assert await stale.compact_round() == 1  # lost: the ledger was compacted already
    assert [key for key in bucket.objects if "/data-" in key]
    fresh = await store(bucket, "w4").open_ledger(7, ENTRIES - 1)
    assert await read_all(fresh) == expected(7) and await read_all(reopened) == expected(7)


async def test_a_failed_put_during_compaction_leaves_the_ledger_as_it_was():
    bucket = MemoryBucket()
    await two_closed_ledgers(bucket)
    compactor = store(bucket, "w2")
    ledger = await compactor.open_ledger(7, ENTRIES - 1)
    bucket.failing_puts = 1
    assert await compactor.compact_round() == 0
    assert ledger.needs_compaction() and "ledgers/0000000000000000007/compacted" not in bucket.objects
    assert await read_all(ledger) == expected(7)
    assert await compactor.compact_round() == 1  # and the next round does it


async def test_a_wal_object_goes_only_once_no_live_ledger_is_in_it():
    bucket = MemoryBucket()
    await two_closed_ledgers(bucket)
    collector = store(bucket, "w2")
    live = set(LEDGERS)

    async def live_ledgers() -> set[int]:
        return live
    shared = wal_keys(bucket)
    live.discard(7)
    await collector.collect_garbage(live_ledgers)  # ledger 7's own records go
    assert wal_keys(bucket) == shared  # ledger 8 is in every WAL object
    assert not [key for key in bucket.objects if key.startswith("ledgers/0000000000000000007/")]
    assert await read_all(await collector.open_ledger(8, ENTRIES - 1)) == expected(8)
    live.clear()
    await collector.collect_garbage(live_ledgers)
    assert wal_keys(bucket) == []


def test_each_store_declares_what_it_can_do(tmp_path):
    files = FileLedgerStore(str(tmp_path))
    assert isinstance(files, Staging) and not isinstance(files, Housekeeping | Instrumented)
    objects = S3LedgerStore(MemoryBucket(), "w1")  # type: ignore[arg-type]
    assert isinstance(objects, Housekeeping) and isinstance(objects, Instrumented)
    assert isinstance(objects, Staging) and objects.follows and files.follows
