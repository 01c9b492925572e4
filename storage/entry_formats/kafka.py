"""The ``kafka`` entry format: the produced bytes, unchanged but for offsets.

The fast path: a magic-2 batch is stored as sent (any codec) after its baseOffset
and partitionLeaderEpoch are set, and served to magic-2 readers byte for byte. A
legacy message set is stored at its own magic with offsets assigned as Kafka assigns
them; only readers too old for what is stored pay for a conversion.
"""
from kgate.protocol import conversion, message_set
from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.inflate import DEFAULT_LIMIT
from kgate.protocol.record_batch import COMPRESSION_MASK, LOG_OVERHEAD, ZSTD, assigned_prefix

from . import EntryFormat, EntryUnreadable, ProducedRecords, register

_PREFIX_SIZE = LOG_OVERHEAD + 4
# The low byte of a magic-2 batch's attributes, which holds the codec.
_ATTRIBUTES_LOW = 22


class KafkaFormat(EntryFormat):
    name = "kafka"
    code = 0

    def stored_magic(self, produced: ProducedRecords) -> int:
        return produced.magic if produced.message_set is None else produced.message_set.stored_magic

    def encode(self, produced: ProducedRecords, base_offset: int, leader_epoch: int, codec: int | None) -> list:
        if produced.batch is not None:
            return [assigned_prefix(produced.batch, base_offset, leader_epoch), produced.data[_PREFIX_SIZE:]]
        assert produced.message_set is not None  # of_batch or of_message_set set one of the two
        return [message_set.assign_offsets(produced.data, produced.message_set, base_offset)]

    def decode(self, payload: memoryview, max_magic: int, zstd: bool, inflate_limit: int = DEFAULT_LIMIT):
        return serve_stored(payload, max_magic, zstd, inflate_limit)


def serve_stored(payload, max_magic: int, zstd: bool, inflate_limit: int):
    """Stored Kafka record bytes as a reader may receive them: as they are when it can."""
    magic = conversion.magic_of(payload)
    if magic == 2 and payload[_ATTRIBUTES_LOW] & COMPRESSION_MASK == ZSTD and not (zstd and max_magic == 2):
        raise EntryUnreadable(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, "zstd data for a fetch older than v10")
    if magic <= max_magic:
        return payload
    return conversion.down_convert(payload, max_magic, inflate_limit)


register(KafkaFormat())
