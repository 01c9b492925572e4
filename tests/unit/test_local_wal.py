"""The local WAL against an in-memory bucket with injected faults: an entry is acknowledged
once fsync'd, a failed upload loses nothing (it goes again), and what a crash left only on
this broker's disk is drained into the bucket before the ledger is opened elsewhere."""
import asyncio

import pytest

from kgate.storage.ledger import TailUnreachable
from kgate.storage.stores import local_wal
from kgate.storage.stores.s3_store import S3LedgerStore
from tests.unit.memory_bucket import MemoryBucket, payload, settle

LEDGER = 7


def store(bucket: MemoryBucket, writer: str, directory=None) -> S3LedgerStore:
    return S3LedgerStore(bucket, writer, commit_interval_ms=0,  # type: ignore[arg-type]
                         local_wal=None if directory is None else str(directory))


async def uploaded(ledger, entry_id: int) -> None:
    async def through() -> None:
        while ledger.uploaded < entry_id:
            ledger.progress.clear()
            await ledger.progress.wait()
    await asyncio.wait_for(through(), 5)


async def test_a_failed_upload_loses_nothing_and_goes_again(tmp_path, monkeypatch):
    monkeypatch.setattr(local_wal, "RETRY_SECONDS", 0)
    bucket = MemoryBucket()
    writer = store(bucket, "w1", tmp_path)
    ledger = writer.create_ledger(LEDGER)
    await settle()
    bucket.failing_puts = 1
    await ledger.sync(ledger.add_entry([payload(LEDGER, 0)]))
    assert ledger.last_add_confirmed == 0  # acknowledged once fsync'd
    await uploaded(ledger, 0)
    wal = [key for key in bucket.puts if key.startswith("wal/")]
    assert len(wal) == 2 and wal[0] != wal[1] and wal[0] not in bucket.objects  # the failed key is not reused
    await ledger.close()
    writer.close()
    opened = await store(bucket, "w2").open_ledger(LEDGER, 0)
    assert [bytes(e) for e in await opened.read_range(0, 0)] == [payload(LEDGER, 0)]


async def test_what_a_crash_left_on_disk_is_drained_before_the_ledger_opens(tmp_path):
    bucket = MemoryBucket()
    writer = store(bucket, "w1", tmp_path)
    ledger = writer.create_ledger(LEDGER)
    await settle()
    for number in range(1, 10):
        bucket.hold_put(number)  # no upload finishes: the crash comes first
    for entry_id in range(3):
        await ledger.sync(ledger.add_entry([payload(LEDGER, entry_id)]))
    writer.close()  # a crash: nothing sealed, the entries only in the directory
    bucket.held.clear()
    assert not [key for key in bucket.objects if key.startswith("wal/")]
    with pytest.raises(TailUnreachable):
        await store(bucket, "w2").open_ledger(LEDGER, None)  # not sealed short elsewhere
    restarted = store(bucket, "w3", tmp_path)
    recovered = await asyncio.wait_for(restarted.open_ledger(LEDGER, None), 5)
    assert [bytes(e) for e in await recovered.read_range(0, 2)] == [payload(LEDGER, i) for i in range(3)]
    restarted.close()
    again = await store(bucket, "w4").open_ledger(LEDGER, None)  # sealed now: anyone opens it
    assert again.last_add_confirmed == 2
