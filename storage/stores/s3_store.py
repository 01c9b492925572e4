"""The object ledger store: ledgers in S3-compatible object storage, written through a WAL.

With ``--wal s3`` a broker keeps nothing on local disk. Every entry it adds, for every
ledger it writes, goes into the next *WAL object*: one PUT per commit interval
(``kgate.s3.wal.commit.interval.ms``, or sooner once ``MAX_OBJECT_BYTES`` are waiting)
under ``wal/<writer>/<seq>``, where the writer is the broker id and an epoch taken from
the metadata store at start-up, so no two processes ever write the same key. A sync
resolves only after the PUT holding its entry succeeded, so an acknowledged entry is in
an object. The PUT rate is bounded by the interval, not by the number of partitions.

Where entries are is kept in the objects, never only in memory: each WAL object ends
with an index of the runs it holds (storage.stores.wal_object), and each ledger has
``ledgers/<id>/writer`` (written with If-None-Match: * before its first entry can be
confirmed: which writer, from which WAL object on) and *index pieces*
``ledgers/<id>/index-<seq>`` (its runs through WAL object ``seq``), written in the
background every ``CHECKPOINT_OBJECTS`` WAL objects and, marked ``.sealed``, when it is
closed. Another broker with an empty data directory opens a ledger from these alone:
the pieces, then the indexes of the writer's WAL objects after the last piece.

Fencing. A ledger's recovery (``open_ledger`` with no last entry) keeps the entries
from 0 up to the first one it cannot find, and seals that in a ``.sealed`` piece. The
old writer must not acknowledge anything past it: after each PUT, before confirming,
the WAL asks its ``WriterLease`` (the broker backs it with its metadata session, which
holds the ownership claims). Recovery starts only after the old owner's claim is gone,
so a PUT confirmed while the lease held was listed by it; a writer that was paused past
its session finds the lease gone and confirms nothing more (its late objects hold ids
past the sealed end, which no reader takes). Conditional PUTs guard the writer and
sealed records as a second line, off the hot path.

Nothing leaks. Deleting a ledger deletes its own records at once; a WAL object, shared
by many ledgers, goes only when none of the ledgers in its index is listed by any chain
any more (storage.stores.object_inventory: why that is safe with many brokers). The
broker asks for that collection in the background (``collect_garbage``), a bounded
number of deletes at a time.

Reads never block the loop: tail entries come from memory (the runs this broker just
wrote stay in a bounded cache), older ones with range GETs of a ledger's blocks (a run in
an object, or up to READ_BLOCK_BYTES of a long one), with the next blocks fetched ahead,
into a bounded cache of their own.

Compaction (``compact_round``) rewrites the sealed ledgers a broker holds out of the
shared WAL objects into objects of their own, so old data is read sequentially and WAL
objects can go. With ``--wal file:DIR`` entries are durable in a local WAL first and
reach WAL objects in the background (storage.stores.local_wal).
"""
import asyncio
import json
import logging
import time
from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from ..ledger import CorruptLedger, Ledger, LedgerFenced, LedgerStore, TailUnreachable
from . import wal_object
from .block_cache import BlockCache
from .object_client import ObjectClient, ObjectExists
from .object_inventory import LiveLedgers, ObjectInventory
from .wal_object import FRAME, HEAD_BYTES, Run

log = logging.getLogger(__name__)

# A WAL object is cut before the interval ends once this much is waiting: a few MiB per
# PUT is where one stream's throughput levels off here (bench/s3_clients.py).
MAX_OBJECT_BYTES = 8 * 1024 * 1024
# PUTs in flight at once: loopback PUT throughput is ~55 MB/s per stream, ~4x with 4.
MAX_INFLIGHT_PUTS = 4
# Index pieces are written every this many WAL objects, so a recovery reads at most this
# many WAL object indexes beyond the pieces (about 5 s of writing at 100 ms).
CHECKPOINT_OBJECTS = 50
# A catch-up reader GETs a ledger's entries in blocks: a run in a WAL object, or up to this
# much of a long run in a compacted object (a few MiB is where a GET's throughput levels
# off here), with the next blocks fetched ahead; and at most this many GETs in flight.
READ_BLOCK_BYTES = 2 * 1024 * 1024
READ_AHEAD_BLOCKS = 2
MAX_INFLIGHT_GETS = 8
# Compaction writes a ledger's entries into objects of up to this size, and rewrites about
# COMPACTION_ROUND_BYTES per round (at least one ledger).
COMPACT_OBJECT_BYTES = 32 * 1024 * 1024
COMPACTION_ROUND_BYTES = 256 * 1024 * 1024
# The piece that lists every run of a compacted ledger, all in its own objects.
COMPACTED = "compacted"
# Objects deleted per garbage collection (one DeleteObjects request holds up to 1000 keys).
MAX_DELETES_PER_COLLECTION = 1000


