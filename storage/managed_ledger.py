"""A managed ledger: one partition's log as a chain of ledgers.

It assigns offsets, appends entries to the open ledger, maps offsets (and
timestamps) to entries from entry headers alone, rolls ledgers over by size and age,
trims whole ledgers by retention, and recovers after a crash. The ledger list lives
in a chain record (storage.chain_record; the broker keeps it in its metadata store)
and is written *before* a new ledger receives data, so an acknowledged entry is
always reachable from it.

Readers see entries up to the high watermark: the end of the last durable entry. An
entry that was written but never made durable may vanish in a crash; because no
reader saw it and no producer was answered, reusing its offsets is safe.
"""
import asyncio
import json
import logging
import time
from array import array
from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field

from . import entry
from .chain_record import ChainConflict, ChainRecord
from .entry import EntryHeader
from .ledger import (
    CorruptLedger,
    FollowingUnsupported,
    Ledger,
    LedgerFenced,
    LedgerStore,
    StoreUnavailable,
    StrandedEntries,
)

log = logging.getLogger(__name__)


class DamagedEntry(CorruptLedger):
    """An entry read back damaged (``found`` says how): ``offset`` is the first offset it
    holds. What lies before it is sound and may still be served (reads with ``end`` at
    most ``offset``)."""

    def __init__(self, found: CorruptLedger, offset: int):
        super().__init__(f"{found}; offsets from {offset} on are not served")
        self.found = found
        self.offset = offset


@dataclass
class RolloverPolicy:
    max_bytes: int = 1 << 30
    max_age_ms: int = 7 * 24 * 3600 * 1000


@dataclass
class RetentionPolicy:
    """Kafka's retention.ms / retention.bytes; -1 means unlimited."""

    ms: int = 7 * 24 * 3600 * 1000
    bytes: int = -1


@dataclass
class LedgerInfo:
    """What the chain record keeps of each ledger in the chain."""

    ledger_id: int
    first_offset: int
    created_ms: int
    closed: bool = False
    last_entry: int = -1
    last_offset: int = -1
    max_timestamp: int = -1
    size: int = 0


@dataclass
class _Segment:
    """An open or sealed ledger with its in-memory entry index."""

    info: LedgerInfo
    ledger: Ledger
    last_offsets: array = field(default_factory=lambda: array("q"))
    max_timestamps: array = field(default_factory=lambda: array("q"))
    # Cumulative payload bytes through each entry, to size reads without touching them.
    ends: array = field(default_factory=lambda: array("q"))
    # A confirmation failed: entries past the LAC are given up and the next append rolls over.
    failed: bool = False
    # Reads under way, and whether the ledger left the chain (compaction, retention): its file
    # handle is released only once the last read of it is done.
    reads: int = 0
    retired: bool = False

    def add(self, header: EntryHeader, length: int) -> None:
        self.last_offsets.append(header.last_offset)
        self.max_timestamps.append(header.max_timestamp)
        self.ends.append((self.ends[-1] if self.ends else 0) + length)

    @property
    def next_offset(self) -> int:
        return self.last_offsets[-1] + 1 if self.last_offsets else self.info.first_offset

    def confirmed_end(self) -> int:
        lac = self.ledger.last_add_confirmed
        return self.last_offsets[lac] + 1 if lac >= 0 else self.info.first_offset

    def drop_unconfirmed(self) -> None:
        keep = self.ledger.last_add_confirmed + 1
        del self.last_offsets[keep:]
        del self.max_timestamps[keep:]
        del self.ends[keep:]
        self.failed = True

    def entry_for(self, offset: int) -> int:
        return bisect_left(self.last_offsets, offset)


def sealed_segment(info: LedgerInfo, ledger: Ledger) -> _Segment:
    """An index for a ledger written whole before it joins the chain (a compaction's output);
    the writer adds each entry with ``segment.add`` as it appends it."""
    return _Segment(info, ledger)


@dataclass(frozen=True, slots=True)
class StoredEntry:
    header: EntryHeader
    payload: memoryview


