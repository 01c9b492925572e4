"""What some ledger stores can do beyond :class:`storage.ledger.LedgerStore`, declared by the
store rather than stubbed on every store (Tansu's storage seam keeps its capabilities apart
the same way).

A caller asks ``isinstance(store, Staging)`` before it relies on one, so a store that cannot
stage or has nothing to collect carries no method pretending otherwise.
"""
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable


class Staging(ABC):
    """Record sets kept where every broker can read them: a zone's broker stages a record set
    taken for a partition owned in another zone and sends the owner only its name."""

    @abstractmethod
    async def stage(self, prefix: str, data) -> str:
        """Store ``data`` where every broker can read it (:meth:`read_staged`); the name to send.

        The store picks the name: a file of its own, starting with ``prefix`` (the staging
        broker's, for :meth:`unstage_all`), or where the set lies in a shared object. It need
        not be durable: the owner answers only once it has appended a copy to its own ledger,
        and the asker unstages it after that answer.
        """

    @abstractmethod
    async def read_staged(self, name: str) -> bytes:
        """What :meth:`stage` stored under ``name``; OSError when there is none or it is damaged."""

    @abstractmethod
    def unstage(self, name: str) -> None:
        """Delete what :meth:`stage` stored under ``name`` (nothing when it is gone already, or
        when the store collects it on its own)."""

    @abstractmethod
    def unstage_all(self, prefix: str) -> int:
        """Delete everything staged under names starting with ``prefix`` (a restarted broker's leftovers)."""


class TailHints(ABC):
    """A store whose followers find a writer's new data faster when told how far it got: the
    owner names its position in each high-watermark answer (a few bytes), and a follower's
    broker hands it to its own store, which then reads the new objects without listing them."""

    @abstractmethod
    def position(self) -> str | None:
        """How far this broker's writes are stored, for another broker's :meth:`heard`; None: nowhere yet."""

    @abstractmethod
    def heard(self, position: str) -> None:
        """What another broker's :meth:`position` said (before the high watermark it came with is used)."""


class Housekeeping(ABC):
    """A store that packs many ledgers into shared objects: what a deleted ledger held is freed
    later, in the background, and sealed ledgers are rewritten into a faster layout."""

    @abstractmethod
    async def collect_garbage(self, live_ledgers: Callable[[], Awaitable[set[int]]]) -> int:
        """Delete stored data no live ledger needs any more; return how many objects went.

        ``live_ledgers`` reads the ids every managed ledger's chain still lists.
        """

    @abstractmethod
    async def compact_round(self) -> int:
        """Rewrite a bounded amount of stored data into a layout that reads faster; return how
        many ledgers were done."""


class Instrumented(ABC):
    """A store that reports what it does (an object store's requests, say) to Prometheus."""

    @abstractmethod
    def collectors(self) -> list:
        """Prometheus collectors to register beside the broker's own."""