class ObjectStoreUnavailable(OSError):
    """A WAL PUT failed (after the client's retries): its entries are given up, never confirmed."""


class MissingObject(CorruptLedger):
    """An object an index names is not in the bucket (damage, or moved by compaction)."""


@dataclass(eq=False)
class _Index:
    """Where a ledger's entries are: its *blocks* (a run in one object, or a piece of a long
    one, at most READ_BLOCK_BYTES) and, per entry, its block, position in it and length.

    Compaction swaps a ledger's index for a new one whole, so a read that took the index
    goes on with one consistent view.
    """

    keys: list[str] = field(default_factory=list)
    block_start: array = field(default_factory=lambda: array("q"))
    block_end: array = field(default_factory=lambda: array("q"))
    block_first: array = field(default_factory=lambda: array("q"))  # first entry id of each block
    entry_block: array = field(default_factory=lambda: array("i"))
    entry_pos: array = field(default_factory=lambda: array("q"))
    entry_len: array = field(default_factory=lambda: array("q"))

    def add_run(self, key: str, run: Run) -> range:
        """Take ``run`` (in object ``key``); return the numbers of the blocks it became."""
        first_block = len(self.keys)
        for entry_id, (pos, length) in enumerate(zip(run.positions(), run.lengths), run.first_entry):
            end = pos + FRAME.size + length
            if len(self.keys) == first_block or end - self.block_start[-1] > READ_BLOCK_BYTES:
                self.keys.append(key)
                self.block_start.append(pos)
                self.block_end.append(end)
                self.block_first.append(entry_id)
            else:
                self.block_end[-1] = end
            self.entry_block.append(len(self.keys) - 1)
            self.entry_pos.append(pos - self.block_start[-1])
            self.entry_len.append(length)
        return range(first_block, len(self.keys))

    def location(self, number: int) -> tuple[str, int, int] | None:
        if number >= len(self.keys):
            return None
        return self.keys[number], self.block_start[number], self.block_end[number]

    def entries_of(self, number: int) -> range:
        stop = self.block_first[number + 1] if number + 1 < len(self.keys) else len(self.entry_len)
        return range(self.block_first[number], stop)


class WriterLease(Protocol):
    """Whether this broker still holds what made it the writer of its ledgers.

    ``generation`` changes when the lease is lost (the metadata session expired);
    ``confirm`` answers, after a round trip, whether a lease taken at ``generation``
    still holds.
    """

    generation: int

    async def confirm(self, generation: int) -> bool: ...


class Unleased:
    """The lease of a single broker with nobody to hand over to (embedded metadata)."""

    generation = 0

    async def confirm(self, generation: int) -> bool:
        return True


def _wal_key(writer: str, seq: int) -> str:
    return f"wal/{writer}/{seq:020d}"


def _ledger_prefix(ledger_id: int) -> str:
    return f"ledgers/{ledger_id:019d}/"


def _piece_key(ledger_id: int, seq: int, sealed: bool) -> str:
    return f"{_ledger_prefix(ledger_id)}index-{seq:020d}" + (".sealed" if sealed else "")


def _piece_seq(key: str) -> int:
    return int(key.rsplit("index-", 1)[1].split(".")[0])


@dataclass(eq=False)
class _Batch:
    """Entries waiting for one WAL object: per ledger, (entry id, framed buffers, length, head)."""

    generation: int
    entries: dict["S3Ledger", list[tuple[int, list, int, bytes]]] = field(default_factory=dict)
    began: float = field(default_factory=time.monotonic)
    size: int = 0
    done: asyncio.Future = field(default_factory=lambda: asyncio.get_running_loop().create_future())


