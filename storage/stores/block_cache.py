"""Bounded caches of ledger bytes read from or written to objects.

Two pools, so that a cold reader catching up cannot push out what tail readers need
(AutoMQ keeps the two paths apart the same way): ``recent`` holds what this broker just
wrote (the tail), ``reads`` what range GETs brought in. Each is an LRU bounded in bytes;
an item is one ledger's block of entries inside one object (a run, or part of a long one),
keyed by (object key, ledger id, where the block starts in the object).
"""
from collections import OrderedDict


class _Lru:
    def __init__(self, capacity: int):
        self.capacity = capacity
        self.size = 0
        self._items: OrderedDict[tuple[str, int, int], memoryview] = OrderedDict()

    def get(self, key: tuple[str, int, int]) -> memoryview | None:
        data = self._items.get(key)
        if data is not None:
            self._items.move_to_end(key)
        return data

    def __contains__(self, key: tuple[str, int, int]) -> bool:
        return key in self._items

    def put(self, key: tuple[str, int, int], data: memoryview) -> None:
        if len(data) > self.capacity:
            return
        old = self._items.pop(key, None)
        if old is not None:
            self.size -= len(old)
        self._items[key] = data
        self.size += len(data)
        while self.size > self.capacity:
            _key, evicted = self._items.popitem(last=False)
            self.size -= len(evicted)

    def drop_ledger(self, ledger_id: int) -> None:
        for key in [key for key in self._items if key[1] == ledger_id]:
            self.size -= len(self._items.pop(key))


class BlockCache:
    def __init__(self, capacity: int):
        self.recent = _Lru(capacity // 2)
        self.reads = _Lru(capacity - capacity // 2)
        self.hits = 0
        self.misses = 0

    def get(self, key: tuple[str, int, int]) -> memoryview | None:
        data = self.recent.get(key)
        if data is None:
            data = self.reads.get(key)
        if data is None:
            self.misses += 1
        else:
            self.hits += 1
        return data

    def holds(self, key: tuple[str, int, int]) -> bool:
        """Whether either pool has the block (read-ahead's question: no hit counted, no LRU move)."""
        return key in self.recent or key in self.reads

    def drop_ledger(self, ledger_id: int) -> None:
        self.recent.drop_ledger(ledger_id)
        self.reads.drop_ledger(ledger_id)
