"""Produce's answer, written by hand: the one response a broker sends for every request that
carries records.

kafka-python builds a response as objects of its schema classes and encodes them through
its generic field machinery: about 25 us for a one-partition answer on a quiet machine,
a quarter of kgate's CPU per request when requests are small (bench/PROFILE.md, "Small
requests"). This writes the same bytes (a property test compares them with kafka-python's
over every version served, 0-11) in straight-line code, a few microseconds. The objects
keep the schema's attribute names, since a broker answering a produce by reference reads
its partitions' answers back (gateway/handlers/produce_reference.py).

Versions: 1 adds the throttle time, 2 the log append time, 5 the log start offset, 8 the
record errors and error message, 9 the compact (flexible) forms with tagged fields; 10 and
11 add only tagged fields (a current leader, node endpoints), which kgate does not send.
"""
import struct
from collections.abc import Sequence

_COUNT = struct.Struct(">i")
_NAME_LENGTH = struct.Struct(">h")
_THROTTLE = _COUNT
# index, error code, base offset; then, from the versions that have them, log append time and
# log start offset: (layout, how many of those five fields it holds)
_PARTITION = {0: (struct.Struct(">ihq"), 3), 2: (struct.Struct(">ihqq"), 4), 5: (struct.Struct(">ihqqq"), 5)}
_NO_TAGS = b"\x00"


class PartitionAnswer:
    __slots__ = ("index", "error_code", "base_offset", "log_append_time_ms", "log_start_offset", "error_message",
                 "record_errors")

    def __init__(self, index: int, error_code: int, base_offset: int, log_append_time_ms: int = -1,
                 log_start_offset: int = -1, error_message: str | None = None,
                 record_errors: Sequence[tuple[int, str | None]] = ()):
        self.index = index
        self.error_code = error_code
        self.base_offset = base_offset
        self.log_append_time_ms = log_append_time_ms
        self.log_start_offset = log_start_offset
        self.error_message = error_message
        self.record_errors = record_errors  # (batch index, message) of each record that failed


class TopicAnswer:
    __slots__ = ("name", "partition_responses")

    def __init__(self, name: str, partition_responses: list[PartitionAnswer]):
        self.name = name
        self.partition_responses = partition_responses


class ProduceAnswer:
    __slots__ = ("responses", "throttle_time_ms")

    def __init__(self, responses: list[TopicAnswer], throttle_time_ms: int = 0):
        self.responses = responses
        self.throttle_time_ms = throttle_time_ms

    def encode(self, version: int) -> bytes:
        flexible = version >= 9
        partition, width = _PARTITION[5 if version >= 5 else 2 if version >= 2 else 0]
        out = bytearray(_length(len(self.responses), flexible))
        for topic in self.responses:
            out += _string(topic.name, flexible)
            out += _length(len(topic.partition_responses), flexible)
            for answer in topic.partition_responses:
                fields = (answer.index, answer.error_code, answer.base_offset, answer.log_append_time_ms,
                          answer.log_start_offset)
                out += partition.pack(*fields[:width])
                if version >= 8:
                    out += _length(len(answer.record_errors), flexible)
                    for batch_index, message in answer.record_errors:
                        out += _COUNT.pack(batch_index)
                        out += _string(message, flexible)
                        if flexible:
                            out += _NO_TAGS
                    out += _string(answer.error_message, flexible)
                if flexible:
                    out += _NO_TAGS
            if flexible:
                out += _NO_TAGS
        if version >= 1:
            out += _THROTTLE.pack(self.throttle_time_ms)
        if flexible:
            out += _NO_TAGS
        return bytes(out)


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _length(count: int, flexible: bool) -> bytes:
    return _uvarint(count + 1) if flexible else _COUNT.pack(count)


def _string(value: str | None, flexible: bool) -> bytes:
    if value is None:
        return b"\x00" if flexible else b"\xff\xff"
    encoded = value.encode()
    return (_uvarint(len(encoded) + 1) if flexible else _NAME_LENGTH.pack(len(encoded))) + encoded
