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
from .record import Record
from .record_batch import MAGIC_OFFSET, ZSTD, InvalidBatch, assigned_prefix, read_header

_NO_PRODUCER = (-1, -1, -1)


def magic_of(data) -> int:
    return data[MAGIC_OFFSET] if len(data) > MAGIC_OFFSET else -1


def batches(data) -> Iterator[tuple[int, list[Record]]]:
    """``(codec, records)`` per stored batch (magic-2 batches or legacy sets), absolute offsets."""
    view = memoryview(data)
    pos = 0
    while pos < len(view):
        if magic_of(view[pos:]) != 2:
            yield from message_set.read_stored(view[pos:])
            return
        header = read_header(view, pos)
        end = pos + header.size
        if end > len(view):
            raise InvalidBatch(ErrorCode.CORRUPT_MESSAGE, f"stored batch at byte {pos} is truncated")
        yield header.compression, [Record(r.offset, r.timestamp, r.key, r.value, tuple(r.headers))
                                   for r in DefaultRecordBatch(view[pos:end])]
        pos = end


def read(data) -> Iterator[Record]:
    for _codec, records in batches(data):
        yield from records


def down_convert(data, magic: int) -> bytes:
    """Stored bytes rewritten at ``magic`` (< 2) for fetchers too old for what is stored.

    Each batch keeps its codec, as Kafka's down-conversion does; zstd cannot be
    expressed below magic 2, so such data is refused (UNSUPPORTED_COMPRESSION_TYPE).
    """
    out = bytearray()
    for codec, records in batches(data):
        if codec == ZSTD:
            raise InvalidBatch(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, "zstd data cannot be served below magic 2")
        out += message_set.write(records, magic, codec)
    return bytes(out)


def write(records: Iterable[Record], magic: int, codec: int, producer: tuple = _NO_PRODUCER,
          leader_epoch: int = -1) -> bytes:
    """``records`` (absolute, contiguous offsets) as one batch at ``magic``, compressed with ``codec``.

    ``producer`` is ``(producer_id, producer_epoch, base_sequence)`` and
    ``leader_epoch`` the partitionLeaderEpoch, for magic 2.
    """
    if magic < 2:
        return bytes(message_set.write(records, magic, codec))
    records = list(records)
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False,
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
