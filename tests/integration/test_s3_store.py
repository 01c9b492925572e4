"""The object ledger store against a real S3 engine (SeaweedFS, or Ceph RGW with
KGATE_S3_ENGINE=ceph): durability, recovery from objects alone, fencing of a writer that
lost its lease, damage detection and the bounded PUT rate."""
import asyncio

import pytest

from kgate.storage.ledger import ChecksumMismatch, CorruptLedger, LedgerFenced
from kgate.storage.stores import wal_object
from kgate.storage.stores.bucket_location import BucketLocation
from kgate.storage.stores.object_client import ObjectClient, ObjectExists
from kgate.storage.stores.s3_store import S3LedgerStore


@pytest.fixture
def location(bucket_url):
    """A prefix of its own in the session's S3 engine (KGATE_S3_ENGINE), credentials in the environment."""
    return BucketLocation.parse(bucket_url)


class Lease:
    """A writer lease the test can take away (the broker backs it with its metadata session)."""

    def __init__(self):
        self.generation = 0
        self.held = True

    async def confirm(self, generation: int) -> bool:
        return self.held and generation == self.generation

    def lose(self):
        self.held = False
        self.generation += 1


def store(location, writer="w1", lease=None, interval_ms=20):
    return S3LedgerStore(ObjectClient(location), writer, lease, commit_interval_ms=interval_ms)


def payload(ledger_id: int, entry_id: int) -> bytes:
    return f"ledger {ledger_id} entry {entry_id} ".encode() * (1 + entry_id % 50)


async def write(ledger, first: int, count: int):
    last = -1
    for entry_id in range(first, first + count):
        half = len(payload(ledger.ledger_id, entry_id)) // 2
        data = payload(ledger.ledger_id, entry_id)
        last = ledger.add_entry([data[:half], data[half:]])
    await ledger.sync(last)


async def test_a_create_retried_after_its_answer_was_lost_finds_its_own_object_not_a_conflict(location):
    """A conditional PUT retried after its first try succeeded unanswered finds the key taken
    by its own bytes: that is its success; other bytes under the key are a conflict."""
    client = ObjectClient(location)
    await client.create("ledgers/1/compacted", b"names data-1-attempt-a")
    await client.create("ledgers/1/compacted", b"names data-1-attempt-a")  # the retry
    with pytest.raises(ObjectExists):
        await client.create("ledgers/1/compacted", b"names data-1-attempt-b")
    assert await client.get("ledgers/1/compacted") == b"names data-1-attempt-a"


async def test_entries_of_many_ledgers_are_recovered_from_objects_alone_by_a_fresh_store(location):
    writer = store(location)
    ledgers = [writer.create_ledger(i) for i in range(5)]
    for round_ in range(4):
        await asyncio.gather(*(write(ledger, round_ * 10, 10) for ledger in ledgers))
    await ledgers[0].close()  # sealed: its index piece says so
    reader = store(location, writer="w2")
    for ledger in ledgers:
        opened = await reader.open_ledger(ledger.ledger_id, 39 if ledger is ledgers[0] else None)
        assert opened.last_add_confirmed == 39
        got = await opened.read_range(0, 39)
        assert [bytes(e) for e in got] == [payload(ledger.ledger_id, i) for i in range(40)]
        heads = await opened.read_heads(0, 39, 8) if ledger is not ledgers[0] else None
        if heads is not None:
            assert heads == [(len(payload(ledger.ledger_id, i)), payload(ledger.ledger_id, i)[:8]) for i in range(40)]
    writer.close()
    reader.close()


async def test_a_writer_whose_lease_is_gone_confirms_nothing_and_its_late_entries_stay_invisible(location):
    lease = Lease()
    writer = store(location, lease=lease)
    ledger = writer.create_ledger(7)
    await write(ledger, 0, 5)
    lease.lose()  # its session expired while it was paused: another broker recovers the ledger
    recovered = await store(location, writer="w2").open_ledger(7, None)
    assert recovered.last_add_confirmed == 4
    entry_id = ledger.add_entry([b"late"])
    with pytest.raises(LedgerFenced):
        await ledger.sync(entry_id)
    # The late entry's object was written, but whoever opens the ledger now sees the recovered end.
    again = await store(location, writer="w3").open_ledger(7, None)
    assert again.last_add_confirmed == 4
    writer.close()


