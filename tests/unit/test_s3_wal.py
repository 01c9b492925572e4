"""The S3 WAL against an in-memory bucket with injected faults: an entry is confirmed only
after the PUT holding it succeeded and the writer lease still held, in the order the
objects were cut (whichever PUT finished first), objects cut a gap apart and, while a PUT
is out, as soon as it returns, and a failed PUT gives up its entries and confirms
nothing after them."""
import asyncio

import pytest

from kgate.storage.ledger import LedgerFenced
from kgate.storage.stores import s3_wal
from kgate.storage.stores.object_layout import ObjectStoreUnavailable
from kgate.storage.stores.s3_store import S3LedgerStore
from tests.unit.memory_bucket import MemoryBucket, payload, settle


def store(bucket: MemoryBucket, writer: str = "w1", lease=None, interval_ms: int = 0) -> S3LedgerStore:
    return S3LedgerStore(bucket, writer, lease, commit_interval_ms=interval_ms)  # type: ignore[arg-type]


async def test_an_entry_is_confirmed_once_its_put_succeeded_and_a_fresh_store_reads_it_back():
    bucket = MemoryBucket()
    writer = store(bucket)
    ledger = writer.create_ledger(7)
    await settle()  # the writer record is PUT 0
    gate = bucket.hold_put(1)
    entry = ledger.add_entry([payload(7, 0)])
    syncing = asyncio.ensure_future(ledger.sync(entry))
    await settle()
    assert not syncing.done() and ledger.last_add_confirmed == -1  # the PUT is slow
    gate.set()
    await asyncio.wait_for(syncing, 5)
    assert ledger.last_add_confirmed == 0
    writer.close()
    reopened = await store(bucket, "w2").open_ledger(7, None)  # recovery from the objects alone
    assert [bytes(e) for e in await reopened.read_range(0, 0)] == [payload(7, 0)]


async def turns_until(condition, turns: int = 50) -> None:
    """Let the event loop run until ``condition`` holds, for at most ``turns`` turns (the test's
    asserts say whether it came)."""
    for _ in range(turns):
        if condition():
            return
        await asyncio.sleep(0)


async def test_a_slow_put_holds_back_the_confirmation_of_later_objects():
    bucket = MemoryBucket()
    writer = store(bucket)
    ledger = writer.create_ledger(7)
    await settle()
    gate = bucket.hold_put(1)
    first = ledger.add_entry([payload(7, 0)])
    await settle()  # the first object's PUT started and waits
    second = ledger.add_entry([payload(7, 1)])
    later = asyncio.ensure_future(ledger.sync(second))
    await turns_until(lambda: len(bucket.objects) == 2)  # the second object stored (its PUT is not held)
    assert len(bucket.objects) == 2 and bucket.puts[2].startswith("wal/w1/")
    assert ledger.last_add_confirmed == -1 and not later.done()
    gate.set()
    await asyncio.wait_for(later, 5)
    assert ledger.last_add_confirmed == second and first == 0
    writer.close()


async def test_a_later_object_stored_first_confirms_nothing_of_any_ledger_before_the_earlier_one():
    bucket = MemoryBucket()
    writer = store(bucket)
    first, second = writer.create_ledger(7), writer.create_ledger(8)
    await settle()  # the writer records are PUTs 0 and 1
    gate = bucket.hold_put(2)
    held = first.add_entry([payload(7, 0)])
    await settle()  # the first object's PUT started and waits
    entry = second.add_entry([payload(8, 0)])
    later = asyncio.ensure_future(second.sync(entry))
    await turns_until(lambda: bucket.puts[3:] and bucket.puts[3] in bucket.objects)  # the second object stored
    assert bucket.puts[3] in bucket.objects and bucket.puts[2] not in bucket.objects
    assert second.last_add_confirmed == -1 and not later.done()
    gate.set()
    await asyncio.wait_for(later, 5)
    assert (first.last_add_confirmed, second.last_add_confirmed) == (held, entry)
    writer.close()


