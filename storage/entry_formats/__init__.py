"""Entry formats: how a produced batch becomes a stored entry, and back.

Each format is one module registering one :class:`EntryFormat`; the format's code is
written into every entry header, so reads pick the right decoder per entry even when
a partition holds several formats.
"""
from abc import ABC, abstractmethod
from dataclasses import dataclass

from protocol.record_batch import BatchHeader


@dataclass(frozen=True, slots=True)
class ProducedBatch:
    """A validated batch from a produce request, still in the request's buffer."""

    data: memoryview
    header: BatchHeader


class EntryFormat(ABC):
    name: str
    code: int
    # True when the payload starts with the magic-2 batch header as produced, so
    # producer state can be rebuilt from stored entries without decoding them.
    stores_batches: bool = True

    @abstractmethod
    def encode(self, batch: ProducedBatch, base_offset: int, leader_epoch: int) -> list:
        """The entry payload for ``batch`` with offsets from ``base_offset``, as buffers."""

    @abstractmethod
    def decode(self, payload: memoryview, max_magic: int):
        """Record-set bytes a fetch at ``max_magic`` may return for this entry."""


class UnknownEntryFormat(LookupError):
    pass


_BY_NAME: dict[str, EntryFormat] = {}
_BY_CODE: dict[int, EntryFormat] = {}


def register(entry_format: EntryFormat) -> EntryFormat:
    _BY_NAME[entry_format.name] = entry_format
    _BY_CODE[entry_format.code] = entry_format
    return entry_format


def by_name(name: str) -> EntryFormat:
    try:
        return _BY_NAME[name]
    except KeyError:
        raise UnknownEntryFormat(f"unknown entry format {name!r}; known: {', '.join(sorted(_BY_NAME))}") from None


def by_code(code: int) -> EntryFormat:
    try:
        return _BY_CODE[code]
    except KeyError:
        raise UnknownEntryFormat(f"unknown entry format code {code}") from None


def names() -> list[str]:
    return sorted(_BY_NAME)


from . import kafka  # noqa: E402,F401  (registers itself)
