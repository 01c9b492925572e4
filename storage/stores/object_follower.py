"""Ledgers another broker writes, read here as they grow (LedgerStore.open_follower): zone
reads on object storage (storage.followed_ledger).

A follower finds a ledger's entries the way a recovery does (storage.stores.ledger_records):
its index pieces, then the indexes of its writer's WAL objects after the last piece; but it
never fences, seals or writes a record (DESIGN rule 5), and it keeps up as the writer goes
on. What it shows is only what it found in objects; which of that is confirmed is the
owner's high watermark's to say (the followed ledger never reads past it).

Keeping up costs no LIST when the owner names its newest confirmed WAL object in its
high-watermark answers (TailHints: the objects up to there are read by key), and otherwise
a LIST per writer, not per ledger: a ``WriterTail`` lists the writer's WAL
objects after the last it knows, GETs each new one whole, once, and keeps the runs of the
last MAX_TAIL_OBJECTS objects for every followed ledger of that writer. The blocks of the
ledgers followed here go into the read cache from that GET, so a zone's tail reads cost one
GET per WAL object, not one per ledger in it (and the sets staged in it, when this broker
owns their partitions, are read from the same bytes). Catch-ups that arrive while a LIST
is out share the next one, so the partitions of one owner caught up together make one
LIST. A writer has at most REORDER_OBJECTS PUTs out at once and an object may land before
the ones cut ahead of it, so each LIST starts that many objects back (and takes only
objects it did not know).
"""
import asyncio
import logging
from collections import Counter, OrderedDict

from ..ledger import CorruptLedger, Ledger
from . import wal_object
from .block_cache import BlockCache
from .block_index import BlockIndex
from .ledger_records import LedgerRecords, Runs
from .object_layout import STAGED_LEDGER, wal_key, wal_seq
from .object_ledger import LedgerHome, S3Ledger
from .object_staging import StagedReader
from .s3_wal import MAX_INFLIGHT_PUTS
from .wal_object import HEAD_BYTES, Run

log = logging.getLogger(__name__)

# WAL objects whose runs a writer's tail keeps (about 13 s of the S3 WAL at 40 objects/s):
# a follower that falls further behind reads its ledger's index pieces again.
MAX_TAIL_OBJECTS = 512
# How far back each LIST starts: objects still being PUT when a later one landed.
REORDER_OBJECTS = 2 * MAX_INFLIGHT_PUTS


class WriterTail:
    """The runs in one writer's newest WAL objects, from object ``start`` on."""

    def __init__(self, records: LedgerRecords, cache: BlockCache, staged: StagedReader, writer: str, start: int):
        self._records = records
        self._cache = cache
        self._staged = staged
        self.writer = writer
        self.followed: Counter[int] = Counter()  # the ledgers followed here, by how many views
        self._runs: OrderedDict[int, Runs] = OrderedDict()  # by object sequence number, in listing order
        self.floor = start  # objects at or below this one are not kept here
        self._dropped = False  # whether objects after ``start`` were let go (then ``floor`` is the newest)
        self.listed = start  # the newest object listed (or, told of, fetched)
        # The newest object its owner said is confirmed, and the newest up to which every
        # object was fetched or found missing: those between are read without a LIST.
        self.confirmed = -1
        self.told = False  # whether the owner said so since the last refresh began (else: a LIST)
        self._resolved = start
        self._listing = asyncio.Lock()
        self._next: asyncio.Future | None = None

    async def refresh(self) -> None:
        """Take in the objects stored before this call (by a LIST begun after it)."""
        if self._next is None:
            self._next = asyncio.ensure_future(self._list_in_turn())
        await asyncio.shield(self._next)

    async def _list_in_turn(self) -> None:
        async with self._listing:
            self._next = None  # whoever asks from now on needs a LIST begun later
            told, self.told = self.told, False
            if told and self.confirmed <= self._resolved:
                return  # nothing confirmed since: the high watermark it came with is in what is here
            if told and self.confirmed <= self._resolved + MAX_TAIL_OBJECTS:
                await self._fetch_told()
                return
            start = max(self.floor, self.listed - REORDER_OBJECTS)
            keys = await self._records.client.keys(f"wal/{self.writer}/",
                                                   after=wal_key(self.writer, start) if start >= 0 else None)
            new = [key for key in keys if wal_seq(key) not in self._runs]
            for key, runs in zip(new, await asyncio.gather(*(self._object_runs(key) for key in new))):
                self._runs[wal_seq(key)] = [(key, run) for run in runs]
            self.listed = max([self.listed, *(wal_seq(key) for key in keys)])
            self._resolved = max(self._resolved, self.listed - REORDER_OBJECTS)
            self._let_go()

    def _let_go(self) -> None:
        """Keep the runs of the newest MAX_TAIL_OBJECTS objects only."""
        while len(self._runs) > MAX_TAIL_OBJECTS:
            seq, _ = self._runs.popitem(last=False)
            self.floor, self._dropped = max(self.floor, seq), True

    async def _fetch_told(self) -> None:
        """The objects after the last resolved through the one its owner said is confirmed,
        by key, with no LIST: each of them was stored before the owner said so, or never
        will hold a confirmed entry (its PUT failed, or it was never cut)."""
        seqs = [seq for seq in range(self._resolved + 1, self.confirmed + 1) if seq not in self._runs]
        found = await asyncio.gather(*(self._object_runs(wal_key(self.writer, seq)) for seq in seqs))
        for seq, runs in zip(seqs, found):
            if runs:
                self._runs[seq] = [(wal_key(self.writer, seq), run) for run in runs]
        self._resolved = self.confirmed
        self.listed = max(self.listed, self.confirmed)
        self._let_go()

    async def _object_runs(self, key: str) -> list[Run]:
        """The runs in WAL object ``key``, from one GET of it whole; the blocks of the ledgers
        followed here (and the object, if it holds staged sets) go into the read cache."""
        async with self._records.gets:
            data = await self._records.client.get(key)
        if data is None:
            return []  # collected since listed: it held no live ledger's entries
        whole = memoryview(data)
        try:
            runs = wal_object.read_object_index(whole, key)
        except CorruptLedger as exc:
            log.warning("%s: %s (its runs are left to whoever reads them)", key, exc)
            return []
        for run in runs:
            if run.ledger_id == STAGED_LEDGER:
                self._staged.keep(key, whole)
            elif run.ledger_id in self.followed:
                index = BlockIndex()
                for number in index.add_run(key, run):
                    _key, start, end = index.location(number)  # type: ignore[misc]
                    self._cache.reads.put((key, run.ledger_id, start), whole[start:end])
        return runs

    def runs_of(self, ledger_id: int, after: int) -> Runs | None:
        """The runs of ``ledger_id`` in the objects after ``after`` kept here; None when some of
        those objects were let go. (Objects at or below the one the tail began after are not
        asked for: a follower that needs them read them itself.)"""
        if self._dropped and after < self.floor:
            return None
        return [(key, run) for seq, runs in self._runs.items() if seq > after
                for key, run in runs if run.ledger_id == ledger_id]


