"""Magic-2 record batch headers, read and validated without touching the records.

This is the produce hot path (DESIGN rule 2): a batch is checked (length, magic,
CRC32C, offset range), given its offsets by rewriting baseOffset in place, and
stored as the bytes the client sent. Only the 61-byte header is parsed.
"""
import struct
from typing import NamedTuple

from crc32c import crc32c

from .error_codes import ErrorCode
from .errors import KafkaError

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
# baseOffset and batchLength come before the CRC'd region and partitionLeaderEpoch:
# the broker owns baseOffset and partitionLeaderEpoch, so it may rewrite them.
LOG_OVERHEAD = 12
_PREFIX = struct.Struct(">qii")
CRC_START = 21
MAGIC_OFFSET = 16

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_FLAG = 0x08
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20

CODEC_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
ZSTD = 4


class InvalidBatch(KafkaError):
    """A batch that must be refused, with the code to answer (CORRUPT_MESSAGE, INVALID_RECORD, ...)."""


class BatchHeader(NamedTuple):
    """The 61-byte header, field by field. A named tuple: one is made per produced batch,
    and building a frozen dataclass of 13 fields cost five times as much."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        return LOG_OVERHEAD + self.batch_length

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence < 0:
            return -1
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta


def read_header(data, pos: int = 0) -> BatchHeader:
    """Read the header at ``pos``; no validation beyond there being 61 bytes."""
    if len(data) - pos < HEADER_SIZE:
        raise InvalidBatch(ErrorCode.CORRUPT_MESSAGE, f"record batch header truncated at {len(data) - pos} bytes")
    return BatchHeader(*HEADER.unpack_from(data, pos))


def validate(data, pos: int = 0) -> BatchHeader:
    """Validate the magic-2 batch at ``pos`` as Kafka's log validator does for a produce."""
    header = read_header(data, pos)
    if header.magic != 2:
        raise InvalidBatch(ErrorCode.CORRUPT_MESSAGE, f"expected magic 2, found {header.magic}")
    end = pos + header.size
    if header.batch_length < HEADER_SIZE - LOG_OVERHEAD or end > len(data):
        raise InvalidBatch(ErrorCode.CORRUPT_MESSAGE,
                           f"batch length {header.batch_length} does not fit the {len(data) - pos} bytes sent")
    actual = crc32c(memoryview(data)[pos + CRC_START:end])
    if actual != header.crc:
        raise InvalidBatch(ErrorCode.CORRUPT_MESSAGE,
                           f"batch CRC {header.crc:#010x} does not match computed {actual:#010x}")
    if header.compression not in CODEC_NAMES:
        raise InvalidBatch(ErrorCode.CORRUPT_MESSAGE, f"unknown compression codec id {header.compression}")
    if header.record_count <= 0 or header.last_offset_delta != header.record_count - 1:
        raise InvalidBatch(ErrorCode.INVALID_RECORD, f"batch claims {header.record_count} records "
                                                     f"with last offset delta {header.last_offset_delta}")
    return header


def assigned_prefix(header: BatchHeader, base_offset: int, leader_epoch: int) -> bytes:
    """The first 16 bytes of the stored batch: our baseOffset and partitionLeaderEpoch.

    Neither is covered by the CRC, so the client's CRC stays valid and the rest of the
    batch can be written from the request buffer without a copy.
    """
    return _PREFIX.pack(base_offset, header.batch_length, leader_epoch)


def iter_headers(data):
    """Yield the header of every whole batch in ``data`` (stored batches, already valid)."""
    pos = 0
    end = len(data)
    while end - pos >= HEADER_SIZE:
        header = read_header(data, pos)
        if pos + header.size > end:
            return
        yield pos, header
        pos += header.size
