"""Magic-2 record batches built by kafka-python's own builder, as real producers send them."""
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
BASE_TIMESTAMP = 1_700_000_000_000


def build_batch(values=(b"value",), codec: str = "none", producer_id: int = -1, producer_epoch: int = -1,
                base_sequence: int = -1, timestamps=None) -> bytes:
    """One batch holding a record per value (key ``k<i>``); timestamps default to 1 ms apart."""
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=CODECS[codec], is_transactional=False, producer_id=producer_id,
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