class S3Ledger(Ledger):
    def __init__(self, store: "S3LedgerStore", ledger_id: int, writable: bool):
        self.ledger_id = ledger_id
        self._store = store
        self._writable = writable
        self._index = _Index()  # where each confirmed entry is
        self.sealed = False  # no entry will be added, by anyone: compaction may move its entries
        self._heads: list[bytes] = []  # recovered ledgers only, for read_heads at open
        self._pushed = -1
        self._bytes = 0
        self._waits: list[tuple[int, asyncio.Future]] = []  # (last entry id in a batch, its future)
        self._failure: BaseException | None = None
        self.manifest: asyncio.Future | None = None
        # Runs confirmed since the last index piece written, and whether one is being written.
        self.unpieced: list[tuple[str, Run]] = []
        self.piece_writing = False

    @property
    def uploaded(self) -> int:
        """The last entry known to be in an object (with the S3 WAL: the last confirmed)."""
        return len(self._index.entry_len) - 1

    @property
    def last_add_confirmed(self) -> int:
        return self.uploaded

    @property
    def last_add_pushed(self) -> int:
        return self._pushed

    @property
    def length(self) -> int:
        return self._bytes

    def add_entry(self, chunks) -> int:
        if not self._writable or self._failure is not None:
            raise LedgerFenced(f"ledger {self.ledger_id} is closed")
        self._pushed += 1
        self._bytes += self._store.wal.add(self, self._pushed, chunks)
        return self._pushed

    def waiting(self, entry_id: int, done: asyncio.Future) -> None:
        if self._waits and self._waits[-1][1] is done:
            self._waits[-1] = (entry_id, done)
        else:
            self._waits.append((entry_id, done))

    async def sync(self, entry_id: int) -> None:
        while entry_id > self.last_add_confirmed:
            if self._failure is not None:
                raise self._failure
            waits = [done for last, done in self._waits if last >= entry_id]
            if not waits:
                raise LedgerFenced(f"ledger {self.ledger_id}: entry {entry_id} was never added")
            try:
                await asyncio.shield(waits[0])
            except Exception:
                if self._failure is None:
                    raise
        self._waits = [(last, done) for last, done in self._waits if not done.done()]

    def confirmed(self, key: str, run: Run, data: memoryview) -> bool:
        """The entries of ``run`` are in object ``key`` (whose bytes are ``data``) for good;
        False (nothing taken) when they do not follow the last entry taken."""
        if run.first_entry != len(self._index.entry_len):
            return False  # after a failure: entries past the gap are never confirmed
        for number in self._index.add_run(key, run):
            _key, start, end = self._index.location(number)  # type: ignore[misc]
            self._store.cache.recent.put((key, self.ledger_id, start), data[start:end])
        self.unpieced.append((key, run))
        return True

    def replace_index(self, runs: list[tuple[str, Run]]) -> None:
        """Find the entries where ``runs`` (consecutive, all of them) say from now on."""
        index = _Index()
        for key, run in runs:
            index.add_run(key, run)
        self._swap(index)

    def take_index(self, other: "S3Ledger") -> None:
        self._swap(other._index)

    def _swap(self, index: _Index) -> None:
        if len(index.entry_len) != len(self._index.entry_len):
            raise CorruptLedger(f"ledger {self.ledger_id}: its index read again holds {len(index.entry_len)} "
                                f"entries, not {len(self._index.entry_len)}")
        self._index = index

    def needs_compaction(self) -> bool:
        """Sealed, with entries still in WAL objects (shared with other ledgers, in small runs)."""
        return self.sealed and any(key.startswith("wal/") for key in self._index.keys)

    def fail(self, failure: BaseException) -> None:
        """Give up every unconfirmed entry: nothing more is taken, the owner rolls to a new ledger."""
        if self._failure is None:
            self._failure = failure
            self._writable = False
            self._pushed = self.last_add_confirmed
            self._bytes = sum(self._index.entry_len)

    @property
    def failed(self) -> bool:
        return self._failure is not None

    async def read_range(self, first: int, last: int) -> list[memoryview]:
        last = min(last, self.last_add_confirmed)
        out: list[memoryview] = []
        entry_id = first
        index, refreshed = self._index, False
        while entry_id <= last:
            number = index.entry_block[entry_id]
            stop = min(last, index.entries_of(number)[-1])
            try:
                block = await self._store.block_bytes(self.ledger_id, index, number)
            except MissingObject:
                if refreshed or not self.sealed:
                    raise
                # Compacted (by this broker or another) and its old objects collected since.
                await self._store.refresh_index(self)
                index, refreshed = self._index, True
                continue
            start = index.entry_pos[entry_id]
            lengths = list(index.entry_len[entry_id:stop + 1])
            out.extend(wal_object.read_frames(block[start:], self.ledger_id, entry_id, lengths))
            entry_id = stop + 1
        return out

    async def read_heads(self, first: int, last: int, size: int) -> list[tuple[int, bytes]]:
        last = min(last, self.last_add_confirmed)
        if size <= HEAD_BYTES and len(self._heads) > last:
            heads = [(self._index.entry_len[i], self._heads[i][:size]) for i in range(first, last + 1)]
            if last == self.last_add_confirmed:
                self._heads = []  # asked once, at open: not kept for the ledger's life
            return heads
        return await super().read_heads(first, last, size)

    async def close(self) -> None:
        if self._writable:
            self._writable = False
            await self.sync(self._pushed)
            await self._store.write_piece(self, sealed=True)

    def release(self) -> None:
        self._store.forget(self)

    def load(self, runs: Iterable[tuple[str, Run]], last_entry: int | None) -> list[tuple[str, Run]]:
        """Take ``runs`` (any order, duplicates allowed) from entry 0 up to the first gap, or
        through ``last_entry``; return the runs kept, cut to what was kept."""
        kept: list[tuple[str, Run]] = []
        for key, run in sorted(runs, key=lambda item: item[1].first_entry):
            expected = len(self._index.entry_len)
            if last_entry is not None and expected > last_entry:
                break
            if run.first_entry + run.count <= expected:
                continue  # the same run from a piece and an object index
            if run.first_entry != expected:
                break
            if last_entry is not None and run.first_entry + run.count > last_entry + 1:
                keep = last_entry + 1 - run.first_entry
                run = Run(run.ledger_id, run.first_entry, run.start, run.lengths[:keep], run.heads[:keep])
            self._index.add_run(key, run)
            self._heads.extend(run.heads)
            kept.append((key, run))
        self._pushed = self.last_add_confirmed
        self._bytes = sum(self._index.entry_len)
        return kept


