"""The target side of the audit: records counted by reading the target topics themselves."""
import time

from confluent_kafka import Consumer, KafkaException, TopicPartition

from .audit import Row, compare, minute_of, source_counts, window_start
from .config import Cluster
from .replicator import origin_of
from .routes import Route
from .state import MirrorState

TIMEOUT = 30.0


class CountError(Exception):
    """A target topic could not be read to its end."""


def audit_route(state: MirrorState, cluster: Cluster, route: Route, since_ms: int) -> list[Row]:
    """Source against target per topic and minute, from the start of ``since_ms``'s minute.
    Source counts are read first: a record counted there was on the target before, so a
    copy still under way shows as duplicated for a moment, never as missing."""
    start = window_start(since_ms)
    counted = source_counts(state, route.name, minute_of(start))
    return compare(counted, count_target(cluster, route, set(counted), start))


def count_target(cluster: Cluster, route: Route, topics: set[str], since_ms: int,
                 timeout: float = TIMEOUT) -> dict[str, dict[int, int]]:
    """Per source topic and minute, the records on the target copy whose origin is the route's
    source and whose timestamp is at or after ``since_ms``."""
    consumer = Consumer(cluster.client_config(**{"group.id": "kgate-mirror-audit", "enable.auto.commit": False,
                                                 "auto.offset.reset": "earliest"}))
    counts: dict[str, dict[int, int]] = {}
    try:
        metadata = consumer.list_topics(timeout=timeout)
        for topic in sorted(topics):
            name = route.target_topic(topic)
            if name not in metadata.topics:
                continue
            partitions = [TopicPartition(name, p, since_ms) for p in metadata.topics[name].partitions]
            starts = consumer.offsets_for_times(partitions, timeout=timeout)
            per_minute = counts.setdefault(topic, {})
            for start in starts:
                low, end = consumer.get_watermark_offsets(TopicPartition(name, start.partition), timeout=timeout)
                if start.offset < 0 or start.offset >= end:
                    continue
                start.offset = max(start.offset, low)  # never before records deleted from the log
                _count_partition(consumer, start, end, route.source, since_ms, per_minute, timeout)
    except KafkaException as exc:
        raise CountError(exc.args[0].str()) from None
    finally:
        consumer.close()
    return counts


def _count_partition(consumer: Consumer, start: TopicPartition, end: int, origin: str, since_ms: int,
                     per_minute: dict[int, int], timeout: float) -> None:
    consumer.assign([start])
    position, deadline = start.offset, time.monotonic() + timeout
    while position < end:
        if time.monotonic() > deadline:
            raise CountError(f"{start.topic} [{start.partition}] not read to its end within {timeout:.0f} s")
        for message in consumer.consume(5000, 0.5):
            offset = message.offset()
            if message.error() is not None or offset is None or offset >= end:
                continue
            position = offset + 1
            _, timestamp = message.timestamp()
            headers = message.headers()  # a consumed record's are a list (the type allows a producer's dict too)
            if timestamp >= since_ms and origin_of(headers if isinstance(headers, list) else None, "") == origin:
                minute = minute_of(timestamp)
                per_minute[minute] = per_minute.get(minute, 0) + 1
        # Past records that are not returned (compacted away, transaction markers) too.
        position = max(position, consumer.position([TopicPartition(start.topic, start.partition)])[0].offset)
    consumer.unassign()
