"""The ledger interface, shaped like BookKeeper's so any shared-log store fits under it.

A ledger is an append-only sequence of entries with dense ids from 0, written by one
writer. Adding an entry and making it durable are separate steps so that a store can
group-commit: many ``add_entry`` calls, one ``sync`` (fsync) for all of them. The
*last add confirmed* (LAC) is the highest entry id known durable; readers never see
past it. Closing seals a ledger at its LAC; opening an unclosed ledger for recovery
fences it (no further writes by its old writer) and truncates whatever is torn.

Reads and opens are awaited: a store may have to go over the network (an object
store), and even a local file read of many megabytes must not hold the event loop.
"""
import re
from abc import ABC, abstractmethod


class LedgerFenced(Exception):
    """The ledger was closed or fenced; the writer must stop and give up the partition."""


class CorruptLedger(Exception):
    """A ledger's stored bytes are not what was confirmed: missing, cut short or damaged."""


class ChecksumMismatch(CorruptLedger):
    """An entry read back does not match the CRC stored with it: its bytes must not be served."""


class StrandedEntries(CorruptLedger):
    """Recovery found a damaged entry with CRC-valid entries after it.

    That is not a torn tail (the last write cut short): entries after the damage may
    have been acknowledged, so the store truncates nothing and says what it found.
    ``kept`` is how many entries precede the damage; ``heads`` holds the first
    ``STRANDED_HEAD_BYTES`` bytes of each valid entry after it, enough for a caller to
    count what they hold from its own entry headers.
    """

    def __init__(self, message: str, kept: int, heads: list[bytes]):
        super().__init__(message)
        self.kept = kept
        self.heads = heads


STRANDED_HEAD_BYTES = 64


class TailUnreachable(Exception):
    """A ledger's last entries may be durable only where this process cannot read them (the
    local WAL of the broker that wrote it): it is not opened, rather than sealed short.

    Unlike damage this passes: once the broker holding them uploads them the ledger opens,
    so its partition is tried again.
    """


class StoreUnavailable(Exception):
    """The store refused a write (disk full, I/O error) and nothing was appended.

    Unlike damage this passes: the writer answers the error and tries again on the
    next append, so the partition serves again once space returns.
    """


class Ledger(ABC):
    ledger_id: int

    @abstractmethod
    def add_entry(self, chunks) -> int:
        """Append one entry made of ``chunks`` (buffers concatenated); return its id."""

    @abstractmethod
    async def sync(self, entry_id: int) -> None:
        """Return once every entry up to ``entry_id`` is durable (group-committed)."""

    @property
    @abstractmethod
    def last_add_confirmed(self) -> int:
        """The highest durable entry id, -1 when none is."""

    @property
    @abstractmethod
    def last_add_pushed(self) -> int:
        """The highest entry id added, durable or not."""

    @property
    @abstractmethod
    def length(self) -> int:
        """Bytes of entry payload stored."""

    @abstractmethod
    async def read_range(self, first: int, last: int) -> list[memoryview]:
        """Entries ``first..last`` inclusive (at most LAC), as buffers."""

    async def read_heads(self, first: int, last: int, size: int) -> list[tuple[int, bytes]]:
        """``(entry length, first size bytes)`` of entries ``first..last``.

        Index rebuilds need only entry headers and lengths; stores that can read a
        prefix without the payload override this.
        """
        return [(len(entry), bytes(entry[:size])) for entry in await self.read_range(first, last)]

    @abstractmethod
    async def close(self) -> None:
        """Make everything added durable and seal the ledger."""

    async def catch_up(self) -> int:
        """A follower's view (:meth:`LedgerStore.open_follower`): take in the whole entries
        its writer has stored since; the new last entry id. A writer's own view is current."""
        return self.last_add_confirmed

    def release(self) -> None:  # noqa: B027 (an optional hook)
        """Free what this process holds for the ledger (file handles); it stays stored."""


# What a staging store (storage.store_capabilities.Staging) accepts as a name: one plain path
# component, never ``..`` or a separator, since the name arrives in a request from another
# broker (or anyone claiming to be one).
STAGED_NAME = re.compile(r"[0-9A-Za-z][0-9A-Za-z_-]{0,127}")


class FollowingUnsupported(Exception):
    """The store cannot show one process's ledger to another while it is being written."""


class LedgerStore(ABC):
    # Whether :meth:`open_follower` works: another broker may read a ledger as its writer appends.
    follows = False

    @abstractmethod
    def create_ledger(self, ledger_id: int) -> Ledger: ...

    async def open_follower(self, ledger_id: int) -> Ledger:
        """Open a ledger another process may still be writing, to read it as it grows.

        Unlike :meth:`open_ledger` this never fences, recovers, truncates or writes
        anything: the writer goes on undisturbed. What the view shows is only what
        :meth:`Ledger.catch_up` found whole; which of that is confirmed is the
        writer's to say (a follower reads no further than the writer's high watermark).
        """
        raise FollowingUnsupported(f"{type(self).__name__} cannot follow a ledger another broker writes")

    @abstractmethod
    async def open_ledger(self, ledger_id: int, last_entry: int | None) -> Ledger:
        """Open a ledger read-only.

        ``last_entry`` is the sealed last entry id from metadata, or None for a ledger
        whose writer never closed it: the store then recovers it, keeping every entry
        that checks out and truncating a torn or corrupt tail.
        """

    @abstractmethod
    def delete_ledger(self, ledger_id: int) -> None: ...

    @abstractmethod
    def ledger_bytes(self, ledger_id: int) -> int: ...

    def close(self) -> None:  # noqa: B027 (an optional hook)
        """Release store-wide resources."""
