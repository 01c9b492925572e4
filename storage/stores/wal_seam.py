"""The seam between the object store and the WAL its ledgers' entries go through.

Two kinds: the S3 WAL (storage.stores.s3_wal: an entry is acknowledged once a WAL object
holding it is confirmed) and the local WAL (storage.stores.local_wal: once fsync'd on this
broker's disk, uploaded into WAL objects in the background). Both write WAL objects of the
same layout under the same writer name, numbered by one ``WalObjects``, so a reader or a
recovering broker cannot tell which wrote them.
"""
import asyncio
import time
from abc import ABC, abstractmethod
from collections.abc import Callable

from ..ledger import TailUnreachable
from .object_layout import wal_key, wal_seq
from .object_ledger import S3Ledger

# Index pieces are written every this many WAL objects, and no sooner than CHECKPOINT_SECONDS
# after the last ones: a recovery reads the indexes of at most this many WAL objects beyond
# the pieces, or of that long's writing (200 at the S3 WAL's 40 objects/s), and an open
# ledger costs a piece PUT at most every CHECKPOINT_SECONDS however fast objects go.
CHECKPOINT_OBJECTS = 50
CHECKPOINT_SECONDS = 5.0


class WalObjects:
    """This writer's WAL objects: the key of the next one, and how many (and bytes) were
    written; every CHECKPOINT_OBJECTS confirmed (CHECKPOINT_SECONDS apart at least),
    ``checkpoint`` writes index pieces."""

    def __init__(self, writer: str, checkpoint: Callable[[], None]):
        self.writer = writer
        self.objects = 0
        self.bytes = 0
        self._seq = 0
        self._since_checkpoint = 0
        self._last_checkpoint = -CHECKPOINT_SECONDS
        self._checkpoint = checkpoint
        self.newest_confirmed = -1  # every object of this writer that will ever hold a confirmed entry is at or below

    @property
    def next_seq(self) -> int:
        return self._seq

    def take_key(self) -> str:
        seq, self._seq = self._seq, self._seq + 1
        return wal_key(self.writer, seq)

    def stored(self, size: int) -> None:
        self.objects += 1
        self.bytes += size

    def confirmed(self, key: str) -> None:
        """Count object ``key``, whose runs were taken (objects are confirmed in order)."""
        self.newest_confirmed = max(self.newest_confirmed, wal_seq(key))
        self._since_checkpoint += 1
        now = time.monotonic()
        if self._since_checkpoint >= CHECKPOINT_OBJECTS and now - self._last_checkpoint >= CHECKPOINT_SECONDS:
            self._since_checkpoint = 0
            self._last_checkpoint = now
            self._checkpoint()


class ObjectCuts:
    """When a WAL cuts its next object: once ``kick``ed, no sooner than a commit interval
    after the last cut, or at once once ``fill``ed (a full object's worth waits); and with
    one of ``slots`` PUT slots free (``done`` gives it back).

    With a ``gap`` (the S3 WAL, whose acknowledgements wait for its PUTs) the interval
    applies only while a PUT is out: entries wait for it to return, then go as soon as a
    gap has passed since the last cut; a PUT still out an interval after the last cut has
    the entries behind it stored beside it. Under a steady load an entry so waits for its
    object about one PUT (or the gap, whichever is longer) instead of up to an interval,
    and the PUT rate stays at most one per gap."""

    def __init__(self, interval: float, slots: int, gap: float | None = None):
        self.kick = asyncio.Event()
        self._wake = asyncio.Event()
        self._full = False
        self._slots = asyncio.Semaphore(slots)
        self._interval = interval
        self._gap = gap
        self._out = 0
        self._last = 0.0

    async def next(self) -> None:
        """Return when the next object may be cut, holding a PUT slot."""
        await self.kick.wait()
        self.kick.clear()
        while not self._full:
            wait = self._interval if self._out or self._gap is None else self._gap
            delay = self._last + wait - time.monotonic()
            if delay <= 0:
                break
            self._wake.clear()
            try:
                async with asyncio.timeout(delay):
                    await self._wake.wait()  # filled, or a PUT returned
            except TimeoutError:
                break
        await self._slots.acquire()
        self._out += 1
        self._full = False  # what filled it is in the object about to be cut

    def fill(self) -> None:
        self._full = True
        self._wake.set()

    def cut(self) -> None:
        self._last = time.monotonic()

    def done(self) -> None:
        """A slot ``next`` gave is free again."""
        self._out -= 1
        self._slots.release()
        self._wake.set()


class Wal(ABC):
    """One kind of WAL: it makes the ledgers it creates durable, and answers for the tail of
    an unsealed ledger whose writer record names a local WAL."""

    @abstractmethod
    def create_ledger(self, ledger_id: int) -> S3Ledger: ...

    def writer_fields(self) -> dict:
        """What a ledger's writer record says of this WAL (where unuploaded entries may be)."""
        return {}

    async def drain(self, ledger_id: int, writer: dict) -> None:
        """Put into the bucket every entry of ``ledger_id`` acknowledged through the local WAL
        its writer record names, and seal it; TailUnreachable when that WAL is not here."""
        raise unreachable_tail(ledger_id, writer)

    @abstractmethod
    def lag_seconds(self) -> float:
        """Age of the oldest acknowledged (or waiting) entry not yet in a WAL object."""

    def start(self) -> None:  # noqa: B027 (only a WAL with local state has anything left over)
        """Take up what a previous run left behind."""

    def delete_ledger(self, ledger_id: int) -> None:  # noqa: B027 (only a local WAL keeps a copy)
        """Drop what the WAL keeps of a deleted ledger."""

    @abstractmethod
    def close(self) -> None: ...


def unreachable_tail(ledger_id: int, writer: dict) -> TailUnreachable:
    return TailUnreachable(f"ledger {ledger_id}: entries past those uploaded may be only in the "
                           f"local WAL {writer['local_wal']} of writer {writer['writer']}; it is "
                           "served once that broker is back and has uploaded them")
