"""The small header every stored entry starts with (DESIGN rule 3).

It lets an offset be mapped to an entry, and a timestamp to an offset, from entry
headers alone, like Pulsar's BrokerEntryMetadata index, and records which entry
format wrote the payload so a partition can hold a mix after a format change.
"""
import struct
from dataclasses import dataclass

_HEADER = struct.Struct(">qiqbb")
SIZE = _HEADER.size


@dataclass(frozen=True, slots=True)
class EntryHeader:
    base_offset: int
    record_count: int
    max_timestamp: int
    magic: int
    format_code: int

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.record_count - 1

    def pack(self) -> bytes:
        return _HEADER.pack(self.base_offset, self.record_count, self.max_timestamp, self.magic, self.format_code)

    @classmethod
    def unpack(cls, data) -> "EntryHeader":
        return cls(*_HEADER.unpack_from(data, 0))
