"""Records one at a time, for the paths that must look inside batches.

The hot path never does (DESIGN rule 2). Converting between magics does: legacy
produce up-converted by ``mixed_kafka``, entries rebuilt by ``pulsar``, and fetches
by clients too old to read what is stored. All of them meet at :class:`Record`, read
from stored bytes of any magic and written at any magic.
"""
from collections.abc import Iterable, Iterator

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from . import message_set
from .error_codes import ErrorCode
from .inflate import DEFAULT_LIMIT, inflate_all
from .record import Record
from .record_batch import COMPRESSION_MASK, HEADER_SIZE, MAGIC_OFFSET, ZSTD, InvalidBatch, assigned_prefix, read_header

_NO_PRODUCER = (-1, -1, -1)


def magic_of(data) -> int:
    return data[MAGIC_OFFSET] if len(data) > MAGIC_OFFSET else -1


# The codec bits of a magic-2 batch's attributes, in the low byte of the field.
_ATTRIBUTES_LOW = 22


def batches(data, inflate_limit: int = DEFAULT_LIMIT) -> Iterator[tuple[int, list[Record]]]:
    """``(codec, records)`` per stored batch (magic-2 batches or legacy sets), absolute offsets.

    Compressed batches are inflated under ``inflate_limit`` (see :mod:`.inflate`) and
    read as the same batch uncompressed: kafka-python's reader would inflate without one.
    Control batches (transaction markers) hold no records a reader sees, so they are skipped.
    """
    view = memoryview(data)
    pos = 0
    while pos < len(view):
        if magic_of(view[pos:]) != 2:
            yield from message_set.read_stored(view[pos:], inflate_limit)
            return
        header = read_header(view, pos)
        end = pos + header.size
        if end > len(view):
            raise InvalidBatch(ErrorCode.CORRUPT_MESSAGE, f"stored batch at byte {pos} is truncated")
        batch = view[pos:end]
        if header.is_control:
            pos = end
            continue
        if header.compression:
            head = bytearray(batch[:HEADER_SIZE])
            head[_ATTRIBUTES_LOW] &= ~COMPRESSION_MASK
            batch = memoryview(head + inflate_all(header.compression, batch[HEADER_SIZE:], inflate_limit))
        yield header.compression, [Record(r.offset, r.timestamp, r.key, r.value, tuple(r.headers))
                                   for r in DefaultRecordBatch(batch)]
        pos = end


def read(data, inflate_limit: int = DEFAULT_LIMIT) -> Iterator[Record]:
    for _codec, records in batches(data, inflate_limit):
        yield from records


def down_convert(data, magic: int, inflate_limit: int = DEFAULT_LIMIT) -> bytes:
    """Stored bytes rewritten at ``magic`` (< 2) for fetchers too old for what is stored.

    Each batch keeps its codec, as Kafka's down-conversion does; zstd cannot be
    expressed below magic 2, so such data is refused (UNSUPPORTED_COMPRESSION_TYPE).
    """
    out = bytearray()
    for codec, records in batches(data, inflate_limit):
        if codec == ZSTD:
            raise InvalidBatch(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, "zstd data cannot be served below magic 2")
        out += message_set.write(records, magic, codec)
    return bytes(out)


def write(records: Iterable[Record], magic: int, codec: int, producer: tuple = _NO_PRODUCER,
          leader_epoch: int = -1, transactional: bool = False) -> bytes:
    """``records`` (absolute, contiguous offsets) as one batch at ``magic``, compressed with ``codec``.

    ``producer`` is ``(producer_id, producer_epoch, base_sequence)``, ``leader_epoch``
    the partitionLeaderEpoch and ``transactional`` the batch's transactional bit, for magic 2.
    """
    if magic < 2:
        return bytes(message_set.write(records, magic, codec))
    records = list(records)
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=transactional,
                                        producer_id=producer[0], producer_epoch=producer[1],
                                        base_sequence=producer[2], batch_size=2**31 - 1)
    base = records[0].offset
    for record in records:
        builder.append(record.offset - base, timestamp=record.timestamp, key=record.key, value=record.value,
                       headers=list(record.headers))
    batch = builder.build()
    prefix = assigned_prefix(read_header(batch), base, leader_epoch)
    batch[:len(prefix)] = prefix
    return bytes(batch)
