"""Reading what the mirror and the clusters know about positions: offset syncs, group offsets.

Offset syncs are read from MirrorMaker 2's topic itself (not from a copy of our own), so
syncs written by MM2 for the same cluster pair translate just as well.
"""
import time

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from .config import Cluster
from .mm2_formats import OffsetSync, offset_syncs_topic
from .translation import Sync

TIMEOUT = 30.0


class SyncReadError(Exception):
    """The offset-syncs topic could not be read to its end."""


def read_syncs(cluster: Cluster, target: str, timeout: float = TIMEOUT) -> dict[tuple[str, int], list[Sync]]:
    """Every offset sync of the routes from ``cluster`` into ``target``, read to the end."""
    topic = offset_syncs_topic(target)
    consumer = Consumer(cluster.client_config(**{"group.id": "kgate-mirror-failover", "enable.auto.commit": False,
                                                 "enable.partition.eof": True}))
    syncs: dict[tuple[str, int], list[Sync]] = {}
    try:
        try:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=timeout)
        except KafkaException:
            return syncs  # no route from this cluster to the target has copied anything yet
        consumer.assign([TopicPartition(topic, 0, low)])
        position, deadline = low, time.monotonic() + timeout
        while position < high:
            if time.monotonic() > deadline:
                raise SyncReadError(f"could not read {topic} to its end within {timeout:.0f} s")
            for message in consumer.consume(1000, 0.5):
                offset, key, value = message.offset(), message.key(), message.value()
                if message.error() is not None or offset is None:
                    continue
                position = offset + 1
                if key is None or value is None:
                    continue  # a tombstone: no offset sync
                sync = OffsetSync.decode(key, value)
                syncs.setdefault((sync.topic, sync.partition), []).append(Sync(sync.upstream, sync.downstream))
    finally:
        consumer.close()
    return syncs


def committed(admin: AdminClient, group: str) -> list[TopicPartition]:
    request = ConsumerGroupTopicPartitions(group)
    result = admin.list_consumer_group_offsets([request])[group].result(TIMEOUT)
    return [tp for tp in result.topic_partitions if tp.offset >= 0]


