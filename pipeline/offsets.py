"""Offset ranges: what one Spark task reads, how a micro-batch is capped, and the JSON
Spark checkpoints.

Streaming offsets are kept in the shape Spark's Kafka source writes to its
checkpoint, ``{"topic": {"0": 42}}`` (the next offset to read per partition), so a
checkpoint reads the same to anyone who knows the built-in source.
"""
import math
from dataclasses import dataclass

TopicPartition = tuple[str, int]
Offsets = dict[TopicPartition, int]


@dataclass(frozen=True)
class PartitionRange:
    """Offsets [start, end) of one partition: what one Spark task reads, planned by the
    driver's reader and shipped to the task (so it must stay small and picklable)."""
    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


def to_json_dict(offsets: Offsets) -> dict[str, dict[str, int]]:
    """Spark's checkpoint shape; partitions in numeric order so equal offsets compare equal."""
    document: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        document.setdefault(topic, {})[str(partition)] = offset
    return document


def from_json_dict(document: dict) -> Offsets:
    return {(topic, int(partition)): int(offset)
            for topic, partitions in document.items() for partition, offset in partitions.items()}


def ranges(start: Offsets, end: Offsets) -> list[PartitionRange]:
    """One range per partition of ``end`` with records to read (``start`` names them all)."""
    out = []
    for (topic, partition), stop in sorted(end.items()):
        begin = start[(topic, partition)]
        if stop > begin:
            out.append(PartitionRange(topic, partition, begin, stop))
    return out


def split(parts: list[PartitionRange], min_partitions: int | None) -> list[PartitionRange]:
    """At least ``min_partitions`` ranges when asked, as Spark's Kafka source splits them:
    each partition gets a share of the tasks proportional to its size, at least one, and
    its offsets are cut into that many nearly equal pieces."""
    if not min_partitions or min_partitions <= len(parts):
        return parts
    total = sum(part.size for part in parts)
    out = []
    for part in parts:
        pieces = max(1, min(part.size, round(part.size / total * min_partitions)))
        for i in range(pieces):
            begin = part.start + part.size * i // pieces
            stop = part.start + part.size * (i + 1) // pieces
            out.append(PartitionRange(part.topic, part.partition, begin, stop))
    return out


def cap(start: Offsets, latest: Offsets, max_records: int) -> Offsets:
    """The end of a micro-batch that reads at most about ``max_records`` records.

    As Spark's ``maxOffsetsPerTrigger``: each partition gets a share proportional to
    its backlog (rounded down, but up when under one record, so a small backlog is not
    starved), and never beyond what is there.
    """
    backlog = {tp: max(0, offset - start.get(tp, 0)) for tp, offset in latest.items()}
    total = sum(backlog.values())
    if total <= max_records:
        return dict(latest)
    end = {}
    for tp, offset in latest.items():
        begin = start.get(tp, 0)
        share = max_records * backlog[tp] / total
        step = math.ceil(share) if share < 1 else math.floor(share)
        end[tp] = min(offset, begin + step)
    return end
