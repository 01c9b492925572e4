"""A managed ledger read by a broker that does not own it: zone-local reads over shared storage.

Storage is shared, so a broker in a client's zone can serve that client's reads of a
partition owned in another zone without a byte of records crossing zones. It must
not disturb the owner (DESIGN rule 5: one writer): the ledgers are opened with
:meth:`LedgerStore.open_follower`, which never fences, recovers or writes, and the
chain record is only read. What is served is bounded by the owner's high watermark,
which the caller learns from the owner and hands to :meth:`catch_up`: entries past
it may be unconfirmed (the owner could crash and a recovery drop them), so they are
never indexed, observed or read.

The index is the managed ledger's own (offsets and timestamps per entry, from entry
headers), so reads go through :meth:`ManagedLedger.read` unchanged. The chain record
is read again when the owner's entries run past the ledgers known here (a rollover, a
new owner's ledger) or its log start moved (retention, DeleteRecords); ledgers that
left the chain (retention, compaction) are released once no read of them is under way.
"""
import asyncio
import json
import logging
from collections.abc import Callable

from . import entry
from .chain_record import ChainRecord
from .entry import EntryHeader
from .ledger import LedgerFenced, LedgerStore
from .managed_ledger import LedgerInfo, ManagedLedger, _Segment

log = logging.getLogger(__name__)


async def _no_ledger_ids() -> int:
    raise LedgerFenced("a followed ledger creates no ledgers")


class FollowedLedger(ManagedLedger):
    def __init__(self, name: str, store: LedgerStore, chain: ChainRecord):
        super().__init__(name, store, chain, _no_ledger_ids)
        self._observe: Callable[[EntryHeader, bytes], None] | None = None
        self._payload_head = 0
        # Entries below this offset were shown to ``observe`` (compaction's rewrites are not shown again).
        self._observed_end = 0
        self._catching_up = asyncio.Lock()  # one catch-up at a time: each indexes from where the last stopped

    async def open(self, observe: Callable[[EntryHeader, bytes], None] | None = None,
                   payload_head: int = 0) -> None:
        """Read the chain and open its ledgers read-only; nothing is indexed until :meth:`catch_up`."""
        self._observe, self._payload_head = observe, payload_head
        await self._reload()

    async def catch_up(self, high_watermark: int, log_start: int) -> None:
        """Index the owner's entries below ``high_watermark`` and serve up to there (never past it)."""
        async with self._catching_up:
            await self._catch_up(high_watermark, log_start)

    async def _catch_up(self, high_watermark: int, log_start: int) -> None:
        if log_start != self._log_start:
            await self._reload()
        # Served up to there already: nothing to look for (on object storage, a catch-up costs a LIST).
        if high_watermark != self._high_watermark:
            await self._index(high_watermark)
            if self._indexed_end() < high_watermark:
                await self._reload()
                await self._index(high_watermark)
        end = min(high_watermark, self._indexed_end())
        if end > self._high_watermark or end < self._high_watermark:
            # Down only when a new owner's recovery kept less than an earlier owner said (never
            # past what it acknowledged): what is served follows the owner either way.
            self._high_watermark = end
            waiters, self._append_waiters = self._append_waiters, set()
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)

    def _indexed_end(self) -> int:
        return self._segments[-1].next_offset if self._segments else self._log_start

    async def _reload(self) -> None:
        node = await self._chain.read()
        if node is None:
            return  # the owner has not written the chain yet: nothing to serve
        state = json.loads(node.data)
        self._version = node.version
        self._log_start = state["log_start"]
        known = {segment.info.ledger_id: segment for segment in self._segments}
        segments = []
        for info in (LedgerInfo(**fields) for fields in state["ledgers"]):
            segment = known.pop(info.ledger_id, None)
            if segment is None:
                segment = _Segment(info, await self._store.open_follower(info.ledger_id))
            else:
                segment.info = info
            segments.append(segment)
        self._segments = segments
        self._firsts = [segment.info.first_offset for segment in segments]
        for gone in known.values():
            self._retire(gone)

    async def _index(self, high_watermark: int) -> None:
        """Index every segment's new entries in order, stopping at the first that reaches ``high_watermark``."""
        for segment in self._segments:
            indexed = len(segment.last_offsets)
            if segment.info.closed and indexed > segment.info.last_entry:
                continue
            last = await segment.ledger.catch_up()
            if segment.info.closed:
                last = min(last, segment.info.last_entry)
            heads = await segment.ledger.read_heads(indexed, last, entry.SIZE + self._payload_head) \
                if last >= indexed else []
            for length, head in heads:
                header = EntryHeader.unpack(head)
                if header.last_offset >= high_watermark:
                    return
                segment.add(header, length - entry.SIZE)
                if self._observe is not None and header.last_offset >= max(self._log_start, self._observed_end):
                    self._observe(header, head[entry.SIZE:])
                self._observed_end = max(self._observed_end, header.last_offset + 1)
            if not segment.info.closed or len(segment.last_offsets) <= segment.info.last_entry:
                return  # the ledger being written (or not yet whole here): later ones hold nothing yet

    async def prepare_append(self) -> None:
        raise LedgerFenced(f"{self.name} is another broker's: read-only here")

    def _release(self, segment: _Segment) -> None:
        """Only this view goes: the ledger is the owner's to delete."""
        segment.ledger.release()

    async def close(self) -> None:
        self._closed = True
        for segment in self._segments:
            segment.ledger.release()
