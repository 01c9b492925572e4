"""The S3 WAL (``--wal s3``): every entry added, for every ledger this broker writes, goes
into the next WAL object. While no PUT is out an object is cut as soon as a gap (a quarter
of the commit interval) has passed since the last cut; while one is out, the entries wait
for it to return, unless it is still out a commit interval after the last cut (then they
are stored beside it: up to MAX_INFLIGHT_PUTS at once); MAX_OBJECT_BYTES waiting are cut
at once. A sync resolves only after the PUT holding its entry succeeded and the writer
lease (storage.stores.ledger_records) still held, so an acknowledged entry is in an object
and no entry past a recovery's seal is confirmed. Objects are confirmed in the order they
were cut, whichever PUT finished first, so an entry is acknowledged only when it and every
entry before it are durable. Under load an entry waits for its object about one PUT or
the gap, whichever is longer, then its own PUT; the PUT rate is at most one per gap,
whatever the number of partitions.
"""
import asyncio
import logging
import time
from dataclasses import dataclass, field

from ..ledger import LedgerFenced
from . import wal_object
from .ledger_records import WriterLease
from .object_layout import ObjectStoreUnavailable
from .object_ledger import LedgerHome, S3Ledger
from .wal_object import Run
from .wal_seam import ObjectCuts, Wal, WalObjects

log = logging.getLogger(__name__)

# A WAL object is cut before the interval ends once this much is waiting: a few MiB per
# PUT is where one stream's throughput levels off here (bench/s3_clients.py).
MAX_OBJECT_BYTES = 8 * 1024 * 1024
# Objects are cut at least this part of the commit interval apart: the PUT rate is at
# most 1 / (interval * GAP_FRACTION), 40/s at 100 ms (group commit alone, one object as
# soon as the last PUT returns, took 27,000-43,000 PUTs per GB at 4 MB/s here).
GAP_FRACTION = 0.25
# PUTs in flight at once: loopback PUT throughput is ~55 MB/s per stream, ~4x with 4.
MAX_INFLIGHT_PUTS = 4


@dataclass(eq=False)
class _Batch:
    """Entries waiting for one WAL object: per ledger, (entry id, framed buffers, length, head)."""

    generation: int
    entries: dict[S3Ledger, list[tuple[int, list, int, bytes]]] = field(default_factory=dict)
    began: float = field(default_factory=time.monotonic)
    size: int = 0
    done: asyncio.Future = field(default_factory=lambda: asyncio.get_running_loop().create_future())


class ObjectWal(Wal):
    """Collects the entries of every ledger this broker writes into WAL objects, PUT in turn."""

    def __init__(self, home: LedgerHome, client, objects: WalObjects, lease: WriterLease, interval: float):
        self._home = home
        self._client = client
        self._objects = objects
        self._lease = lease
        self._batch: _Batch | None = None
        self._cuts = ObjectCuts(interval, MAX_INFLIGHT_PUTS, gap=interval * GAP_FRACTION)
        self._previous: asyncio.Future | None = None
        self._task: asyncio.Task | None = None
        self._uploads: set[asyncio.Task] = set()
        self._waiting: set[_Batch] = set()  # batches not yet confirmed or failed

    def create_ledger(self, ledger_id: int) -> S3Ledger:
        return S3Ledger(self._home, ledger_id, self)

    def lag_seconds(self) -> float:
        oldest = min((batch.began for batch in self._waiting), default=None)
        return 0.0 if oldest is None else time.monotonic() - oldest

    def add(self, ledger: S3Ledger, entry_id: int, chunks) -> int:
        if self._task is None:
            self._task = asyncio.ensure_future(self._run())
        if self._batch is None:
            self._batch = _Batch(self._lease.generation)
            self._waiting.add(self._batch)
            self._cuts.kick.set()
        buffers, length = wal_object.frame(chunks)
        self._batch.entries.setdefault(ledger, []).append((entry_id, buffers, length, wal_object.head_of(chunks)))
        self._batch.size += wal_object.FRAME.size + length
        ledger.waiting(entry_id, self._batch.done)
        if self._batch.size >= MAX_OBJECT_BYTES:
            self._cuts.fill()
        return length

    async def _run(self) -> None:
        while True:
            await self._cuts.next()
            batch, self._batch = self._batch, None
            if batch is None:
                self._cuts.done()
                continue
            self._cuts.cut()
            previous, self._previous = self._previous, batch.done
            task = asyncio.ensure_future(self._upload(batch, self._objects.take_key(), previous))
            self._uploads.add(task)
            task.add_done_callback(self._uploads.discard)

    async def _upload(self, batch: _Batch, key: str, previous: asyncio.Future | None) -> None:
        failure: BaseException | None = None
        runs: list[tuple[S3Ledger, Run]] = []
        data = memoryview(b"")
        try:
            await _writer_records(batch)
            data, runs = _build(batch)
            if runs:
                try:
                    await self._client.put(key, data)
                    self._objects.stored(len(data))
                except Exception as exc:
                    failure = ObjectStoreUnavailable(f"WAL object {key}: {exc}")
        finally:
            self._cuts.done()
        if previous is not None:
            await asyncio.wait([previous])  # confirm in order, whatever became of the previous one
        if failure is None and runs and not await self._leased(batch.generation):
            failure = LedgerFenced(f"WAL object {key}: this broker's metadata session was lost; "
                                   "its ledgers may have been recovered by another broker")
        self._waiting.discard(batch)
        self._settle(batch, key, data, runs, failure)

    async def _leased(self, generation: int) -> bool:
        return generation == self._lease.generation and await self._lease.confirm(generation)

    def _settle(self, batch: _Batch, key: str, data: memoryview, runs: list[tuple[S3Ledger, Run]],
                failure: BaseException | None) -> None:
        for ledger, run in runs:
            if failure is not None:
                ledger.fail(failure)
            else:
                ledger.confirmed(key, run, data)
        if failure is not None:
            log.error("%s", failure)
            batch.done.set_exception(failure)
            batch.done.exception()  # retrieved: each waiter reads its ledger's failure instead
            return
        batch.done.set_result(None)
        self._objects.confirmed(key)

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
        for task in list(self._uploads):
            task.cancel()


async def _writer_records(batch: _Batch) -> None:
    """Wait for each ledger's writer record: an entry is confirmed only once it is written
    (a recovery finding no record takes the ledger for empty)."""
    for ledger in batch.entries:
        if ledger.manifest is not None and not ledger.failed:
            try:
                await asyncio.shield(ledger.manifest)
            except Exception as exc:
                ledger.fail(ObjectStoreUnavailable(f"ledger {ledger.ledger_id}: writer record: {exc}"))


def _build(batch: _Batch) -> tuple[memoryview, list[tuple[S3Ledger, Run]]]:
    buffers: list = []
    runs: list[tuple[S3Ledger, Run]] = []
    pos = 0
    for ledger, entries in batch.entries.items():
        entries = [e for e in entries if e[0] > ledger.last_add_confirmed] if not ledger.failed else []
        if not entries:
            continue
        run = Run(ledger.ledger_id, entries[0][0], pos)
        for _entry_id, framed, length, head in entries:
            buffers.extend(framed)
            run.lengths.append(length)
            run.heads.append(head)
            pos += wal_object.FRAME.size + length
        runs.append((ledger, run))
    buffers.append(wal_object.object_index([run for _, run in runs]))
    return memoryview(b"".join(buffers)), runs
