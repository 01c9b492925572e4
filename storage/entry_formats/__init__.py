"""Entry formats: how produced records become a stored entry, and back.

Each format is one module registering one :class:`EntryFormat`; the format's code is
written into every entry header, so reads pick the right decoder per entry even when
a partition holds several formats after a topic's ``kgate.entry.format`` changed.
A fourth format is one new module imported at the bottom of this file.

Reads that cannot be served raise :class:`EntryUnreadable` with the Kafka error the
fetch answers for that partition: ``KAFKA_STORAGE_ERROR`` for an entry that is
corrupt or of an unknown format (logged; the partition's other entries and every
other partition are unaffected), ``UNSUPPORTED_COMPRESSION_TYPE`` for zstd data asked
for by a fetch older than v10.
"""
import logging
from abc import ABC, abstractmethod
from dataclasses import dataclass, replace

from kgate.protocol import conversion, log_append_time
from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.errors import KafkaError
from kgate.protocol.inflate import DEFAULT_LIMIT
from kgate.protocol.message_set import MessageSet
from kgate.protocol.record import Record
from kgate.protocol.record_batch import BatchHeader, InvalidBatch

log = logging.getLogger(__name__)

# A produced batch was inflated under the broker's limit when its records were walked.
_WALKED_ALREADY = 2**63 - 1


@dataclass(frozen=True, slots=True)
class ProducedRecords:
    """A validated record set from a produce request, still in the request's buffer.

    Exactly one of ``batch`` (magic 2: one batch, header validated, records untouched)
    and ``message_set`` (magic 0/1: parsed, every CRC checked) is set.
    """

    data: memoryview
    magic: int
    record_count: int
    max_timestamp: int
    codec: int
    batch: BatchHeader | None = None
    message_set: MessageSet | None = None
    # Indexes of a batch's records with a null key, when its walk looked for them.
    batch_null_keys: list[int] | None = None
    # The broker's time the records were stamped with (a LogAppendTime topic), else None.
    log_append_time: int | None = None

    @classmethod
    def of_batch(cls, data: memoryview, header: BatchHeader, null_keys: list[int] | None = None) -> "ProducedRecords":
        return cls(data, 2, header.record_count, header.max_timestamp, header.compression, batch=header,
                   batch_null_keys=null_keys)

    @classmethod
    def of_message_set(cls, data: memoryview, parsed: MessageSet) -> "ProducedRecords":
        codecs = {entry.message.codec for entry in parsed.shallow} - {0}
        return cls(data, parsed.magic, parsed.record_count, parsed.max_timestamp, max(codecs, default=0),
                   message_set=parsed)

    def stamped(self, now_ms: int) -> "ProducedRecords":
        """These records as a LogAppendTime topic stores them: dated ``now_ms`` by the broker."""
        if self.batch is not None:
            data, header = log_append_time.stamp_batch(self.data, self.batch, now_ms)
            return replace(self, data=memoryview(data), max_timestamp=now_ms, batch=header, log_append_time=now_ms)
        assert self.message_set is not None  # of_batch or of_message_set set one of the two
        data = log_append_time.stamp_message_set(self.data, self.message_set, now_ms)
        return replace(self, data=memoryview(data), max_timestamp=self.message_set.max_timestamp,
                       log_append_time=now_ms)

    def null_keys(self) -> list[int]:
        """Indexes (in the set as sent) of the records with no key; per-record work for legacy sets."""
        if self.message_set is not None:
            return [i for i, (_, message) in enumerate(self.message_set.messages()) if message.key is None]
        assert self.batch_null_keys is not None, "the batch was walked without looking for keys"
        return self.batch_null_keys

    @property
    def producer(self) -> tuple[int, int, int]:
        """``(producer_id, producer_epoch, base_sequence)``; -1s for non-idempotent producers."""
        if self.batch is None:
            return -1, -1, -1
        return self.batch.producer_id, self.batch.producer_epoch, self.batch.base_sequence

    def records(self) -> list[Record]:
        """Every record, offsets relative to the first (0..n-1). Per-record work.

        A magic-2 batch's records were walked when it was validated, so they inflate
        within the limit; what kafka-python's reader still refuses (a header key that
        is not UTF-8) is INVALID_RECORD, never an error that escapes the produce.
        """
        if self.message_set is not None:
            return [Record(i, m.timestamp, m.key, m.value, ())
                    for i, (_, m) in enumerate(self.message_set.messages())]
        assert self.batch is not None  # of_batch or of_message_set set one of the two
        base = self.batch.base_offset
        try:
            return [record._replace(offset=record.offset - base)
                    for record in conversion.read(self.data, _WALKED_ALREADY)]
        except KafkaError:
            raise
        except Exception as exc:  # kafka-python's reader raises what its parsing meets
            raise InvalidBatch(ErrorCode.INVALID_RECORD, f"records cannot be read: {exc!r}") from None


class EntryUnreadable(KafkaError):
    """An entry a fetch cannot return, with the code to answer (KAFKA_STORAGE_ERROR, ...)."""


class EntryFormat(ABC):
    name: str
    code: int
    # True when the payload is the magic-2 batch as produced (offsets assigned), so
    # producer state can be rebuilt from stored entries without decoding them.
    stores_batches: bool = True

    def stored_magic(self, produced: ProducedRecords) -> int:
        """The magic recorded in the entry header: what a reader gets without conversion."""
        return 2

    @abstractmethod
    def encode(self, produced: ProducedRecords, base_offset: int, leader_epoch: int, codec: int | None) -> list:
        """The entry payload, as buffers, with offsets from ``base_offset``.

        ``codec`` is the topic's ``compression.type`` as a codec id, or None for
        ``producer`` (keep what the client sent); formats that store bytes as produced
        ignore it.
        """

    @abstractmethod
    def decode(self, payload: memoryview, max_magic: int, zstd: bool, inflate_limit: int = DEFAULT_LIMIT):
        """Record-set bytes for a fetch that reads at most ``max_magic`` (and zstd if ``zstd``).

        A conversion inflates each compressed batch to ``inflate_limit`` bytes at most.
        """


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


def names() -> list[str]:
    return sorted(_BY_NAME)


def decode_entry(stored, max_magic: int = 2, zstd: bool = True, inflate_limit: int = DEFAULT_LIMIT):
    """The record-set bytes of a stored entry for a reader, or EntryUnreadable.

    Any failure inside a decoder (a corrupt payload can make codec and parsing
    libraries raise anything) becomes KAFKA_STORAGE_ERROR for that read alone.
    """
    entry_format = _BY_CODE.get(stored.header.format_code)
    if entry_format is None:
        log.error("entry at offset %d has unknown format code %d", stored.header.base_offset,
                  stored.header.format_code)
        raise EntryUnreadable(ErrorCode.KAFKA_STORAGE_ERROR, f"unknown entry format code {stored.header.format_code}")
    try:
        return entry_format.decode(stored.payload, max_magic, zstd, inflate_limit)
    except EntryUnreadable:
        raise
    except Exception as exc:
        log.error("%s entry at offset %d is unreadable: %r", entry_format.name, stored.header.base_offset, exc)
        raise EntryUnreadable(ErrorCode.KAFKA_STORAGE_ERROR, f"corrupt {entry_format.name} entry: {exc}") from None


def stores_batches(format_code: int) -> bool:
    entry_format = _BY_CODE.get(format_code)
    return entry_format is not None and entry_format.stores_batches


from . import kafka, mixed_kafka, pulsar  # noqa: E402,F401  (each registers itself)