async def test_recovery_keeps_the_entries_before_a_missing_object_and_nothing_after(location):
    writer = store(location, interval_ms=10)
    ledger = writer.create_ledger(3)
    for first in range(0, 30, 10):
        await write(ledger, first, 10)
    client = ObjectClient(location)
    wal = await client.keys("wal/w1/")
    assert len(wal) >= 3
    await client.delete([wal[1]])
    first_object = wal_object.read_object_index(await client.get(wal[0]), wal[0])
    recovered = await store(location, writer="w2").open_ledger(3, None)
    assert recovered.last_add_confirmed + 1 == sum(run.count for run in first_object) < 30
    assert [bytes(e) for e in await recovered.read_range(0, 99)] == [
        payload(3, i) for i in range(recovered.last_add_confirmed + 1)]
    writer.close()


async def test_a_damaged_object_is_refused_not_served(location):
    writer = store(location)
    ledger = writer.create_ledger(4)
    await write(ledger, 0, 10)
    await ledger.close()
    client = ObjectClient(location)
    (key,) = await client.keys("wal/w1/")
    data = bytearray(await client.get(key))
    data[20] ^= 0xFF  # inside the first entry's payload
    await client.put(key, bytes(data))
    opened = await store(location, writer="w2").open_ledger(4, 9)
    with pytest.raises(ChecksumMismatch):
        await opened.read_range(0, 9)


async def test_a_sealed_ledger_whose_objects_are_gone_is_corrupt(location):
    with pytest.raises(CorruptLedger):
        await store(location).open_ledger(99, 3)


async def test_wal_puts_follow_the_load_not_the_number_of_ledgers(location):
    writer = store(location, interval_ms=200)
    ledgers = [writer.create_ledger(100 + i) for i in range(40)]
    await asyncio.gather(*(write(ledger, 0, 5) for ledger in ledgers))
    wal_puts = len(await writer.client.keys("wal/w1/"))
    # 40 ledgers x 5 entries, written at once: a handful of objects, not one per ledger or entry.
    assert wal_puts <= 3
    writer.close()


async def test_a_missing_object_is_corruption_of_that_ledger(location):
    writer = store(location)
    ledger = writer.create_ledger(5)
    await write(ledger, 0, 3)
    await ledger.close()
    client = ObjectClient(location)
    await client.delete(await client.keys("wal/w1/"))
    opened = await store(location, writer="w2").open_ledger(5, 2)  # the sealed piece still says where
    with pytest.raises(CorruptLedger, match="missing"):
        await opened.read_range(0, 2)


async def test_compaction_moves_sealed_ledgers_into_objects_of_their_own_and_frees_the_wal(location, monkeypatch):
    from kgate.storage.stores import block_index, compaction, object_inventory

    writer = store(location, interval_ms=10)
    ledgers = [writer.create_ledger(20 + i) for i in range(3)]
    for round_ in range(6):
        await asyncio.gather(*(write(ledger, round_ * 10, 10) for ledger in ledgers))
    for ledger in ledgers:
        await ledger.close()
    writer.close()
    client = ObjectClient(location)
    assert len(await client.keys("wal/w1/")) >= 3
    expected = {ledger.ledger_id: [payload(ledger.ledger_id, i) for i in range(60)] for ledger in ledgers}
    early = await store(location, writer="w2").open_ledger(20, 59)  # keeps the index it read now
    compactor = store(location, writer="w3")
    opened = [await compactor.open_ledger(ledger_id, 59) for ledger_id in expected]
    monkeypatch.setattr(compaction, "COMPACTION_ROUND_BYTES", 1)  # a round's budget: one ledger
    assert compactor.compaction_backlog()[0] == 3
    assert await compactor.compact_round() == 1
    assert compactor.compaction_backlog()[0] == 2
    while await compactor.compact_round():
        pass
    assert compactor.compaction_backlog() == (0, 0)
    for ledger in opened:
        assert [bytes(e) for e in await ledger.read_range(0, 59)] == expected[ledger.ledger_id]
    # No live ledger needs a WAL object any more: collected. Each ledger is in its own objects.
    monkeypatch.setattr(object_inventory, "COMPACTED_GRACE_SECONDS", 0)
    live = set(expected)

    async def live_ledgers():
        return live
    await compactor.collect_garbage(live_ledgers)
    assert await client.keys("wal/") == []
    survey = await compactor.inventory.survey(live_ledgers, check_references=True)
    assert (survey.unreferenced, survey.missing, survey.damaged) == ([], [], [])
    # Read back in small blocks (several range GETs per object), by a broker that opens them
    # now and by one that had opened a ledger before it moved.
    monkeypatch.setattr(block_index, "READ_BLOCK_BYTES", 4096)
    fresh = store(location, writer="w4")
    for ledger_id, payloads in expected.items():
        ledger = await fresh.open_ledger(ledger_id, 59)
        assert [bytes(e) for e in await ledger.read_range(0, 59)] == payloads
    assert fresh.client.calls["get"] > 3 * 3
    assert [bytes(e) for e in await early.read_range(0, 59)] == expected[20]
    compactor.close()
    fresh.close()
