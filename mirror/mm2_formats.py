"""MirrorMaker 2's internal topics and record formats, so MM2 tooling can read ours.

The records are Kafka protocol Structs (big-endian; a STRING is an int16 length and
UTF-8 bytes), as ``OffsetSync``, ``Checkpoint`` and ``Heartbeat`` in Kafka's
connect/mirror-client define them:

    offset-syncs  mm2-offset-syncs.<target>.internal, on the source cluster, partition 0
                  key {topic, partition:int32}  value {upstreamOffset:int64, offset:int64}
    checkpoints   <source>.checkpoints.internal, on the target cluster
                  key {group, topic, partition:int32}
                  value {version:int16 = 0} {upstreamOffset:int64, offset:int64, metadata}
    heartbeats    heartbeats, on the target cluster
                  key {sourceClusterAlias, targetClusterAlias}  value {version:int16 = 0} {timestamp:int64}

A checkpoint's topic is the downstream (target) name, as MM2 writes it.
"""
import struct
from dataclasses import dataclass

HEARTBEATS_TOPIC = "heartbeats"
VERSION = 0
_INT16, _INT32, _INT64 = struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")


def offset_syncs_topic(target: str) -> str:
    return f"mm2-offset-syncs.{target}.internal"


def checkpoints_topic(source: str) -> str:
    return f"{source}.checkpoints.internal"


class FormatError(ValueError):
    """Bytes that are not a record of the expected MM2 schema."""


class _Reader:
    def __init__(self, data: bytes):
        self.data, self.at = data, 0

    def take(self, layout: struct.Struct) -> int:
        if self.at + layout.size > len(self.data):
            raise FormatError("record ends early")
        (value,) = layout.unpack_from(self.data, self.at)
        self.at += layout.size
        return value

    def string(self) -> str:
        length = self.take(_INT16)
        if length < 0 or self.at + length > len(self.data):
            raise FormatError("bad string length")
        text = self.data[self.at:self.at + length].decode()
        self.at += length
        return text


def _string(text: str) -> bytes:
    data = text.encode()
    return _INT16.pack(len(data)) + data


@dataclass(frozen=True)
class OffsetSync:
    topic: str
    partition: int
    upstream: int
    downstream: int

    def key(self) -> bytes:
        return _string(self.topic) + _INT32.pack(self.partition)

    def value(self) -> bytes:
        return _INT64.pack(self.upstream) + _INT64.pack(self.downstream)

    @classmethod
    def decode(cls, key: bytes, value: bytes) -> "OffsetSync":
        k, v = _Reader(key), _Reader(value)
        return cls(k.string(), k.take(_INT32), v.take(_INT64), v.take(_INT64))


@dataclass(frozen=True)
class Checkpoint:
    group: str
    topic: str
    partition: int
    upstream: int
    downstream: int
    metadata: str = ""

    def key(self) -> bytes:
        return _string(self.group) + _string(self.topic) + _INT32.pack(self.partition)

    def value(self) -> bytes:
        return _INT16.pack(VERSION) + _INT64.pack(self.upstream) + _INT64.pack(self.downstream) \
            + _string(self.metadata)

    @classmethod
    def decode(cls, key: bytes, value: bytes) -> "Checkpoint":
        k, v = _Reader(key), _Reader(value)
        group, topic, partition = k.string(), k.string(), k.take(_INT32)
        if v.take(_INT16) != VERSION:
            raise FormatError("unknown checkpoint version")
        return cls(group, topic, partition, v.take(_INT64), v.take(_INT64), v.string())


@dataclass(frozen=True)
class Heartbeat:
    source: str
    target: str
    timestamp_ms: int

    def key(self) -> bytes:
        return _string(self.source) + _string(self.target)

    def value(self) -> bytes:
        return _INT16.pack(VERSION) + _INT64.pack(self.timestamp_ms)

    @classmethod
    def decode(cls, key: bytes, value: bytes) -> "Heartbeat":
        k, v = _Reader(key), _Reader(value)
        source, target = k.string(), k.string()
        if v.take(_INT16) != VERSION:
            raise FormatError("unknown heartbeat version")
        return cls(source, target, v.take(_INT64))
