"""The small header every stored entry starts with (DESIGN rule 3).

It lets an offset be mapped to an entry, and a timestamp to an offset, from entry
headers alone, like Pulsar's BrokerEntryMetadata index, and records which entry
format wrote the payload so a partition can hold a mix after a format change.
"""
import struct
from typing import NamedTuple

_HEADER = struct.Struct(">qiqbb")
SIZE = _HEADER.size


class EntryHeader(NamedTuple):
    """A named tuple: one is made per entry appended and per entry read, so construction
    cost counts (a frozen dataclass's was over twice a tuple's)."""

    base_offset: int
    record_count: int
    max_timestamp: int
    magic: int
    format_code: int

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.record_count - 1

    def pack(self) -> bytes:
        return _HEADER.pack(*self)

    @classmethod
    def unpack(cls, data) -> "EntryHeader":
        return cls._make(_HEADER.unpack_from(data, 0))
