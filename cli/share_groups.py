"""A share group (KIP-932) as ``kgate groups describe`` shows it: its members (ShareGroupDescribe)
and each share-partition's start offset, lag and in-flight records (DescribeShareGroupOffsets).

kafka-python's admin client speaks neither API, so the requests go through its connection
manager, to the group's coordinator, as kgate's schema-generated message classes. A
share-partition's lag is Kafka's: the records from its start offset to the log end not yet
acknowledged or archived. Its in-flight count (records handed out and not finished) is
kgate's own, a tagged field of the answer that Kafka's brokers do not send (None there).
"""
from dataclasses import dataclass

from kafka.structs import TopicPartition

from kgate.protocol.messages import DescribeShareGroupOffsetsRequest, ShareGroupDescribeRequest

from .client_options import Failed, error_text

GROUP_ID_NOT_FOUND = 69
UNKNOWN = -1  # Kafka's "no value" for a start offset, a lag or an in-flight count


@dataclass(frozen=True)
class SharePartition:
    partition: TopicPartition
    start_offset: int | None
    lag: int | None
    in_flight: int | None


def describe(admin, group_id: str) -> tuple[dict, list[SharePartition]] | None:
    """The share group's description (ShareGroupDescribe's, as a dict) and its share-partitions;
    None when there is no share group of that id."""
    return admin._manager.run(_describe, admin, group_id)


async def _describe(admin, group_id: str):
    coordinator = (await admin._find_coordinator_ids([group_id]))[group_id]
    answer = await admin._manager.send(ShareGroupDescribeRequest(group_ids=[group_id],
                                                                 include_authorized_operations=False),
                                       node_id=coordinator)
    [group] = answer.groups
    if group.error_code == GROUP_ID_NOT_FOUND:
        return None
    if group.error_code:
        raise Failed(error_text(group.error_code, f"share group {group_id!r}", group.error_message))
    G = DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup
    answer = await admin._manager.send(DescribeShareGroupOffsetsRequest(groups=[G(group_id=group_id, topics=None)]),
                                       node_id=coordinator)
    [offsets] = answer.groups
    if offsets.error_code:
        raise Failed(error_text(offsets.error_code, f"share group {group_id!r}", offsets.error_message))
    partitions = []
    for topic in offsets.topics:
        for part in topic.partitions:
            if part.error_code:
                raise Failed(error_text(part.error_code, f"{topic.topic_name}-{part.partition_index}",
                                        part.error_message))
            partitions.append(SharePartition(TopicPartition(topic.topic_name, part.partition_index),
                                             _known(part.start_offset), _known(part.lag), _known(part.kgate_in_flight)))
    return group.to_dict(), sorted(partitions, key=lambda p: p.partition)


def _known(value: int) -> int | None:
    return None if value == UNKNOWN else value


def assigned(member: dict) -> list[TopicPartition]:
    """A share member's assigned partitions, from ShareGroupDescribe's answer."""
    return sorted(TopicPartition(t["topic_name"], p) for t in member["assignment"]["topic_partitions"]
                  for p in t["partitions"])
