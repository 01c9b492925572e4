"""Recovery and fencing from the records in the bucket alone, against an in-memory bucket
with injected faults: a recovery keeps entries up to the first it cannot find and seals
there, a sealed piece another recovery took first is read, not overwritten, and index
pieces written on checkpoint and close make WAL object reads unnecessary."""
import asyncio
import logging

import pytest

from kgate.storage.ledger import CorruptLedger, TailUnreachable
from kgate.storage.stores import wal_seam
from kgate.storage.stores.s3_store import S3LedgerStore
from tests.unit.memory_bucket import MemoryBucket, payload

LEDGER = 7


def store(bucket: MemoryBucket, writer: str) -> S3LedgerStore:
    return S3LedgerStore(bucket, writer, commit_interval_ms=0)  # type: ignore[arg-type]


async def written(bucket: MemoryBucket, entries: int, close: bool = False) -> list[str]:
    """A writer puts ``entries`` entries into LEDGER, one WAL object each; their keys."""
    writer = store(bucket, "w1")
    ledger = writer.create_ledger(LEDGER)
    for entry_id in range(entries):
        await asyncio.wait_for(ledger.sync(ledger.add_entry([payload(LEDGER, entry_id)])), 5)
    if close:
        await ledger.close()
    writer.close()
    return sorted(key for key in bucket.objects if key.startswith("wal/"))


async def read_all(ledger) -> list[bytes]:
    return [bytes(e) for e in await ledger.read_range(0, ledger.last_add_confirmed)]


async def test_recovery_stops_at_a_wal_object_the_listing_left_out_and_seals_there():
    bucket = MemoryBucket()
    wal = await written(bucket, 4)
    bucket.unlisted.add(wal[2])  # a listing that missed one object: entry 2 cannot be found
    recovered = await store(bucket, "w2").open_ledger(LEDGER, None)
    assert await read_all(recovered) == [payload(LEDGER, i) for i in range(2)]
    sealed = [key for key in bucket.objects if key.endswith(".sealed")]
    assert len(sealed) == 1
    # Every later open agrees on that end, whatever it lists now.
    bucket.unlisted.clear()
    again = await store(bucket, "w3").open_ledger(LEDGER, None)
    assert again.last_add_confirmed == 1


async def test_a_sealed_piece_another_recovery_took_first_is_not_overwritten(caplog):
    bucket = MemoryBucket()
    await written(bucket, 3)
    bucket.taken.add("ledgers/0000000000000000007/index-00000000000000000002.sealed")
    with caplog.at_level(logging.WARNING):
        recovered = await store(bucket, "w2").open_ledger(LEDGER, None)
    assert recovered.last_add_confirmed == 2
    assert "sealed by another recovery" in caplog.text
    assert not [key for key in bucket.objects if key.endswith(".sealed")]


async def test_a_closed_ledger_opens_from_its_pieces_without_reading_wal_objects():
    bucket = MemoryBucket()
    await written(bucket, 3, close=True)
    before = bucket.calls["get"]
    opened = await store(bucket, "w2").open_ledger(LEDGER, 2)
    assert bucket.calls["get"] - before == 2  # the writer record and the sealed piece
    assert await read_all(opened) == [payload(LEDGER, i) for i in range(3)]


async def test_checkpoints_write_index_pieces_every_checkpoint_objects(monkeypatch):
    monkeypatch.setattr(wal_seam, "CHECKPOINT_OBJECTS", 2)
    bucket = MemoryBucket()
    await written(bucket, 4)
    await asyncio.sleep(0)
    pieces = [key for key in bucket.objects if "/index-" in key]
    assert pieces and not any(key.endswith(".sealed") for key in pieces)
    recovered = await store(bucket, "w2").open_ledger(LEDGER, None)
    assert recovered.last_add_confirmed == 3


async def test_checkpoints_are_checkpoint_seconds_apart_however_fast_objects_go(monkeypatch):
    monkeypatch.setattr(wal_seam, "CHECKPOINT_OBJECTS", 2)
    monkeypatch.setattr(wal_seam, "CHECKPOINT_SECONDS", 600.0)
    bucket = MemoryBucket()
    await written(bucket, 8)
    await asyncio.sleep(0)
    assert len([key for key in bucket.objects if "/index-" in key]) == 1  # the first, none 600 s after
    recovered = await store(bucket, "w2").open_ledger(LEDGER, None)
    assert recovered.last_add_confirmed == 7


async def test_metadata_naming_more_entries_than_the_bucket_holds_is_damage():
    bucket = MemoryBucket()
    await written(bucket, 2, close=True)
    with pytest.raises(CorruptLedger, match="metadata says 5"):
        await store(bucket, "w2").open_ledger(LEDGER, 4)


async def test_a_tail_in_another_brokers_local_wal_is_not_sealed_short():
    bucket = MemoryBucket()
    record = b'{"writer": "w1", "first_seq": 0, "local_wal": "elsewhere"}'
    bucket.objects["ledgers/0000000000000000007/writer"] = record
    with pytest.raises(TailUnreachable, match="elsewhere"):
        await store(bucket, "w2").open_ledger(LEDGER, None)
    assert not [key for key in bucket.objects if "/index-" in key]
