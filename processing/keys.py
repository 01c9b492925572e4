"""Records with one key are handled one after another; records of different keys at once.

Each key with records in memory has a FIFO queue; only its head may run. Keys are
the user's (from the key function), shared by every partition, so a key that appears in
two partitions is still handled in the order the records were taken. ``None`` is no
key: such records carry no ordering constraint and run as soon as there is room.
"""
from collections import deque
from collections.abc import Hashable
from typing import Any


class KeyQueues:
    __slots__ = ("_queues",)

    def __init__(self) -> None:
        self._queues: dict[Hashable, deque] = {}

    def add(self, key: Hashable, item: Any) -> bool:
        """Queue ``item``; True when it is the head of its key, free to run now."""
        if key is None:
            return True
        queue = self._queues.get(key)
        if queue is None:
            self._queues[key] = deque((item,))
            return True
        queue.append(item)
        return False

    def finish(self, key: Hashable, item: Any) -> Any:
        """``item`` (the head of its key) is done: the next of its key, now free to run, or None."""
        if key is None:
            return None
        queue = self._queues[key]
        if queue[0] is not item:
            raise ValueError(f"finished {item!r} is not the head of key {key!r}")
        queue.popleft()
        if queue:
            return queue[0]
        del self._queues[key]
        return None

    def remove(self, key: Hashable, item: Any) -> Any:
        """Forget ``item`` wherever it is in its key's queue (its partition was revoked); returns
        the next of its key when ``item`` was the head, now free to run, else None."""
        if key is None:
            return None
        queue = self._queues.get(key)
        if queue is None or item not in queue:
            return None
        if queue[0] is item:
            return self.finish(key, item)
        queue.remove(item)
        return None

    def __len__(self) -> int:
        return len(self._queues)
