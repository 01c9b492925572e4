"""Fetched bytes held in answers not yet sent, bounded per connection and broker-wide.

A fetch reads record bytes into memory and they stay there until the client has read
them off its socket. A consumer that stops reading, or many consumers at once, would
otherwise make the broker hold as much as they ask for (50 MiB per fetch by default,
and a client may pipeline fetches). Kafka avoids this by serving one request per
connection at a time and sending from the file; kgate pipelines requests, so it
counts instead: a fetch reads no more than the room left in its connection's share
and in the broker's total, waits (within its ``max_wait_ms``) when there is none, and
the connection gives the bytes back once its socket has taken them.

The broker-wide total is shared by a rule that leaves room for others: a connection
may hold at most a quarter of what the other connections leave free (and at most its
per-connection cap). A connection alone still gets its whole cap at the defaults (64
of 256 MiB); each connection that stops reading holds at most a quarter of what was
free when it took, so N of them leave at least ``(3/4)**N`` of the budget to the
rest (ten stalled consumers at the defaults leave 14 MiB, from which a reading
consumer may take a quarter per fetch, and at least one batch). Before, first come
first served, ``limit / per_connection`` stalled consumers (four at the defaults)
filled the budget and every other consumer got empty fetches for as long as they
stayed. Many more stalled connections than that are bounded by ``max.connections``
and ``max.connections.per.ip``.
"""
import asyncio

from .handlers.waiters import wait_woken, wake

# A connection may hold at most 1/SHARE_OF_FREE of what the others leave free.
SHARE_OF_FREE = 4


class ResponseBytesBudget:
    """The broker-wide total; each connection holds a :class:`HeldResponses` share of it."""

    def __init__(self, limit: int, per_connection: int):
        self.limit = limit
        self.per_connection = per_connection
        self.total = 0
        self._waiting: set[asyncio.Future] = set()  # fetches waiting for room, woken by any give-back

    def connection(self) -> "HeldResponses":
        return HeldResponses(self)

    def release(self, size: int) -> None:
        self.total -= size
        if size:
            for waiter in self._waiting:
                wake(waiter)

    async def freed(self, timeout: float) -> None:
        """Return when any connection gives bytes back, or after ``timeout`` seconds."""
        waiter = asyncio.get_running_loop().create_future()
        self._waiting.add(waiter)
        try:
            await wait_woken(waiter, timeout)
        finally:
            self._waiting.discard(waiter)


class HeldResponses:
    """One connection's share: bytes taken by its fetches and not yet on the socket."""

    __slots__ = ("_budget", "held", "_closed")

    def __init__(self, budget: ResponseBytesBudget):
        self._budget = budget
        self.held = 0
        self._closed = False

    def room(self) -> int:
        """How many more bytes this connection may take now (never negative)."""
        budget = self._budget
        left_by_others = budget.limit - (budget.total - self.held)
        return max(0, min(budget.per_connection, left_by_others // SHARE_OF_FREE) - self.held)

    async def wait_for_room(self, timeout: float) -> bool:
        """Whether there is room, waiting up to ``timeout`` seconds for bytes to be given back."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self.room() <= 0:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            await self._budget.freed(remaining)
        return True

    def take(self, size: int) -> None:
        """Count ``size`` fetched bytes (nothing once the connection is gone: no one would give them back)."""
        if not self._closed:
            self.held += size
            self._budget.total += size

    def give(self, size: int) -> None:
        if not self._closed:
            self.held -= size
            self._budget.release(size)

    def close(self) -> None:
        """The connection is gone: everything it held goes back at once."""
        self._closed = True
        self._budget.release(self.held)
        self.held = 0