class _Wal:
    """Collects the entries of every ledger this broker writes and PUTs one object per interval."""

    def __init__(self, store: "S3LedgerStore", interval: float):
        self._store = store
        self._interval = interval
        self._batch: _Batch | None = None
        self._seq = 0
        self._kick = asyncio.Event()
        self._full = asyncio.Event()
        self._slots = asyncio.Semaphore(MAX_INFLIGHT_PUTS)
        self._previous: asyncio.Future | None = None
        self._since_checkpoint = 0
        self._task: asyncio.Task | None = None
        self._uploads: set[asyncio.Task] = set()
        self._waiting: set[_Batch] = set()  # batches not yet confirmed or failed

    @property
    def next_seq(self) -> int:
        return self._seq

    def take_key(self) -> str:
        """The key of the next WAL object this writer PUTs (the local WAL's uploads take theirs here too)."""
        seq, self._seq = self._seq, self._seq + 1
        return _wal_key(self._store.writer, seq)

    def stored(self, size: int) -> None:
        self._store.wal_objects += 1
        self._store.wal_bytes += size

    def object_confirmed(self) -> None:
        """Count an object whose runs were taken; every CHECKPOINT_OBJECTS, write index pieces."""
        self._since_checkpoint += 1
        if self._since_checkpoint >= CHECKPOINT_OBJECTS:
            self._since_checkpoint = 0
            self._store.checkpoint()

    def lag_seconds(self) -> float:
        """How long the oldest entry not yet confirmed has waited (0 when none waits)."""
        oldest = min((batch.began for batch in self._waiting), default=None)
        return 0.0 if oldest is None else time.monotonic() - oldest

    def add(self, ledger: S3Ledger, entry_id: int, chunks) -> int:
        if self._task is None:
            self._task = asyncio.ensure_future(self._run())
        if self._batch is None:
            self._batch = _Batch(self._store.lease.generation)
            self._waiting.add(self._batch)
            self._kick.set()
        buffers, length = wal_object.frame(chunks)
        self._batch.entries.setdefault(ledger, []).append((entry_id, buffers, length, wal_object.head_of(chunks)))
        self._batch.size += wal_object.FRAME.size + length
        ledger.waiting(entry_id, self._batch.done)
        if self._batch.size >= MAX_OBJECT_BYTES:
            self._full.set()
        return length

    async def _run(self) -> None:
        last_cut = 0.0
        while True:
            await self._kick.wait()
            self._kick.clear()
            delay = last_cut + self._interval - time.monotonic()
            if delay > 0 and not self._full.is_set():
                try:
                    await asyncio.wait_for(self._full.wait(), delay)
                except TimeoutError:
                    pass
            self._full.clear()
            await self._slots.acquire()
            batch, self._batch = self._batch, None
            if batch is None:
                self._slots.release()
                continue
            last_cut = time.monotonic()
            previous, self._previous = self._previous, batch.done
            task = asyncio.ensure_future(self._upload(batch, self.take_key(), previous))
            self._uploads.add(task)
            task.add_done_callback(self._uploads.discard)

    async def _upload(self, batch: _Batch, key: str, previous: asyncio.Future | None) -> None:
        failure: BaseException | None = None
        runs: list[tuple[S3Ledger, Run]] = []
        data = memoryview(b"")
        try:
            for ledger in batch.entries:
                if ledger.manifest is not None and not ledger.failed:
                    try:
                        await asyncio.shield(ledger.manifest)
                    except Exception as exc:
                        ledger.fail(ObjectStoreUnavailable(f"ledger {ledger.ledger_id}: writer record: {exc}"))
            data, runs = self._build(batch)
            if runs:
                try:
                    await self._store.client.put(key, data)
                    self.stored(len(data))
                except Exception as exc:
                    failure = ObjectStoreUnavailable(f"WAL object {key}: {exc}")
        finally:
            self._slots.release()
        if previous is not None:
            await asyncio.wait([previous])  # confirm in order, whatever became of the previous one
        if failure is None and runs and not (batch.generation == self._store.lease.generation
                                             and await self._store.lease.confirm(batch.generation)):
            failure = LedgerFenced(f"WAL object {key}: this broker's metadata session was lost; "
                                   "its ledgers may have been recovered by another broker")
        self._waiting.discard(batch)
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
        self.object_confirmed()

    @staticmethod
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

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
        for task in list(self._uploads):
            task.cancel()


