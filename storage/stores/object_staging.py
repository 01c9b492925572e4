"""Record sets a zone's broker takes for partitions owned in other zones, staged on object
storage (storage.store_capabilities.Staging) inside its own WAL objects.

A staged set is one more entry in the next WAL object, beside the entries of every ledger
this broker writes (with ``--wal s3`` the very object they go in; with a local WAL, an
object WAL of its own), so staging costs no request of its own: one PUT per commit
interval carries every set taken in it. The reference the owner is sent names the object
(writer and sequence number), where the set's frame starts and its length; the owner GETs
the object whole into its read cache at the first reference to it (the next ones, sent
for the other sets of the same interval, are read from memory) and checks the frame's
CRC32C, so a missing or damaged object appends nothing.

The staged runs belong to no ledger (``STAGED_LEDGER``): no index piece names them and no
recovery takes them. Nothing needs a set once the owner has answered, and the object is
shared, so nothing is deleted set by set: garbage collection deletes the object once none of
its ledgers is live and it is older than the longest a reference may wait
(object_inventory.STAGED_GRACE_SECONDS). A restarted broker's leftovers go the same way.
"""
import asyncio
import re

from ..ledger import CorruptLedger
from . import wal_object
from .block_cache import BlockCache
from .object_layout import STAGED_LEDGER, wal_key, wal_seq
from .object_ledger import LedgerHome, S3Ledger
from .single_flight import shared
from .wal_object import FRAME, Run

_REFERENCE = re.compile(r"([0-9A-Za-z-]+)_(\d+)_(\d+)_(\d+)")


class StagedSets(S3Ledger):
    """What the WAL sees of staged sets: a ledger whose entries each stand alone. A failed PUT
    fails the sets in it, never the next ones, and nothing is kept once a set's place is known."""

    def __init__(self, home: LedgerHome, wal):
        super().__init__(home, STAGED_LEDGER)
        self._wal = wal
        self._next = 0
        self._places: dict[int, asyncio.Future] = {}  # per set still to be stored: where it will be

    @property
    def last_add_confirmed(self) -> int:
        return -1  # every set added is still to be written

    async def stage(self, data) -> tuple[str, int, int]:
        """Put ``data`` in the next WAL object; (object key, frame start, length) once it is stored."""
        entry_id, self._next = self._next, self._next + 1
        place = self._places[entry_id] = asyncio.get_running_loop().create_future()
        self._wal.add(self, entry_id, [data])
        return await place

    def waiting(self, entry_id: int, done: asyncio.Future) -> None:
        done.add_done_callback(lambda stored: self._unstored(entry_id, stored))

    def confirmed(self, key: str, run: Run, data: memoryview) -> bool:
        for entry_id, (start, length) in enumerate(zip(run.positions(), run.lengths), run.first_entry):
            place = self._places.pop(entry_id, None)
            if place is not None and not place.done():
                place.set_result((key, start, length))
        return True

    def _unstored(self, entry_id: int, stored: asyncio.Future) -> None:
        """The object a set went into failed (a set whose place is known is gone from ``_places``)."""
        place = self._places.pop(entry_id, None)
        if place is not None and not place.done():
            failure = "cancelled" if stored.cancelled() else stored.exception()
            place.set_exception(OSError(f"staged record set not stored: {failure}"))

    def fail(self, failure: BaseException) -> None:
        """Each set hears of its own object's failure; later sets go on."""


def reference(writer: str, key: str, start: int, length: int) -> str:
    """The name the owner is sent (a STAGED_NAME): writer, object sequence, frame start, length."""
    return f"{writer}_{wal_seq(key)}_{start}_{length}"


class StagedReader:
    """An owner's reads of staged sets: the first reference to an object GETs it whole (once,
    however many references arrive meanwhile) into the read cache, and the sets the zone's
    broker put in it with the rest are sliced from memory: one GET per object, not per set."""

    def __init__(self, client, cache: BlockCache, gets: asyncio.Semaphore):
        self._client = client
        self._cache = cache
        self._gets = gets
        self._fetching: dict[str, asyncio.Future] = {}

    async def read(self, name: str) -> bytes:
        """The record set ``name`` refers to, checked against its CRC32C; OSError when the name
        is not a reference, or the object is missing, short or damaged."""
        match = _REFERENCE.fullmatch(name)
        if match is None:
            raise FileNotFoundError(f"{name!r} names no staged record set")
        writer, seq, start, length = match.group(1), *map(int, match.groups()[1:])
        data = await self.object(wal_key(writer, seq))
        end = start + FRAME.size + length
        if len(data) < end:
            raise OSError(f"staged record set {name}: the object holds {len(data)} bytes")
        try:
            [payload] = wal_object.read_frames(data[start:end], STAGED_LEDGER, seq, [length])
        except CorruptLedger as exc:
            raise OSError(f"staged record set {name}: {exc}") from None
        return bytes(payload)

    async def object(self, key: str) -> memoryview:
        cached = self._cache.get((key, STAGED_LEDGER, 0))
        if cached is not None:
            return cached
        return await shared(self._fetching, key, lambda: self._get(key))

    async def _get(self, key: str) -> memoryview:
        async with self._gets:
            data = await self._client.get(key)
        if data is None:
            raise FileNotFoundError(f"{key}: no such object")
        self.keep(key, memoryview(data))
        return memoryview(data)

    def keep(self, key: str, data: memoryview) -> None:
        """``data`` is WAL object ``key`` whole (read for another reason): its sets are read from it."""
        self._cache.reads.put((key, STAGED_LEDGER, 0), data)