def paced(monkeypatch, gap_fraction: float):
    """(bucket, writer, ledger 7) under an interval no test waits out: what moves objects is the
    PUTs returning and the gap (``gap_fraction`` of the interval) between cuts."""
    monkeypatch.setattr(s3_wal, "GAP_FRACTION", gap_fraction)
    bucket = MemoryBucket()
    writer = store(bucket, interval_ms=600_000)
    return bucket, writer, writer.create_ledger(7)


async def test_entries_waiting_while_a_put_is_out_go_as_soon_as_it_returns_not_at_the_next_interval(monkeypatch):
    bucket, writer, ledger = paced(monkeypatch, 0)
    await settle()
    gate = bucket.hold_put(1)
    ledger.add_entry([payload(7, 0)])  # no PUT out: the first object is cut at once
    await settle()
    waiting = asyncio.ensure_future(ledger.sync(ledger.add_entry([payload(7, 1)])))
    await settle()
    assert len(bucket.puts) == 2 and not waiting.done()  # its object waits for the PUT out
    gate.set()
    await asyncio.wait_for(waiting, 5)
    assert ledger.last_add_confirmed == 1 and len(bucket.puts) == 3
    writer.close()


async def test_objects_are_cut_a_gap_apart_however_soon_the_last_put_returned(monkeypatch):
    bucket, writer, ledger = paced(monkeypatch, 1)
    await asyncio.wait_for(ledger.sync(ledger.add_entry([payload(7, 0)])), 5)
    waiting = asyncio.ensure_future(ledger.sync(ledger.add_entry([payload(7, 1)])))
    await settle()
    assert sum(key.startswith("wal/") for key in bucket.puts) == 1 and not waiting.done()
    writer.close()


async def test_a_failed_put_gives_up_its_entries_and_the_ledger_takes_no_more():
    bucket = MemoryBucket()
    writer = store(bucket)
    ledger = writer.create_ledger(7)
    await settle()
    bucket.failing_puts = 1
    entry = ledger.add_entry([payload(7, 0)])
    with pytest.raises(ObjectStoreUnavailable):
        await asyncio.wait_for(ledger.sync(entry), 5)
    assert ledger.failed and ledger.last_add_confirmed == -1 and ledger.last_add_pushed == -1
    with pytest.raises(LedgerFenced):
        ledger.add_entry([payload(7, 1)])
    # The store goes on: the owner's next ledger is written as usual.
    other = writer.create_ledger(8)
    await asyncio.wait_for(other.sync(other.add_entry([payload(8, 0)])), 5)
    assert other.last_add_confirmed == 0
    writer.close()


class LostLease:
    generation = 0

    async def confirm(self, generation: int) -> bool:
        return False


async def test_a_put_stored_after_the_lease_was_lost_confirms_nothing():
    bucket = MemoryBucket()
    writer = store(bucket, lease=LostLease())
    ledger = writer.create_ledger(7)
    entry = ledger.add_entry([payload(7, 0)])
    with pytest.raises(LedgerFenced):
        await asyncio.wait_for(ledger.sync(entry), 5)
    assert any(key.startswith("wal/") for key in bucket.objects)  # stored, yet never acknowledged
    assert ledger.last_add_confirmed == -1
    writer.close()


async def test_a_writer_record_already_taken_fences_the_new_writer():
    """Two writers of one ledger id: the conditional PUT of the second's record fails, and
    none of its entries is confirmed."""
    bucket = MemoryBucket()
    bucket.taken.add("ledgers/0000000000000000007/writer")
    writer = store(bucket)
    ledger = writer.create_ledger(7)
    entry = ledger.add_entry([payload(7, 0)])
    with pytest.raises(ObjectStoreUnavailable, match="writer record"):
        await asyncio.wait_for(ledger.sync(entry), 5)
    assert ledger.last_add_confirmed == -1
    writer.close()
