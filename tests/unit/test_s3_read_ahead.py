"""The object store's catch-up read-ahead, against a fake bucket that records each range
GET: a sequential reader keeps READ_AHEAD_BLOCKS blocks on their way whether its block
was a hit or a miss, asks for each block once, and a miss's GET overlaps the ones ahead."""
import asyncio

from kgate.storage.stores import block_index, wal_object
from kgate.storage.stores.block_reader import READ_AHEAD_BLOCKS
from kgate.storage.stores.object_ledger import S3Ledger
from kgate.storage.stores.s3_store import S3LedgerStore
from kgate.storage.stores.wal_object import Run

LEDGER = 5
ENTRIES = 40


class Bucket:
    """One object; every range GET is recorded and waits until ``open`` is set."""

    def __init__(self, data: bytes):
        self.data = data
        self.gets: list[int] = []
        self.open = asyncio.Event()
        self.open.set()

    async def get_range(self, key: str, start: int, end: int) -> memoryview:
        self.gets.append(start)
        await self.open.wait()
        return memoryview(self.data[start:end])


def payload(entry_id: int) -> bytes:
    return bytes([entry_id]) * 300


def compacted_ledger(monkeypatch) -> tuple[S3LedgerStore, S3Ledger, Bucket]:
    """A sealed ledger of ENTRIES entries in one object, in blocks of three entries."""
    monkeypatch.setattr(block_index, "READ_BLOCK_BYTES", 1000)
    buffers, run, pos = [], Run(LEDGER, 0, 0), 0
    for entry_id in range(ENTRIES):
        framed, length = wal_object.frame([payload(entry_id)])
        buffers += framed
        run.lengths.append(length)
        run.heads.append(wal_object.head_of([payload(entry_id)]))
        pos += wal_object.FRAME.size + length
    bucket = Bucket(b"".join(buffers))
    store = S3LedgerStore(bucket, "reader")  # type: ignore[arg-type]
    ledger = S3Ledger(store, LEDGER)
    ledger.load([("ledgers/data", run)], ENTRIES - 1)
    return store, ledger, bucket


async def settle():
    for _ in range(10):
        await asyncio.sleep(0)


async def test_a_sequential_reader_keeps_the_blocks_ahead_coming_on_hits_too(monkeypatch):
    store, ledger, bucket = compacted_ledger(monkeypatch)
    index = ledger.index
    blocks = len(index.keys)
    assert blocks >= READ_AHEAD_BLOCKS + 4
    for number in range(blocks):
        entries = index.entries_of(number)
        read = await ledger.read_range(entries.start, entries.stop - 1)
        assert [bytes(e) for e in read] == [payload(i) for i in entries]
        await settle()
        # Every block up to READ_AHEAD_BLOCKS past this one was asked for, none further.
        wanted = range(min(blocks, number + 1 + READ_AHEAD_BLOCKS))
        assert sorted(set(bucket.gets)) == [index.block_start[n] for n in wanted]
    assert len(bucket.gets) == blocks  # each block once
    assert store.cache.misses == 1  # only the first block was waited for
    store.close()


async def test_a_miss_asks_for_the_blocks_ahead_before_its_own_get_returns(monkeypatch):
    store, ledger, bucket = compacted_ledger(monkeypatch)
    bucket.open.clear()
    reading = asyncio.ensure_future(ledger.read_range(0, 0))
    await settle()
    assert not reading.done()
    assert bucket.gets == [ledger.index.block_start[n] for n in range(1 + READ_AHEAD_BLOCKS)]
    bucket.open.set()
    assert [bytes(e) for e in await reading] == [payload(0)]
    store.close()
