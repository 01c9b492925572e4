"""The groups DescribeGroups does not describe, through their own APIs: KIP-848 consumer groups
(ConsumerGroupDescribe), KIP-932 share groups (ShareGroupDescribe, and
DescribeShareGroupOffsets for each share-partition's start offset, lag and in-flight records)
and KIP-1071 streams groups (StreamsGroupDescribe: a member's active tasks read as the
partitions of its subtopologies' source and repartition topics).

kafka-python's admin client speaks none of these, so the requests go through its connection
manager, to the group's coordinator, as kgate's schema-generated message classes. A
share-partition's lag is Kafka's: the records from its start offset to the log end not yet
acknowledged or archived. Its in-flight count (records handed out and not finished) is
kgate's own, a tagged field of the answer that Kafka's brokers do not send (None there).
"""
from dataclasses import dataclass

from kafka.structs import TopicPartition

from kgate.protocol.messages import (
    ConsumerGroupDescribeRequest,
    DescribeShareGroupOffsetsRequest,
    ShareGroupDescribeRequest,
    StreamsGroupDescribeRequest,
)

from .client_options import Failed, error_text

GROUP_ID_NOT_FOUND = 69
UNKNOWN = -1  # Kafka's "no value" for a start offset, a lag or an in-flight count


@dataclass(frozen=True)
class SharePartition:
    partition: TopicPartition
    start_offset: int | None
    lag: int | None
    in_flight: int | None


def consumer(admin, group_id: str) -> dict | None:
    """A consumer group in the shape kafka-python gives a classic one (DescribeGroups'), its
    members' assignments as a decoded consumer-protocol assignment; None when there is no
    consumer group of that id."""
    described = admin._manager.run(_described, admin, group_id, ConsumerGroupDescribeRequest(
        group_ids=[group_id], include_authorized_operations=False))
    if described is None:
        return None
    return {"group_state": described["group_state"], "protocol_type": "consumer",
            "protocol_data": described["assignor_name"], "members": [
                {"member_id": m["member_id"], "client_id": m["client_id"], "client_host": m["client_host"],
                 "group_instance_id": m["instance_id"], "member_assignment": {"assigned_partitions": [
                     {"topic": t["topic_name"], "partitions": t["partitions"]}
                     for t in m["assignment"]["topic_partitions"]]}}
                for m in described["members"]]}


def streams(admin, group_id: str) -> dict | None:
    """A streams group in the shape kafka-python gives a classic one, each member's active
    tasks as the partitions it reads; None when there is no streams group of that id."""
    described = admin._manager.run(_described, admin, group_id, StreamsGroupDescribeRequest(
        group_ids=[group_id], include_authorized_operations=False))
    if described is None:
        return None
    reads = {s["subtopology_id"]: [*s["source_topics"], *(t["name"] for t in s["repartition_source_topics"])]
             for s in ((described["topology"] or {}).get("subtopologies") or [])}
    return {"group_state": described["group_state"], "protocol_type": "streams", "protocol_data": "sticky",
            "members": [
                {"member_id": m["member_id"], "client_id": m["client_id"], "client_host": m["client_host"],
                 "group_instance_id": m["instance_id"], "member_assignment": {"assigned_partitions": [
                     {"topic": topic, "partitions": task["partitions"]}
                     for task in m["assignment"]["active_tasks"] for topic in reads.get(task["subtopology_id"], [])]}}
                for m in described["members"]]}


def share(admin, group_id: str) -> tuple[dict, list[SharePartition]] | None:
    """The share group's description (ShareGroupDescribe's, as a dict) and its share-partitions;
    None when there is no share group of that id."""
    return admin._manager.run(_share, admin, group_id)


async def _share(admin, group_id: str):
    described = await _described(admin, group_id, ShareGroupDescribeRequest(group_ids=[group_id],
                                                                            include_authorized_operations=False))
    if described is None:
        return None
    G = DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup
    coordinator = (await admin._find_coordinator_ids([group_id]))[group_id]
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
    return described, sorted(partitions, key=lambda p: p.partition)


async def _described(admin, group_id: str, request) -> dict | None:
    """The one group a ConsumerGroupDescribe or ShareGroupDescribe ``request`` asks its coordinator
    about, as a dict; None when it is not a group of that kind (or no group)."""
    coordinator = (await admin._find_coordinator_ids([group_id]))[group_id]
    [group] = (await admin._manager.send(request, node_id=coordinator)).groups
    if group.error_code == GROUP_ID_NOT_FOUND:
        return None
    if group.error_code:
        raise Failed(error_text(group.error_code, f"group {group_id!r}", group.error_message))
    return group.to_dict()


def _known(value: int) -> int | None:
    return None if value == UNKNOWN else value


def assigned(member: dict) -> list[TopicPartition]:
    """A share member's assigned partitions, from ShareGroupDescribe's answer."""
    return sorted(TopicPartition(t["topic_name"], p) for t in member["assignment"]["topic_partitions"]
                  for p in t["partitions"])
