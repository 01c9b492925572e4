"""Request frames as clients put them on the wire: via kafka-python, or by hand."""
import struct

from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.producer import ProduceRequest


def uvarint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def tagged_fields(fields: dict[int, bytes]) -> bytes:
    """A tagged-field section: count, then (tag, size, data) per field."""
    return uvarint(len(fields)) + b"".join(uvarint(tag) + uvarint(len(data)) + data for tag, data in fields.items())


def request_header(api_key: int, version: int, correlation_id: int, client_id: str | None,
                   tags: dict[int, bytes] | None = None) -> bytes:
    """Header v1, or v2 when ``tags`` is given (client_id stays a non-compact string in both)."""
    head = struct.pack(">hhi", api_key, version, correlation_id)
    if client_id is None:
        head += struct.pack(">h", -1)
    else:
        raw = client_id.encode()
        head += struct.pack(">h", len(raw)) + raw
    return head if tags is None else head + tagged_fields(tags)


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def metadata_request(version: int = 1, topics=("t",)):
    return MetadataRequest(version=version, topics=[MetadataRequest.MetadataRequestTopic(name=t) for t in topics])


def produce_request(topic: str, partition: int, batch: bytes, version: int = 9, acks: int = -1):
    data = ProduceRequest.TopicProduceData
    return ProduceRequest(version=version, transactional_id=None, acks=acks, timeout_ms=10_000, topic_data=[
        data(name=topic, partition_data=[data.PartitionProduceData(index=partition, records=batch)])])