class S3LedgerStore(LedgerStore):
    """``local_wal`` (a directory) makes entries durable in a local WAL first
    (storage.stores.local_wal); without it, in WAL objects."""

    def __init__(self, client: ObjectClient, writer: str, lease: WriterLease | None = None,
                 commit_interval_ms: int = 100, cache_bytes: int = 256 * 1024 * 1024,
                 local_wal: str | None = None):
        from .local_wal import LocalWal

        self.client = client
        self.writer = writer
        self.lease: WriterLease = lease or Unleased()
        self.cache = BlockCache(cache_bytes)
        self.wal = _Wal(self, commit_interval_ms / 1000)
        self.local = LocalWal(self, local_wal, commit_interval_ms / 1000) if local_wal is not None else None
        self.wal_objects = 0
        self.wal_bytes = 0
        self.inventory = ObjectInventory(client)
        self.objects_collected = 0
        self.compacted_bytes = 0
        self.ledgers_compacted = 0
        self._ledgers: dict[int, S3Ledger] = {}
        self._gets = asyncio.Semaphore(MAX_INFLIGHT_GETS)
        self._fetching: dict[tuple[str, int, int], asyncio.Future] = {}
        self._background: set[asyncio.Task] = set()

    def _spawn(self, coroutine) -> asyncio.Task:
        task = asyncio.ensure_future(coroutine)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    # -- writing ---------------------------------------------------------------------

    def create_ledger(self, ledger_id: int) -> S3Ledger:
        fields = {"writer": self.writer, "first_seq": self.wal.next_seq}
        if self.local is not None:
            ledger: S3Ledger = self.local.create_ledger(ledger_id)
            fields["local_wal"] = self.local.wal_id  # entries past the uploaded ones may be there only
        else:
            ledger = S3Ledger(self, ledger_id, writable=True)
        record = json.dumps(fields).encode()
        ledger.manifest = self._spawn(self.client.create(_ledger_prefix(ledger_id) + "writer", record))
        self._ledgers[ledger_id] = ledger
        return ledger

    def checkpoint(self) -> None:
        """Write an index piece for every ledger written since its last one (in the background)."""
        for ledger in list(self._ledgers.values()):
            if ledger.unpieced and not ledger.piece_writing and not ledger.failed:
                self._spawn(self._checkpoint_piece(ledger))

    async def _checkpoint_piece(self, ledger: S3Ledger) -> None:
        try:
            await self.write_piece(ledger, sealed=False)
        except Exception as exc:
            log.warning("ledger %d: index piece not written (kept for the next one): %s", ledger.ledger_id, exc)

    async def write_piece(self, ledger: S3Ledger, sealed: bool) -> None:
        pieces = list(ledger.unpieced)
        if not pieces and not sealed:
            return
        seq = max((int(key.rsplit("/", 1)[1]) for key, _ in pieces), default=self.wal.next_seq - 1)
        ledger.piece_writing = True
        try:
            await self.client.create(_piece_key(ledger.ledger_id, max(seq, 0), sealed), wal_object.index_piece(pieces))
        finally:
            ledger.piece_writing = False
        del ledger.unpieced[:len(pieces)]
        ledger.sealed = sealed

    # -- opening and recovery --------------------------------------------------------

    async def open_ledger(self, ledger_id: int, last_entry: int | None) -> S3Ledger:
        ledger = S3Ledger(self, ledger_id, writable=False)
        writer = await self.writer_record(ledger_id)
        if writer is None:
            # Its first entry is confirmed only after this record is written: none was.
            if last_entry is not None and last_entry >= 0:
                raise CorruptLedger(f"ledger {ledger_id}: {_ledger_prefix(ledger_id)}writer is missing, "
                                    f"metadata says {last_entry + 1} entries")
            self._ledgers[ledger_id] = ledger
            return ledger
        runs, sealed, covered = await self.stored_runs(ledger_id, writer)
        if not sealed and writer.get("local_wal") is not None:
            if self.local is None or writer["local_wal"] != self.local.wal_id:
                raise TailUnreachable(f"ledger {ledger_id}: entries past those uploaded may be only in the "
                                      f"local WAL {writer['local_wal']} of writer {writer['writer']}; it is "
                                      "served once that broker is back and has uploaded them")
            await self.local.drain(ledger_id)  # this broker's own, left by a crash or a lost session
            return await self.open_ledger(ledger_id, last_entry)
        kept = ledger.load(runs, last_entry)
        if last_entry is not None and ledger.last_add_confirmed < last_entry:
            raise CorruptLedger(f"ledger {ledger_id} holds {ledger.last_add_confirmed + 1} entries, "
                                f"metadata says {last_entry + 1}")
        if last_entry is None and not sealed:
            await self.seal_recovered(ledger_id, kept, covered)
        ledger.sealed = True
        self._ledgers[ledger_id] = ledger
        return ledger

    async def stored_runs(self, ledger_id: int, writer: dict) -> tuple[list[tuple[str, Run]], bool, int]:
        """Every run of ``ledger_id`` the bucket knows of (duplicates possible), whether it is
        sealed, and the last WAL object of its writer the index pieces cover."""
        for _attempt in range(3):
            listed = await self.client.keys(_ledger_prefix(ledger_id))
            compacted = [key for key in listed if key.endswith(COMPACTED)]
            keys = compacted or [key for key in listed if "/index-" in key]  # a compacted piece lists all
            try:
                pieces = await asyncio.gather(*(self._read_piece(key) for key in keys))
                break
            except MissingObject:
                continue  # superseded by a compaction since the listing: list again
        else:
            raise CorruptLedger(f"ledger {ledger_id}: index pieces keep vanishing between listing and reading")
        runs = [run for piece in pieces for run in piece if run[1].ledger_id == ledger_id]
        sealed = bool(compacted) or any(key.endswith(".sealed") for key in keys)
        covered = max((_piece_seq(key) for key in keys if "/index-" in key), default=writer["first_seq"] - 1)
        if not sealed:
            runs += await self._runs_in_wal(ledger_id, writer["writer"], covered)
        return runs, sealed, covered

    async def writer_record(self, ledger_id: int) -> dict | None:
        record = await self.client.get(_ledger_prefix(ledger_id) + "writer")
        return None if record is None else json.loads(record)

    async def _read_piece(self, key: str) -> list[tuple[str, Run]]:
        data = await self.client.get(key)
        if data is None:
            raise MissingObject(f"{key}: listed but missing")
        return wal_object.read_index_piece(data, key)

    async def _runs_in_wal(self, ledger_id: int, writer: str, covered: int) -> list[tuple[str, Run]]:
        after = _wal_key(writer, covered) if covered >= 0 else None
        keys = await self.client.keys(f"wal/{writer}/", after=after)

        async def runs_of(key: str) -> list[tuple[str, Run]]:
            async with self._gets:
                try:
                    runs = await wal_object.fetch_object_index(self.client, key)
                except FileNotFoundError:
                    # Collected since it was listed: it held none of this ledger's entries
                    # (a live ledger's objects are never collected).
                    return []
            return [(key, run) for run in runs if run.ledger_id == ledger_id]

        found = await asyncio.gather(*(runs_of(key) for key in keys))
        return [run for runs in found for run in runs]

    async def seal_recovered(self, ledger_id: int, kept: list[tuple[str, Run]], covered: int) -> None:
        """Record where recovery ended, so later opens read pieces only and agree on the end."""
        seq = max([covered, 0, *(int(key.rsplit("/", 1)[1]) for key, _ in kept)])
        try:
            await self.client.create(_piece_key(ledger_id, seq, sealed=True), wal_object.index_piece(kept))
        except ObjectExists:
            log.warning("ledger %d was sealed by another recovery at the same time", ledger_id)

    # -- reading -----------------------------------------------------------------------

    async def block_bytes(self, ledger_id: int, index: _Index, number: int) -> memoryview:
        """The bytes of block ``number`` of a ledger's ``index``: from memory, or one range GET.

        Every read, hit or miss, keeps the next READ_AHEAD_BLOCKS blocks cached or on their
        way, and on a miss they are asked for before this block's GET is awaited, so the
        GETs overlap. Refreshing the window only on a miss (as before) made a
        sequential reader wait for a whole GET every READ_AHEAD_BLOCKS + 1 blocks, one
        partition after another within a fetch.
        """
        location = index.location(number)
        assert location is not None
        data = self.cache.get((location[0], ledger_id, location[1]))
        # Spawned tasks start after this one's next await: the block asked for now takes
        # the first free GET slot, the blocks ahead queue behind it.
        for ahead in range(number + 1, number + 1 + READ_AHEAD_BLOCKS):
            following = index.location(ahead)
            if following is None:
                break
            key = (following[0], ledger_id, following[1])
            if not self.cache.holds(key) and key not in self._fetching:
                self._spawn(self._fetch(ledger_id, following)).add_done_callback(_quiet)
        if data is None:
            data = await self._fetch(ledger_id, location)
        return data

    async def _fetch(self, ledger_id: int, location: tuple[str, int, int], cache: bool = True) -> memoryview:
        object_key, start, end = location
        key = (object_key, ledger_id, start)
        fetching = self._fetching.get(key)
        if fetching is not None:
            return await asyncio.shield(fetching)
        future = asyncio.get_running_loop().create_future()
        self._fetching[key] = future
        try:
            async with self._gets:
                try:
                    data = await self.client.get_range(object_key, start, end)
                except FileNotFoundError as exc:
                    # Damage, unlike an unreachable store (whose errors pass through as they are).
                    raise MissingObject(f"ledger {ledger_id}: object {object_key} is missing") from exc
            if len(data) != end - start:
                raise CorruptLedger(f"ledger {ledger_id}: object {object_key} is cut short")
            if cache:
                self.cache.reads.put(key, data)
            future.set_result(data)
            return data
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()
            raise
        finally:
            del self._fetching[key]

    async def refresh_index(self, ledger: S3Ledger) -> None:
        """Read a sealed ledger's index again (after compaction moved its entries)."""
        writer = await self.writer_record(ledger.ledger_id)
        if writer is None:
            raise MissingObject(f"ledger {ledger.ledger_id}: its records are gone")
        runs, _sealed, _covered = await self.stored_runs(ledger.ledger_id, writer)
        fresh = S3Ledger(self, ledger.ledger_id, writable=False)
        fresh.load(runs, ledger.last_add_confirmed)
        ledger.take_index(fresh)

    # -- compaction ----------------------------------------------------------------------

    def compaction_backlog(self) -> tuple[int, int]:
        """Ledgers of this broker waiting to be compacted, and their bytes."""
        waiting = [ledger for ledger in list(self._ledgers.values()) if ledger.needs_compaction()]
        return len(waiting), sum(ledger.length for ledger in waiting)

    async def compact_round(self) -> int:
        """Rewrite sealed ledgers' entries out of WAL objects into objects of their own, about
        COMPACTION_ROUND_BYTES a round (at least one ledger); how many ledgers were done."""
        done = budget = 0
        for ledger in sorted(self._ledgers.values(), key=lambda ledger: ledger.ledger_id):
            if budget >= COMPACTION_ROUND_BYTES:
                break
            if not ledger.needs_compaction():
                continue
            budget += ledger.length
            try:
                await self._compact(ledger)
                done += 1
            except Exception as exc:
                log.warning("ledger %d: compaction failed (its objects are left as they were): %s",
                            ledger.ledger_id, exc)
        return done

    async def _compact(self, ledger: S3Ledger) -> None:
        """Write the ledger's entries into ``data-*`` objects under its prefix, then a piece
        naming them all (``compacted``, written once), then drop its older pieces. A reader
        that opens the ledger meanwhile finds either the old pieces or the new one, each
        complete; the WAL objects go once garbage collection sees no other ledger in them."""
        ledger_id, index = ledger.ledger_id, ledger._index
        prefix = _ledger_prefix(ledger_id)
        old_pieces = [key for key in await self.client.keys(prefix) if "/index-" in key]
        runs: list[tuple[str, Run]] = []
        part: list[tuple[int, memoryview, list[int]]] = []  # (first entry, frames, lengths)

        async def flush() -> None:
            first, last = part[0][0], part[-1][0] + len(part[-1][2]) - 1
            data, (run,) = wal_object.pack([(ledger_id, first, memoryview(b"".join(f for _, f, _ in part)),
                                             [n for _, _, lengths in part for n in lengths])])
            key = f"{prefix}data-{first:020d}-{last:020d}-{self.writer}"
            await self.client.put(key, data)
            self.compacted_bytes += len(data)
            runs.append((key, run))
            part.clear()

        size = 0
        window = MAX_INFLIGHT_GETS
        for base in range(0, len(index.keys), window):
            numbers = range(base, min(base + window, len(index.keys)))
            blocks = await asyncio.gather(*(self._fetch(ledger_id, index.location(n), cache=False)  # type: ignore[arg-type]
                                            for n in numbers))
            for number, block in zip(numbers, blocks):
                entries = index.entries_of(number)
                lengths = list(index.entry_len[entries.start:entries.stop])
                wal_object.read_frames(block, ledger_id, entries.start, lengths)  # copy nothing damaged
                part.append((entries.start, block, lengths))
                size += len(block)
                if size >= COMPACT_OBJECT_BYTES:
                    await flush()
                    size = 0
        if part:
            await flush()
        try:
            await self.client.create(prefix + COMPACTED, wal_object.index_piece(runs))
        except ObjectExists:
            await self.client.delete([key for key, _ in runs])  # another broker compacted it first
            await self.refresh_index(ledger)
            return
        ledger.replace_index(runs)
        self.ledgers_compacted += 1
        await self.client.delete(old_pieces)

    # -- lifecycle ---------------------------------------------------------------------

    def forget(self, ledger: S3Ledger) -> None:
        if self._ledgers.get(ledger.ledger_id) is ledger:
            del self._ledgers[ledger.ledger_id]

    def delete_ledger(self, ledger_id: int) -> None:
        """Forget the ledger and delete its records. The WAL objects that hold its entries
        are shared with other ledgers: ``collect_garbage`` deletes each once none of its
        ledgers is live."""
        ledger = self._ledgers.pop(ledger_id, None)
        if ledger is not None:
            ledger.fail(LedgerFenced(f"ledger {ledger_id} was deleted"))
        if self.local is not None:
            self.local.delete_ledger(ledger_id)
        self.cache.drop_ledger(ledger_id)
        self._spawn(self._delete_records(ledger_id)).add_done_callback(_quiet)

    async def _delete_records(self, ledger_id: int) -> None:
        await self.client.delete(await self.client.keys(_ledger_prefix(ledger_id)))

    async def collect_garbage(self, live_ledgers: LiveLedgers) -> int:
        survey = await self.inventory.survey(live_ledgers)
        doomed = survey.unreferenced[:MAX_DELETES_PER_COLLECTION]
        await self.client.delete(doomed)
        self.inventory.forget(doomed)
        self.objects_collected += len(doomed)
        if doomed:
            log.info("deleted %d objects no live ledger needs (%d more left for the next pass)",
                     len(doomed), len(survey.unreferenced) - len(doomed))
        return len(doomed)

    def ledger_bytes(self, ledger_id: int) -> int:
        ledger = self._ledgers.get(ledger_id)
        return ledger.length if ledger is not None else 0

    def collectors(self) -> list:
        from .object_store_metrics import ObjectStoreCollector
        return [ObjectStoreCollector(self)]

    def upload_lag(self) -> float:
        """Age of the oldest acknowledged entry not yet in an object."""
        return self.wal.lag_seconds() if self.local is None else self.local.lag_seconds()

    def close(self) -> None:
        self.wal.close()
        if self.local is not None:
            self.local.close()
        for task in list(self._background):
            task.cancel()


def _quiet(task: asyncio.Task) -> None:
    """Background reads and deletes whose failure the next reader hears about anyway."""
    if not task.cancelled() and task.exception() is not None:
        log.debug("background object request failed: %s", task.exception())