class WriterTails:
    """One tail per writer some follower reads, dropped when its last follower is."""

    def __init__(self, records: LedgerRecords, cache: BlockCache, staged: StagedReader):
        self._records = records
        self._cache = cache
        self._staged = staged
        self._tails: dict[str, WriterTail] = {}

    def heard(self, writer: str, seq: int) -> None:
        """Writer ``writer`` has confirmed its objects through ``seq`` (its owner said so)."""
        tail = self._tails.get(writer)
        if tail is not None:
            tail.confirmed, tail.told = max(tail.confirmed, seq), True

    def take(self, writer: str, start: int, ledger_id: int) -> WriterTail:
        tail = self._tails.get(writer)
        if tail is None:
            tail = self._tails[writer] = WriterTail(self._records, self._cache, self._staged, writer, start)
        tail.followed[ledger_id] += 1
        return tail

    def give_back(self, tail: WriterTail, ledger_id: int) -> None:
        tail.followed[ledger_id] -= 1
        if tail.followed[ledger_id] <= 0:
            del tail.followed[ledger_id]
        if not tail.followed and self._tails.get(tail.writer) is tail:
            del self._tails[tail.writer]


class FollowerLedger(S3Ledger):
    """A read-only view of a ledger another broker writes: indexed from the bucket, never writing."""

    def __init__(self, home: LedgerHome, ledger_id: int, records: LedgerRecords, tails: WriterTails):
        super().__init__(home, ledger_id)
        self._records = records
        self._tails = tails
        self._tail: WriterTail | None = None
        self._seen = -1  # the tail's newest object when the runs were last taken
        self._head_base = 0  # the entry ``_heads[0]`` is the head of

    async def catch_up(self) -> int:
        if self._tail is None:
            if not self.sealed:
                await self._start()
        else:
            await self._tail.refresh()
            runs = self._tail.runs_of(self.ledger_id, self._seen - REORDER_OBJECTS)
            if runs is None:  # fallen behind what the tail keeps: from the pieces again
                await self._start()
            else:
                self._take(runs, self._tail.listed)
        return self.last_add_confirmed

    async def _start(self) -> None:
        writer = await self._records.writer_record(self.ledger_id)
        if writer is None:
            return  # no entry confirmed yet: the writer writes this record first
        runs, self.sealed, covered = await self._records.pieced_runs(self.ledger_id, writer)
        if self.sealed:
            self._take(runs, -1)
            return
        if self._tail is None:
            self._tail = self._tails.take(writer["writer"], covered, self.ledger_id)
        await self._tail.refresh()
        if covered < self._tail.floor:
            # The tail keeps only later objects: these once, by a LIST of their own. Every
            # object up to the floor had landed (a piece or an object past it was confirmed).
            runs += await self._records.runs_in_wal(self.ledger_id, writer["writer"], covered)
        runs += self._tail.runs_of(self.ledger_id, max(covered, self._tail.floor)) or []
        self._take(runs, self._tail.listed)

    def _take(self, runs: Runs, seen: int) -> None:
        self.load(runs, None)
        self._seen = seen

    def may_have_moved(self) -> bool:
        return True  # the writer may have sealed it since, and a compaction moved its entries

    async def read_heads(self, first: int, last: int, size: int) -> list[tuple[int, bytes]]:
        """From the heads the objects' indexes hold (no GET), each given once; entries whose
        heads were given already are read."""
        last = min(last, self.last_add_confirmed)
        base = self._head_base
        if size > HEAD_BYTES or first < base or last - base >= len(self._heads):
            return await Ledger.read_heads(self, first, last, size)
        heads = [(self.index.entry_len[i], self._heads[i - base][:size]) for i in range(first, last + 1)]
        del self._heads[:last + 1 - base]
        self._head_base = last + 1
        return heads

    def release(self) -> None:
        if self._tail is not None:
            self._tails.give_back(self._tail, self.ledger_id)
            self._tail = None
