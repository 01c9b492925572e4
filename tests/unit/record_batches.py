"""Magic-2 record batches built by kafka-python's own builder, as real producers send them."""
import struct

from crc32c import crc32c
from kafka import codec as codecs
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from kgate.protocol.answer_writer import uvarint

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
BASE_TIMESTAMP = 1_700_000_000_000


def build_batch(values=(b"value",), codec: str = "none", producer_id: int = -1, producer_epoch: int = -1,
                base_sequence: int = -1, timestamps=None, transactional: bool = False) -> bytes:
    """One batch holding a record per value (key ``k<i>``); timestamps default to 1 ms apart."""
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=CODECS[codec], is_transactional=transactional, producer_id=producer_id,
        producer_epoch=producer_epoch, base_sequence=base_sequence, batch_size=1 << 20)
    for i, value in enumerate(values):
        timestamp = timestamps[i] if timestamps else BASE_TIMESTAMP + i
        builder.append(i, timestamp=timestamp, key=b"k%d" % i, value=value, headers=[])
    return bytes(builder.build())


def compressible_values(count: int = 5) -> list[bytes]:
    """Values every codec shrinks (kafka-python sends a batch uncompressed when it would not)."""
    return [b"kgate record %d " % i * 40 for i in range(count)]


def read_batch(data: bytes) -> tuple[DefaultRecordBatch, list]:
    """kafka-python's reader over ``data``: the batch (CRC checked) and its records."""
    batch = DefaultRecordBatch(data)
    assert batch.validate_crc(), "kafka-python finds the batch CRC invalid"
    return batch, list(batch)


def zigzag(value: int) -> bytes:
    """A Kafka varint (zigzag, then 7 bits a byte), as records encode their fields."""
    return uvarint((value << 1) ^ (value >> 63))


def raw_record(offset_delta: int, value: bytes | None, key: bytes | None = None) -> bytes:
    """One magic-2 record's bytes, length first, timestamp delta 0, no headers."""
    def field(data):
        return zigzag(-1) if data is None else zigzag(len(data)) + data
    body = b"\0" + zigzag(0) + zigzag(offset_delta) + field(key) + field(value) + zigzag(0)
    return zigzag(len(body)) + body


def raw_batch(records: bytes, record_count: int, codec: str = "none", compressed: bytes | None = None) -> bytes:
    """A batch with a valid CRC around ``records`` (inflated record bytes, trusted as given)
    whose header claims ``record_count`` records; ``compressed`` replaces the codec's own
    compression of ``records`` (for data too large to hold inflated)."""
    payload = compressed if compressed is not None else compress(CODECS[codec], records)
    rest = struct.pack(">hiqqqhii", CODECS[codec], record_count - 1, BASE_TIMESTAMP, BASE_TIMESTAMP,
                       -1, -1, -1, record_count) + payload
    crc = crc32c(rest)
    return struct.pack(">qiib", 0, len(rest) + 9, -1, 2) + struct.pack(">I", crc) + rest


def compress(codec: int, data: bytes) -> bytes:
    if codec == 0:
        return data
    return {1: codecs.gzip_encode, 2: codecs.snappy_encode, 3: codecs.lz4_encode, 4: codecs.zstd_encode}[codec](data)
