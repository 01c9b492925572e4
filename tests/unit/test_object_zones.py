"""The object store's zone parts against an in-memory bucket: record sets staged for other
zones' owners ride in the WAL objects of the staging broker, are read back (one GET per
object), checked, and collected with their objects; a follower indexes a ledger another
store writes, from the bucket alone, without writing anything, reads its entries from the
objects its catch-ups fetched, and followers of one writer share a LIST."""
import asyncio

import pytest

from kgate.storage.stores import object_inventory
from kgate.storage.stores.s3_store import S3LedgerStore
from kgate.storage.stores.wal_object import FRAME
from tests.unit.memory_bucket import MemoryBucket, payload, settle


def store(bucket: MemoryBucket, writer: str, interval_ms: int = 0) -> S3LedgerStore:
    return S3LedgerStore(bucket, writer, commit_interval_ms=interval_ms)  # type: ignore[arg-type]


async def written(entries: int):
    """An owner's store and a reader's on one bucket, the owner's ledger 9 holding ``entries``."""
    bucket = MemoryBucket()
    owner, reader = store(bucket, "2-1"), store(bucket, "1-1")
    ledger = owner.create_ledger(9)
    await settle()
    for i in range(entries):
        await ledger.sync(ledger.add_entry([payload(9, i)]))
    return bucket, owner, reader, ledger


async def test_sets_staged_in_one_interval_share_one_wal_object_with_ledger_entries_and_read_back():
    bucket = MemoryBucket()
    zone_broker, owner = store(bucket, "1-1", interval_ms=50), store(bucket, "2-1")
    ledger = zone_broker.create_ledger(7)
    await settle()  # its writer record
    staging = [asyncio.ensure_future(zone_broker.stage("1-", data)) for data in (b"first set", b"second")]
    entry = ledger.add_entry([payload(7, 0)])
    names = await asyncio.gather(*staging)
    await ledger.sync(entry)
    wal = [key for key in bucket.puts if key.startswith("wal/")]
    assert len(wal) == 1, f"one object for the entry and both sets: {bucket.puts}"
    gets = bucket.calls["get"]
    assert [await owner.read_staged(name) for name in names] == [b"first set", b"second"]
    assert bucket.calls["get"] - gets == 1, "one GET for both sets"
    zone_broker.unstage(names[0])  # the object is shared: nothing goes set by set
    assert await owner.read_staged(names[0]) == b"first set"
    zone_broker.close()


async def test_a_reference_to_a_missing_or_damaged_set_is_an_oserror_and_a_malformed_one_names_nothing():
    bucket = MemoryBucket()
    zone_broker, owner = store(bucket, "1-1"), store(bucket, "2-1")
    name = await zone_broker.stage("1-", b"records of a batch")
    writer, seq, start, length = name.split("_")
    with pytest.raises(OSError):
        await owner.read_staged(f"{writer}_{int(seq) + 1}_{start}_{length}")  # no such object
    with pytest.raises(OSError):
        await owner.read_staged(f"{writer}_{seq}_{start}_{int(length) + 1}")  # its length is not the frame's
    [key] = [key for key in bucket.objects if key.startswith("wal/")]
    damaged = bytearray(bucket.objects[key])
    damaged[int(start) + FRAME.size] ^= 0xFF
    bucket.objects[key] = bytes(damaged)
    with pytest.raises(OSError, match="CRC"):
        await store(bucket, "3-1").read_staged(name)  # an owner that has not read the object yet
    for malformed in ("../secret", "1-1_x_0_4", "1-1_0_0"):
        with pytest.raises(FileNotFoundError):
            await owner.read_staged(malformed)
    zone_broker.close()


async def test_an_object_of_staged_sets_alone_is_collected_only_after_its_grace(monkeypatch):
    bucket = MemoryBucket()
    zone_broker = store(bucket, "1-1")
    await zone_broker.stage("1-", b"records")

    async def no_ledgers() -> set[int]:
        return set()

    monkeypatch.setattr(object_inventory, "STAGED_GRACE_SECONDS", 7200.0)  # the bucket says every object is 3600 s old
    assert await zone_broker.collect_garbage(no_ledgers) == 0
    monkeypatch.setattr(object_inventory, "STAGED_GRACE_SECONDS", 60.0)
    assert await zone_broker.collect_garbage(no_ledgers) == 1
    assert not [key for key in bucket.objects if key.startswith("wal/")]
    zone_broker.close()


