"""Reading a ledger's blocks: from memory when held (storage.stores.block_cache), else one
range GET each, with the next blocks fetched ahead so a catch-up reader rarely waits.

Every read, hit or miss, keeps the next READ_AHEAD_BLOCKS blocks cached or on their way,
and on a miss they are asked for before this block's GET is awaited, so the GETs overlap.
Refreshing the window only on a miss made a sequential reader wait for a whole GET every
READ_AHEAD_BLOCKS + 1 blocks, one partition after another within a fetch. A block asked
for twice at once is fetched once.
"""
import asyncio
from collections.abc import Callable, Coroutine

from ..ledger import CorruptLedger
from .block_cache import BlockCache
from .block_index import BlockIndex
from .object_layout import MissingObject
from .single_flight import shared

READ_AHEAD_BLOCKS = 2
# GETs in flight at once, reads ahead and compaction's reads included.
MAX_INFLIGHT_GETS = 8

Spawn = Callable[[Coroutine], asyncio.Task]


class BlockReader:
    def __init__(self, client, cache: BlockCache, spawn: Spawn, gets: asyncio.Semaphore | None = None):
        self.client = client
        self.cache = cache
        self.gets = gets or asyncio.Semaphore(MAX_INFLIGHT_GETS)
        self._spawn = spawn
        self._fetching: dict[tuple[str, int, int], asyncio.Future] = {}

    async def block_bytes(self, ledger_id: int, index: BlockIndex, number: int) -> memoryview:
        """The bytes of block ``number`` of a ledger's ``index``: from memory, or one range GET."""
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
                self._spawn(self.fetch(ledger_id, following))
        if data is None:
            data = await self.fetch(ledger_id, location)
        return data

    async def fetch(self, ledger_id: int, location: tuple[str, int, int], cache: bool = True) -> memoryview:
        """One block by range GET (shared with a GET of it already on its way); ``cache``
        False for a reader that will not come back (compaction)."""
        key = (location[0], ledger_id, location[1])
        return await shared(self._fetching, key, lambda: self._get_range(ledger_id, location, cache))

    async def _get_range(self, ledger_id: int, location: tuple[str, int, int], cache: bool) -> memoryview:
        object_key, start, end = location
        async with self.gets:
            try:
                data = await self.client.get_range(object_key, start, end)
            except FileNotFoundError as exc:
                # Damage, unlike an unreachable store (whose errors pass through as they are).
                raise MissingObject(f"ledger {ledger_id}: object {object_key} is missing") from exc
        if len(data) != end - start:
            raise CorruptLedger(f"ledger {ledger_id}: object {object_key} is cut short")
        if cache:
            self.cache.reads.put((object_key, ledger_id, start), data)
        return data
