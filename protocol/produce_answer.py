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
from functools import cache

from .answer_writer import AnswerWriter, Fields

_I32 = struct.Struct(">i")
# index, error code, base offset, then log append time (v2+) and log start offset (v5+)
_FIXED = ("index", "error_code", "base_offset", "log_append_time_ms", "log_start_offset")


@cache
def _partition_fields(version: int) -> Fields:
    count = 5 if version >= 5 else 4 if version >= 2 else 3
    return Fields("ihqqq"[:count], _FIXED[:count])


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
        writer = AnswerWriter(version >= 9)
        out = writer.out
        fixed = _partition_fields(version)
        writer.length(len(self.responses))
        for topic in self.responses:
            writer.string(topic.name)
            writer.length(len(topic.partition_responses))
            for answer in topic.partition_responses:
                out += fixed.pack(answer)
                if version >= 8:
                    writer.length(len(answer.record_errors))
                    for batch_index, message in answer.record_errors:
                        out += _I32.pack(batch_index)
                        writer.string(message)
                        writer.tags()
                    writer.string(answer.error_message)
                writer.tags()
            writer.tags()
        if version >= 1:
            out += _I32.pack(self.throttle_time_ms)
        writer.tags()
        return bytes(out)