class ManagedLedger:
    def __init__(self, name: str, store: LedgerStore, chain: ChainRecord,
                 allocate_ledger_id: Callable[[], Awaitable[int]],
                 rollover: RolloverPolicy | None = None, retention: RetentionPolicy | None = None):
        self.name = name
        self._store = store
        self._chain = chain
        self._allocate_ledger_id = allocate_ledger_id
        self.rollover = rollover or RolloverPolicy()
        self.retention = retention or RetentionPolicy()
        self._segments: list[_Segment] = []
        self._firsts: list[int] = []  # first offset of each segment, for bisect
        self._version = -1
        self._log_start = 0
        # The log cleaner's progress: offsets below it were compacted (Kafka's cleaner checkpoint).
        self._clean_end = 0
        # Ledgers that may be in the store but not in the chain: a compaction's new ledgers
        # before its swap, the replaced ones after. Whoever opens the chain deletes them.
        self._garbage: list[int] = []
        self._high_watermark = 0
        self._roll_lock = asyncio.Lock()
        # Appends waiting for their turn, first to go first (see :meth:`prepare_append`).
        self._appenders: deque[asyncio.Future] = deque()
        self._append_waiters: set[asyncio.Future] = set()
        self._closed = False
        # Set when opening met a damaged ledger: the first offset not served (see _open_before).
        self.damaged_at: int | None = None
        # The confirmation round entries appended now will share (see :meth:`append`).
        self._next_round: asyncio.Future | None = None

    # -- opening and recovery ---------------------------------------------------

    async def open(self, observe: Callable[[EntryHeader, bytes], None] | None = None,
                   payload_head: int = 0) -> None:
        """Load the ledger chain, recover an unclosed tail ledger, and start a new ledger.

        ``observe`` sees every retained entry's header and the first ``payload_head``
        bytes of its payload, in offset order (producer state is rebuilt from them).
        """
        node = await self._chain.read()
        infos = []
        if node is not None:
            state = json.loads(node.data)
            self._version = node.version
            self._log_start = state["log_start"]
            self._clean_end = state.get("clean_end", 0)
            infos = [LedgerInfo(**info) for info in state["ledgers"]]
            for ledger_id in state.get("garbage", ()):
                self._store.delete_ledger(ledger_id)  # the next chain write forgets them
        try:
            for info in infos:
                await self._load(info, observe, payload_head)
        except CorruptLedger as exc:
            await self._open_before(info, self._stranded(exc) if isinstance(exc, StrandedEntries) else exc)
        except BaseException:
            for segment in self._segments:
                segment.ledger.release()
            self._closed = True
            raise
        await self._start_ledger(self._segments[-1].next_offset if self._segments else self._log_start)
        self._high_watermark = self._segments[-1].info.first_offset

    async def _load(self, info: LedgerInfo, observe, payload_head: int) -> None:
        ledger = await self._store.open_ledger(info.ledger_id, info.last_entry if info.closed else None)
        segment = _Segment(info, ledger)
        try:
            for length, head in await ledger.read_heads(0, ledger.last_add_confirmed, entry.SIZE + payload_head):
                header = EntryHeader.unpack(head)
                segment.add(header, length - entry.SIZE)
                if observe is not None and header.last_offset >= self._log_start:
                    observe(header, head[entry.SIZE:])
        except BaseException:
            ledger.release()
            raise
        if not info.closed:
            self._seal_info(segment)
            log.debug("%s: recovered ledger %d with %d entries", self.name, info.ledger_id, len(segment.ends))
        if not segment.ends:
            ledger.release()
            self._store.delete_ledger(info.ledger_id)
            return
        self._push_segment(segment)

    async def _open_before(self, info: LedgerInfo, damage: CorruptLedger) -> None:
        """Keep what lies before the damage readable, then raise DamagedEntry: the ledgers
        before the damaged one and, when the store can open it read-only, its whole CRC-valid
        entries before the damage. Closed: nothing is appended, sealed, trimmed or persisted,
        so the damaged ledger stays as found for a repair."""
        self._closed = True
        try:
            ledger = await self._store.open_follower(info.ledger_id)
        except (OSError, CorruptLedger, FollowingUnsupported):
            ledger = None
        if ledger is not None:
            try:
                heads = await ledger.read_heads(0, ledger.last_add_confirmed, entry.SIZE)
            except (OSError, CorruptLedger):
                heads = []
            if heads:
                segment = _Segment(info, ledger)
                for length, head in heads:
                    segment.add(EntryHeader.unpack(head), length - entry.SIZE)
                self._push_segment(segment)
            else:
                ledger.release()
        self._high_watermark = self._segments[-1].next_offset if self._segments else self._log_start
        self.damaged_at = self._high_watermark
        raise DamagedEntry(damage, self._high_watermark) from damage

    def _stranded(self, exc: StrandedEntries) -> StrandedEntries:
        """The store's refusal, with what the stranded entries hold by their entry headers."""
        headers = [EntryHeader.unpack(head) for head in exc.heads if len(head) >= entry.SIZE]
        offsets = (f"offsets {min(h.base_offset for h in headers)}-{max(h.last_offset for h in headers)}"
                   if headers else "no readable entry header")
        return StrandedEntries(f"{exc}; {len(exc.heads)} entries holding "
                               f"{sum(h.record_count for h in headers)} records ({offsets}) lie after the damage; "
                               "nothing was truncated", exc.kept, exc.heads)

    def _seal_info(self, segment: _Segment) -> None:
        info = segment.info
        info.closed = True
        info.last_entry = len(segment.last_offsets) - 1
        info.last_offset = segment.next_offset - 1
        info.max_timestamp = max(segment.max_timestamps, default=-1)
        info.size = segment.ends[-1] if segment.ends else 0

    def _push_segment(self, segment: _Segment) -> None:
        self._segments.append(segment)
        self._firsts.append(segment.info.first_offset)
        self._next_round = None  # a round confirms one segment's entries

    async def _start_ledger(self, first_offset: int) -> None:
        """The new ledger takes appends only once the chain record lists it, so nothing
        acknowledged can be in a ledger the chain does not reach."""
        ledger_id = await self._allocate_ledger_id()
        ledger = self._store.create_ledger(ledger_id)
        segment = _Segment(LedgerInfo(ledger_id, first_offset, _now_ms()), ledger)
        try:
            await self._persist([*self._segments, segment])
        except BaseException:
            # Left in the store (empty): whether the chain got it is unknown when the write failed.
            ledger.release()
            raise
        self._push_segment(segment)

    async def _persist(self, segments: list[_Segment] | None = None) -> None:
        segments = self._segments if segments is None else segments
        state = {"log_start": self._log_start, "ledgers": [asdict(s.info) for s in segments],
                 "clean_end": self._clean_end, "garbage": self._garbage}
        data = json.dumps(state, separators=(",", ":")).encode()
        if self._version < 0:
            self._version = await self._chain.create(data)
        else:
            self._version = await self._chain.replace(data, self._version)

    # -- offsets ------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._log_start

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @property
    def next_offset(self) -> int:
        return self._segments[-1].next_offset

    def ledger_first_offsets(self) -> list[int]:
        return list(self._firsts)

    @property
    def size_bytes(self) -> int:
        return sum(s.ends[-1] for s in self._segments if s.ends)

    # -- appending ------------------------------------------------------------------

    async def prepare_append(self) -> None:
        """Take this append's turn, rolling the ledger over first if it is due; call right
        before :meth:`append`, with no await in between.

        Split from :meth:`append` so a caller can check state (producer sequences) and
        append atomically. Appends land in the order their callers arrived here: while a
        roll is under way (or appends wait behind one), a newcomer queues behind them,
        although the new ledger may already be open. Otherwise a producer's pipelined
        requests that found the roll finished would overtake those that waited for it.
        """
        if self._appenders or self._needs_rollover():
            await self._in_turn(self._needs_rollover)
        self._check_open()

    async def roll_over(self) -> None:
        """Seal the current ledger now (if it holds anything) and start the next one."""
        await self._in_turn(lambda: bool(self._segments[-1].ends))

    async def _in_turn(self, roll_due: Callable[[], bool]) -> None:
        """Wait for every earlier caller's turn, roll over if ``roll_due()``, and hand the turn on.

        The next caller resumes only after this one has returned to its caller, which
        appends with no await in between, so the queue is the append order.
        """
        turn = asyncio.get_running_loop().create_future()
        self._appenders.append(turn)
        try:
            if len(self._appenders) > 1:
                await turn
            if roll_due():
                async with self._roll_lock:  # shared with retention and compaction, which rewrite the chain
                    if roll_due():
                        await self._roll_guarded()
        finally:
            first = self._appenders[0] is turn
            self._appenders.remove(turn)
            if first and self._appenders and not self._appenders[0].done():  # done: cancelled, it passes on itself
                self._appenders[0].set_result(None)

    async def _roll_guarded(self) -> None:
        try:
            await self._roll()
        except (LedgerFenced, ChainConflict):
            raise
        except Exception as exc:
            # The store or the chain record could not take it (a full disk): the roll is
            # tried again before the next append, from where it stopped.
            raise StoreUnavailable(f"{self.name}: rolling over failed: {exc!r}") from exc

    def append(self, record_count: int, max_timestamp: int, magic: int, format_code: int,
               encode: Callable[[int], list]) -> tuple[int, asyncio.Future]:
        """Append one entry; ``encode(base_offset)`` gives the payload buffers.

        Returns the base offset at once and a future that resolves when the entry is
        durable. Entries land in the order appends are called.

        Entries appended before a confirmation round starts share that round's future:
        the store group-commits them with one sync anyway, and a task per entry was a
        measurable share of a small produce's cost (bench/PROFILE.md, small requests).
        """
        if self._closed:
            raise LedgerFenced(f"{self.name} is closed")
        segment = self._segments[-1]
        base = segment.next_offset
        header = EntryHeader(base, record_count, max_timestamp, magic, format_code)
        payload = encode(base)
        try:
            segment.ledger.add_entry([header.pack(), *payload])
        except OSError as exc:
            raise StoreUnavailable(f"{self.name}: {exc}") from exc
        segment.add(header, sum(len(chunk) for chunk in payload))
        if self._next_round is None:
            self._next_round = asyncio.ensure_future(self._confirm_round(segment))
        return base, self._next_round

    async def _confirm_round(self, segment: _Segment) -> None:
        """Confirm every entry appended to ``segment`` before this round started."""
        self._next_round = None  # entries appended from now on wait for the next round
        await self._confirm(segment, segment.ledger.last_add_pushed)

    async def _confirm(self, segment: _Segment, entry_id: int) -> None:
        try:
            await segment.ledger.sync(entry_id)
        except OSError:
            # The store gave up what it had not confirmed (a failed fsync). Never acknowledged
            # nor read (the high watermark stayed put), those entries' offsets go to the next
            # appends, in a new ledger.
            segment.drop_unconfirmed()
            raise
        end = segment.confirmed_end()
        if end > self._high_watermark:
            self._high_watermark = end
            waiters, self._append_waiters = self._append_waiters, set()
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)

    def _needs_rollover(self) -> bool:
        segment = self._segments[-1]
        if segment.failed:
            return True
        if not segment.ends:
            return False
        return (segment.ends[-1] >= self.rollover.max_bytes
                or _now_ms() - segment.info.created_ms >= self.rollover.max_age_ms)

    async def _roll(self) -> None:
        segment = self._segments[-1]
        await segment.ledger.close()
        await self._confirm(segment, segment.ledger.last_add_pushed)
        self._seal_info(segment)
        await self._start_ledger(segment.next_offset)
        log.info("%s: rolled over from ledger %d at offset %d", self.name, segment.info.ledger_id, segment.next_offset)

    def wake_on_append(self, waiter: asyncio.Future) -> None:
        """Resolve ``waiter`` the next time the high watermark moves (delayed fetches).

        One future per fetch, shared by all its partitions: a fetch over many partitions
        waits without a task per partition, and the wake-up comes once per group commit
        (the high watermark moves when an fsync confirms, not per entry).
        """
        self._append_waiters.add(waiter)

    def forget_waiter(self, waiter: asyncio.Future) -> None:
        self._append_waiters.discard(waiter)

    # -- reading --------------------------------------------------------------------

    async def read(self, offset: int, max_bytes: int, min_one: bool = True,
                   end: int | None = None) -> list[StoredEntry]:
        """Entries from the one holding ``offset`` up to the high watermark (or up to ``end``,
        entries wholly below it, when that is lower).

        Stops once ``max_bytes`` of payload are gathered. With ``min_one`` it returns at
        least one entry so a batch larger than the limit still makes progress (Kafka's
        minOneMessage); without, an entry past the limit is left for a later read. An
        entry that reads back damaged raises DamagedEntry, naming its first offset.
        """
        hw = self._high_watermark if end is None else min(end, self._high_watermark)
        if offset >= hw or offset < self._log_start:
            return []
        out: list[StoredEntry] = []
        budget = max_bytes
        # The segment is looked up again after every await: compaction may have replaced it.
        index = max(0, bisect_right(self._firsts, offset) - 1)
        while index < len(self._segments):
            segment = self._segments[index]
            first = segment.entry_for(offset)
            if first == len(segment.last_offsets) and segment.info.closed:
                index += 1  # compaction removed this ledger's tail: the offset's records are further on
                continue
            last_allowed = bisect_left(segment.last_offsets, hw) - 1
            if first > last_allowed:
                break
            start_bytes = segment.ends[first - 1] if first else 0
            # Entries whose cumulative end stays within budget; the first one regardless
            # only when nothing has been gathered yet.
            last = min(last_allowed, bisect_right(segment.ends, start_bytes + budget) - 1)
            if last < first:
                if out or not min_one:
                    break
                last = first
            more = last < len(segment.last_offsets) - 1
            budget -= segment.ends[last] - start_bytes
            next_offset = segment.last_offsets[last] + 1
            try:
                entries = await self.read_entries(segment, first, last)
            except CorruptLedger as damage:
                raise await self._damaged_entry(segment, first, last, damage) from damage
            for raw in entries:
                header = EntryHeader.unpack(raw)
                out.append(StoredEntry(header, raw[entry.SIZE:]))
            if len(entries) < last - first + 1:
                # The ledger holds fewer than its index lists (confirmed where this read cannot
                # see them yet): stop at the gap, for a later read, rather than step over it, which
                # a consumer takes for the log's next records and never reads the gap's.
                log.warning("%s: ledger %d gave %d of entries %d-%d; the read stops there", self.name,
                            segment.info.ledger_id, len(entries), first, last)
                break
            offset = next_offset
            if more:
                break
            index = max(0, bisect_right(self._firsts, offset) - 1)
        return out

    async def _damaged_entry(self, segment: _Segment, first: int, last: int, damage: CorruptLedger) -> DamagedEntry:
        """The first of entries ``first..last`` that does not read back alone (a read that
        failed as a whole does not say which): the damage, with the first offset it holds."""
        for entry_id in range(first, last + 1):
            try:
                await self.read_entries(segment, entry_id, entry_id)
            except CorruptLedger as exc:
                damage = exc
                break
        else:
            entry_id = first  # each reads back alone: refuse from the range's start
        offset = segment.last_offsets[entry_id - 1] + 1 if entry_id else segment.info.first_offset
        return DamagedEntry(damage, offset)

    async def read_entries(self, segment: _Segment, first: int, last: int) -> list[memoryview]:
        """Entries ``first..last`` of ``segment`` (header and payload), which stays open meanwhile."""
        segment.reads += 1
        try:
            return await segment.ledger.read_range(first, last)
        finally:
            segment.reads -= 1
            if segment.retired and not segment.reads:
                self._release(segment)

    async def entries_from_timestamp(self, timestamp: int) -> list[StoredEntry]:
        """The first entry (up to the high watermark) whose max timestamp is >= ``timestamp``."""
        for segment in self._segments:
            if segment.info.closed and segment.info.max_timestamp < timestamp:
                continue
            for i, ts in enumerate(segment.max_timestamps):
                if ts >= timestamp and segment.last_offsets[i] < self._high_watermark:
                    if segment.last_offsets[i] < self._log_start:
                        continue
                    return await self._entry_at(segment, i)
        return []

    async def entries_with_max_timestamp(self) -> list[StoredEntry]:
        """The first entry holding the largest timestamp in the log (ListOffsets -3)."""
        best = None
        for segment in self._segments:
            for i, ts in enumerate(segment.max_timestamps):
                if segment.last_offsets[i] >= self._high_watermark:
                    break
                if segment.last_offsets[i] >= self._log_start and (best is None or ts > best[0]):
                    best = (ts, segment, i)
        return await self._entry_at(best[1], best[2]) if best else []

    async def _entry_at(self, segment: _Segment, index: int) -> list[StoredEntry]:
        raw = (await self.read_entries(segment, index, index))[0]
        return [StoredEntry(EntryHeader.unpack(raw), raw[entry.SIZE:])]

    # -- retention and lifecycle ------------------------------------------------------

    async def enforce_retention(self, now_ms: int | None = None) -> int:
        """Trim whole sealed ledgers past retention; return how many were dropped."""
        now_ms = _now_ms() if now_ms is None else now_ms
        dropped = 0
        async with self._roll_lock:  # one writer of the chain at a time (rollover, compaction)
            total = self.size_bytes
            while len(self._segments) > 1 and self._segments[0].info.closed:
                info = self._segments[0].info
                too_old = (self.retention.ms >= 0 and info.max_timestamp >= 0
                           and now_ms - info.max_timestamp > self.retention.ms)
                too_big = self.retention.bytes >= 0 and total - info.size >= self.retention.bytes
                if not (too_old or too_big):
                    break
                total -= info.size
                self._log_start = max(self._log_start, info.last_offset + 1, self._segments[1].info.first_offset)
                await self._drop_first_segment()
                dropped += 1
        return dropped

    async def trim_before(self, offset: int) -> None:
        """Make ``offset`` (at most the high watermark) the log start; drop ledgers wholly below it.

        Entries of a kept ledger below the new start stay on disk but are no longer
        served, as Kafka's DeleteRecords leaves a segment's head until the segment goes.
        """
        if not self._log_start <= offset <= self._high_watermark:
            raise ValueError(f"{self.name}: log start {offset} outside [{self._log_start}, {self._high_watermark}]")
        async with self._roll_lock:  # one writer of the chain at a time (rollover, compaction)
            self._log_start = offset
            while (len(self._segments) > 1 and self._segments[0].info.closed
                   and self._segments[0].info.last_offset < offset):
                await self._drop_first_segment()
            await self._persist()

    async def _drop_first_segment(self) -> None:
        segment = self._segments.pop(0)
        self._firsts.pop(0)
        await self._persist()
        self._retire(segment)

    def _retire(self, segment: _Segment) -> None:
        """Delete a ledger that left the chain, once no read of it is under way."""
        segment.retired = True
        if not segment.reads:
            self._release(segment)

    def _release(self, segment: _Segment) -> None:
        segment.ledger.release()
        self._delete_garbage(segment.info.ledger_id)

    def _delete_garbage(self, ledger_id: int) -> None:
        """Delete a ledger out of the chain; the next chain write stops listing it as garbage."""
        self._store.delete_ledger(ledger_id)
        if ledger_id in self._garbage:
            self._garbage = [i for i in self._garbage if i != ledger_id]

    # -- compaction (storage.compaction rewrites; this swaps what it wrote in) ------------

    @property
    def clean_end(self) -> int:
        return self._clean_end

    def sealed_segments(self) -> list[_Segment]:
        """The sealed ledgers, oldest first: all but the open one, which compaction never touches."""
        return self._segments[:-1]

    async def create_rewrite_ledgers(self, count: int) -> list[Ledger]:
        """New ledgers for a compaction to write, listed as garbage in the chain first, so a
        crash before :meth:`swap` leaves nothing behind that the next open does not delete."""
        ids = [await self._allocate_ledger_id() for _ in range(count)]
        async with self._roll_lock:
            self._check_open()
            self._garbage = [*self._garbage, *ids]
            await self._persist()
        return [self._store.create_ledger(ledger_id) for ledger_id in ids]

    def discard_rewrite(self, ledgers: list[Ledger]) -> None:
        """Delete a compaction's ledgers that will not be swapped in (they stay listed as garbage)."""
        for ledger in ledgers:
            ledger.release()
            self._delete_garbage(ledger.ledger_id)

    async def swap(self, old: list[_Segment], new: list[_Segment], clean_end: int) -> bool:
        """Put the sealed ledgers ``new`` in the place of ``old`` (consecutive, from the first
        ledger) with one chain write, the point where a crash stops leaving the old ledgers and
        starts leaving the new. False, and nothing changed, when ``old`` is no longer the head
        of the chain (retention or DeleteRecords dropped a ledger meanwhile)."""
        async with self._roll_lock:
            self._check_open()
            count = len(old)
            if [id(s) for s in self._segments[:count]] != [id(s) for s in old] or len(self._segments) <= count:
                return False
            new_ids = {segment.info.ledger_id for segment in new}
            segments = [*new, *self._segments[count:]]
            garbage = self._garbage
            self._garbage = [i for i in garbage if i not in new_ids] + [s.info.ledger_id for s in old]
            previous_clean_end = self._clean_end
            self._clean_end = max(self._clean_end, clean_end)
            try:
                await self._persist(segments)
            except BaseException:
                self._garbage, self._clean_end = garbage, previous_clean_end
                raise
            self._segments = segments
            self._firsts = [segment.info.first_offset for segment in segments]
        for segment in old:
            self._retire(segment)
        return True

    def _check_open(self) -> None:
        if self._closed:
            raise LedgerFenced(f"{self.name} is closed")

    async def close(self) -> None:
        """Make everything durable and seal the open ledger (clean shutdown)."""
        if self._closed:
            return
        async with self._roll_lock:
            self._closed = True
            segment = self._segments[-1]
            await segment.ledger.close()
            await self._confirm(segment, segment.ledger.last_add_pushed)
            self._seal_info(segment)
            await self._persist()
            for s in self._segments:
                s.ledger.release()

    def abandon(self) -> None:
        """Stop serving without writing anything: the partition is another broker's now.

        Nothing is sealed or persisted, because the new owner's recovery fences the open
        ledger and records where it ends; appends still waiting for durability fail as
        fenced (the store's ledger, released, confirms nothing more).
        """
        self._closed = True
        for segment in self._segments:
            segment.ledger.release()

    @staticmethod
    def ledger_ids(chain: bytes) -> list[int]:
        """The ledgers a chain record lists (what a store must keep for it)."""
        return [info["ledger_id"] for info in json.loads(chain)["ledgers"]]

    @staticmethod
    async def destroy(store: LedgerStore, chain: ChainRecord) -> None:
        """Delete a ledger chain nobody serves (a deleted topic's), ledgers first."""
        node = await chain.read()
        if node is None:
            return
        state = json.loads(node.data)
        for ledger_id in [info["ledger_id"] for info in state["ledgers"]] + state.get("garbage", []):
            store.delete_ledger(ledger_id)
        try:
            await chain.delete(node.version)
        except ChainConflict:
            pass

    async def delete(self) -> None:
        """Drop every ledger and the ledger list (topic deletion)."""
        self._closed = True
        for segment in self._segments:
            segment.ledger.release()
            self._store.delete_ledger(segment.info.ledger_id)
        self._segments.clear()
        self._firsts.clear()
        if self._version >= 0:
            await self._chain.delete()


def _now_ms() -> int:
    return int(time.time() * 1000)