async def test_a_follower_indexes_another_stores_ledger_as_it_grows_and_writes_nothing():
    bucket, owner, reader, ledger = await written(3)
    followed = await reader.open_follower(9)
    assert followed.last_add_confirmed == 2
    for i in range(3, 6):
        await ledger.sync(ledger.add_entry([payload(9, i)]))
    assert await followed.catch_up() == 5
    gets = bucket.calls["get"]
    assert [bytes(e) for e in await followed.read_range(0, 5)] == [payload(9, i) for i in range(6)]
    assert bucket.calls["get"] == gets, "read from the blocks its catch-ups' GETs brought in"
    heads = await followed.read_heads(3, 5, 16)
    assert [head for _, head in heads] == [payload(9, i)[:16] for i in range(3, 6)]
    puts = list(bucket.puts)
    await ledger.close()
    assert await followed.catch_up() == 5
    written_by_reader = [key for key in bucket.puts[len(puts):] if "/1-1/" in key]
    assert written_by_reader == [] and not any("/1-1/" in key for key in bucket.objects)
    followed.release()
    owner.close()


async def test_followers_of_one_writers_ledgers_caught_up_together_share_one_list():
    bucket = MemoryBucket()
    owner, reader = store(bucket, "2-1"), store(bucket, "1-1")
    ledgers = [owner.create_ledger(ledger_id) for ledger_id in (11, 12, 13)]
    await settle()
    followers = [await reader.open_follower(ledger.ledger_id) for ledger in ledgers]
    for ledger in ledgers:
        ledger.add_entry([payload(ledger.ledger_id, 0)])
    await asyncio.gather(*(ledger.sync(0) for ledger in ledgers))
    lists = bucket.calls["list"]
    assert await asyncio.gather(*(f.catch_up() for f in followers)) == [0, 0, 0]
    assert bucket.calls["list"] - lists == 1
    for follower in followers:
        follower.release()
    owner.close()


async def test_a_failed_put_fails_the_sets_in_it_and_the_next_set_is_staged():
    bucket = MemoryBucket()
    zone_broker, owner = store(bucket, "1-1"), store(bucket, "2-1")
    bucket.failing_puts = 1
    with pytest.raises(OSError, match="not stored"):
        await zone_broker.stage("1-", b"lost")
    name = await zone_broker.stage("1-", b"kept")
    assert await owner.read_staged(name) == b"kept"
    zone_broker.close()


async def test_a_follower_of_a_ledger_compacted_and_collected_since_reads_its_compacted_objects():
    bucket, owner, reader, ledger = await written(3)
    followed = await reader.open_follower(9)  # while it is written: its index names WAL objects
    await ledger.close()
    assert await owner.compact_round() == 1

    async def live() -> set[int]:
        return {9}

    assert await owner.collect_garbage(live) > 0 and not [key for key in bucket.objects if key.startswith("wal/")]
    reader.cache.drop_ledger(9)  # what its catch-up brought in: the read must go to the bucket
    assert [bytes(e) for e in await followed.read_range(0, 2)] == [payload(9, i) for i in range(3)]
    followed.release()
    owner.close()


async def test_told_the_owners_position_a_follower_reads_the_new_objects_by_key_without_a_list():
    bucket, owner, reader, ledger = await written(1)
    followed = await reader.open_follower(9)
    for i in range(1, 4):
        await ledger.sync(ledger.add_entry([payload(9, i)]))
    lists = bucket.calls["list"]
    position = owner.position()
    assert position is not None and position.startswith("2-1:")
    reader.heard(position)
    assert await followed.catch_up() == 3
    reader.heard(position)  # nothing new since: nothing read
    gets = bucket.calls["get"]
    assert await followed.catch_up() == 3
    assert bucket.calls["list"] == lists and bucket.calls["get"] == gets
    assert await followed.catch_up() == 3  # not told this time: a LIST
    assert bucket.calls["list"] == lists + 1
    followed.release()
    owner.close()
