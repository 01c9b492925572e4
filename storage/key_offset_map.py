"""The log cleaner's map from key to the offset of its latest record, in fixed memory.

Shaped as Kafka's cleaner map: keys are not kept, only a 16-byte hash of each (here
xxh3-128) and an 8-byte offset per slot, in open addressing with linear probing, so
``log.cleaner.dedupe.buffer.size`` bytes hold that many / 24 slots whatever the keys'
sizes, and the map is full at 90% of them (Kafka's load factor). Two keys whose
128-bit hashes collide would count as one, the same trade Kafka makes with MD5.
"""
from array import array

import xxhash

SLOT_BYTES = 24
LOAD_FACTOR = 0.9
_LOW = (1 << 64) - 1


class KeyOffsetMap:
    def __init__(self, memory_bytes: int, expected_keys: int | None = None):
        """At most ``memory_bytes``; no more slots than ``expected_keys`` need (when known)."""
        slots = 1
        while slots * 2 * SLOT_BYTES <= memory_bytes:
            slots *= 2
        if expected_keys is not None:
            slots = min(slots, max(1024, _power_of_two_above(expected_keys / LOAD_FACTOR)))
        self._mask = slots - 1
        self.capacity = int(slots * LOAD_FACTOR)
        self.size = 0
        self._high = array("Q", bytes(8 * slots))
        self._low = array("Q", bytes(8 * slots))
        self._offsets = array("q", [-1]) * slots

    @property
    def memory_bytes(self) -> int:
        return (self._mask + 1) * SLOT_BYTES

    def room_for(self, keys: int) -> bool:
        return self.size + keys <= self.capacity

    def put(self, key: bytes, offset: int) -> None:
        """Record ``offset`` as ``key``'s latest; callers check :meth:`room_for` first."""
        slot, high, low = self._slot(key)
        if self._offsets[slot] < 0:
            if self.size >= self.capacity:
                raise OverflowError("key offset map is full")
            self._high[slot], self._low[slot] = high, low
            self.size += 1
        self._offsets[slot] = offset

    def get(self, key: bytes) -> int:
        """The latest offset recorded for ``key``, or -1."""
        return self._offsets[self._slot(key)[0]]

    def _slot(self, key: bytes) -> tuple[int, int, int]:
        """The slot holding ``key``'s hash, or the empty one where it goes; and the hash's two halves."""
        digest = xxhash.xxh3_128_intdigest(key)
        high, low = digest >> 64, digest & _LOW
        slot = low & self._mask
        offsets, lows, highs = self._offsets, self._low, self._high
        while offsets[slot] >= 0 and (lows[slot] != low or highs[slot] != high):
            slot = (slot + 1) & self._mask
        return slot, high, low


def _power_of_two_above(value: float) -> int:
    power = 1
    while power < value:
        power *= 2
    return power
