"""The share-group offsets APIs (KIP-932): DescribeShareGroupOffsets, AlterShareGroupOffsets and
DeleteShareGroupOffsets, as Kafka's KafkaApis and group coordinator answer them.

A share group's offset on a partition is its share-partition's start offset, kept by the
share coordinator (gateway/shares). Describing needs Describe on the group and on each
topic (a topic the principal may not describe is left out of an all-topics answer, and
answered TOPIC_AUTHORIZATION_FAILED when named); altering needs Read on the group and on
each topic; deleting needs Delete on the group and Read on each topic. Altering and
deleting touch only an empty share group (GROUP_ID_NOT_FOUND for a group of another type,
NON_EMPTY_GROUP while it has members), as its members would be reading the
share-partitions; altering makes an empty share group of an id no group has (Kafka 4.4
does), deleting answers GROUP_ID_NOT_FOUND for it. An altered share-partition starts
afresh at the offset; a deleted one starts again where ``share.auto.offset.reset`` says
when the group next reads it.
"""
import uuid

from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer import ListOffsetsRequest

from kgate.metadata.acls import Operation, ResourceType
from kgate.metadata.cluster import Topic
from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.error_messages import KAFKA_MESSAGES
from kgate.protocol.errors import KafkaError
from kgate.protocol.messages import (
    AlterShareGroupOffsetsResponse,
    DeleteShareGroupOffsetsResponse,
    DescribeShareGroupOffsetsResponse,
)

from ..partition_router import Client, Followed, Local, Refused, route
from ..partition_router import Operation as Route
from ..peer_links import PeerUnavailable
from ..shares.records import SharePartitionKey
from ..shares.shard import UNINITIALIZED, ShareSummary
from . import Context, handles

D = DescribeShareGroupOffsetsResponse
DG = D.DescribeShareGroupOffsetsResponseGroup
DT = DG.DescribeShareGroupOffsetsResponseTopic
DP = DT.DescribeShareGroupOffsetsResponsePartition
A = AlterShareGroupOffsetsResponse
AT = A.AlterShareGroupOffsetsResponseTopic
AP = AT.AlterShareGroupOffsetsResponsePartition
X = DeleteShareGroupOffsetsResponse
XT = X.DeleteShareGroupOffsetsResponseTopic
NO_TOPIC_ID = uuid.UUID(int=0)
LATEST, LIST_OFFSETS_VERSION, OWNER_TIMEOUT_S = -1, 7, 10.0  # a partition's end, asked of its owner

def _message(exc: KafkaError) -> str | None:
    return exc.message or KAFKA_MESSAGES.get(exc.code)


# -- DescribeShareGroupOffsets ---------------------------------------------------------------

@handles(ApiKey.DescribeShareGroupOffsets)
async def describe_share_group_offsets(ctx: Context, request):
    return D(throttle_time_ms=0, groups=[await _describe_group(ctx, group) for group in request.groups])


async def _describe_group(ctx: Context, asked):
    group_id = asked.group_id
    if not ctx.allowed(Operation.DESCRIBE, ResourceType.GROUP, group_id):
        return DG(group_id=group_id, topics=[], error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, error_message=None)
    if asked.topics is None:  # every share-partition the group has started, on topics it may describe
        wanted: dict[str, list[int]] = {}
        for key in ctx.broker.shares.group_partitions(group_id):
            topic = ctx.broker.topic_by_id(key.topic_id)
            if topic is not None and ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, topic.name, quietly=True):
                wanted.setdefault(topic.name, []).append(key.partition)
        asked_topics = sorted(wanted.items())
    else:
        asked_topics = [(topic.topic_name, list(topic.partitions)) for topic in asked.topics]
    known, unknown, refused = [], [], []
    for name, partitions in asked_topics:
        topic = ctx.broker.topics.get(name)
        if not ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, name):
            refused.append(DT(topic_name=name, topic_id=NO_TOPIC_ID, partitions=[
                _described(index, UNINITIALIZED, -1, ErrorCode.TOPIC_AUTHORIZATION_FAILED) for index in partitions]))
        elif topic is None:  # absent data rather than an error, as OffsetFetch answers
            unknown.append(DT(topic_name=name, topic_id=NO_TOPIC_ID,
                              partitions=[_described(index, UNINITIALIZED, -1) for index in partitions]))
        else:
            known.append(DT(topic_name=name, topic_id=topic.topic_id,
                            partitions=[await _describe_partition(ctx, group_id, topic, index)
                                        for index in partitions]))
    return DG(group_id=group_id, topics=known + unknown + refused, error_code=ErrorCode.NONE, error_message=None)


async def _describe_partition(ctx: Context, group_id: str, topic: Topic, index: int):
    try:
        summary = await ctx.broker.share_persister.summary(SharePartitionKey(group_id, topic.topic_id, index))
    except KafkaError as exc:
        return _described(index, UNINITIALIZED, -1, exc.code, exc.message)
    if summary.start_offset < 0 or summary.delivery_complete < 0:
        return _described(index, summary, -1)
    end = await _log_end(ctx, topic, index)
    if isinstance(end, ErrorCode):
        return _described(index, UNINITIALIZED, -1, end)
    # Kafka's lag: what lies between the start offset and the log's end, less what is already finished.
    return _described(index, summary, end - summary.start_offset - summary.delivery_complete)


async def _log_end(ctx: Context, topic: Topic, index: int) -> int | ErrorCode:
    """The partition's latest offset (its high watermark), as ListOffsets would give it: read here
    when this broker serves it, else asked of its owner (the group's coordinator and the topic
    partition's owner are placed apart, as Kafka's group coordinator lists a leader's offsets)."""
    if not 0 <= index < topic.partitions:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    try:
        decision = await route(ctx.broker, Client.of(ctx.connection), topic, index, Route.DESCRIBE)
    except KafkaError as exc:
        return exc.code
    if isinstance(decision, Local | Followed):
        return decision.partition.ledger.high_watermark
    if isinstance(decision, Refused) and decision.error != ErrorCode.NOT_LEADER_FOR_PARTITION:
        return decision.error
    return await _owner_log_end(ctx, topic, index)


async def _owner_log_end(ctx: Context, topic: Topic, index: int) -> int | ErrorCode:
    owner = ctx.broker.leader(topic, index)
    if owner is None or owner.node_id == ctx.broker.node_id:
        return ErrorCode.NOT_LEADER_FOR_PARTITION
    LO = ListOffsetsRequest.ListOffsetsTopic
    request = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[LO(name=topic.name, partitions=[
        LO.ListOffsetsPartition(partition_index=index, current_leader_epoch=-1, timestamp=LATEST)])])
    try:
        response = await ctx.broker.peers.request(owner.node_id, request, LIST_OFFSETS_VERSION, OWNER_TIMEOUT_S)
    except (PeerUnavailable, TimeoutError):
        return ErrorCode.NOT_LEADER_FOR_PARTITION
    [answer] = [p for t in response.topics for p in t.partitions]
    return answer.offset if answer.error_code == ErrorCode.NONE else ErrorCode(answer.error_code)


def _described(index: int, summary: ShareSummary, lag: int, error: ErrorCode = ErrorCode.NONE,
               message: str | None = None):
    if error and message is None:
        message = KAFKA_MESSAGES.get(error)
    return DP(partition_index=index, start_offset=summary.start_offset, leader_epoch=summary.leader_epoch, lag=lag,
              error_code=error, error_message=message, kgate_in_flight=summary.in_flight)


# -- AlterShareGroupOffsets ------------------------------------------------------------------

@handles(ApiKey.AlterShareGroupOffsets)
async def alter_share_group_offsets(ctx: Context, request):
    group_id = request.group_id
    answers: list[tuple[str, uuid.UUID, list]] = []  # per topic: name, id, (partition, error or key to set)
    offsets: dict[SharePartitionKey, int] = {}
    try:
        ctx.require(Operation.READ, ResourceType.GROUP, group_id)
        for asked in request.topics:
            topic, error = _topic_for_offsets(ctx, asked.topic_name)
            parts: list[tuple[int, ErrorCode | SharePartitionKey]] = []
            for part in asked.partitions:
                if topic is None or not 0 <= part.partition_index < topic.partitions:
                    parts.append((part.partition_index, error or ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                else:
                    key = SharePartitionKey(group_id, topic.topic_id, part.partition_index)
                    offsets[key] = part.start_offset
                    parts.append((part.partition_index, key))
            answers.append((asked.topic_name, topic.topic_id if topic is not None else NO_TOPIC_ID, parts))
        await ctx.broker.groups.prepare_share_offsets_alter(group_id)
    except KafkaError as exc:
        return A(throttle_time_ms=0, error_code=exc.code, error_message=_message(exc), responses=[])
    outcome, message = ErrorCode.NONE, None
    try:
        for key, offset in offsets.items():
            await ctx.broker.share_persister.reset(key, offset)
    except KafkaError as exc:
        outcome, message = exc.code, _message(exc)
    return A(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, responses=[
        AT(topic_name=name, topic_id=topic_id, partitions=[
            _altered(index, outcome, message) if isinstance(result, SharePartitionKey) else _altered(index, result)
            for index, result in parts])
        for name, topic_id, parts in answers])


def _topic_for_offsets(ctx: Context, name: str) -> tuple[Topic | None, ErrorCode | None]:
    """The topic whose share-partitions an alter or a delete may touch (Read on it), or the error."""
    if not ctx.allowed(Operation.READ, ResourceType.TOPIC, name):
        return None, ErrorCode.TOPIC_AUTHORIZATION_FAILED
    topic = ctx.broker.topics.get(name)
    return topic, None if topic is not None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def _altered(index: int, error: ErrorCode = ErrorCode.NONE, message: str | None = None):
    return AP(partition_index=index, error_code=error,
              error_message=message or (KAFKA_MESSAGES.get(error) if error else None))


# -- DeleteShareGroupOffsets -----------------------------------------------------------------

@handles(ApiKey.DeleteShareGroupOffsets)
async def delete_share_group_offsets(ctx: Context, request):
    group_id = request.group_id
    answered, wanted = [], []
    try:
        ctx.require(Operation.DELETE, ResourceType.GROUP, group_id)
        for asked in request.topics:
            topic, error = _topic_for_offsets(ctx, asked.topic_name)
            if error == ErrorCode.TOPIC_AUTHORIZATION_FAILED:
                answered.append(_deleted(asked.topic_name, NO_TOPIC_ID, error))
            else:
                wanted.append((asked.topic_name, topic))
        ctx.broker.groups.check_share_offsets_alterable(group_id)
    except KafkaError as exc:
        return X(throttle_time_ms=0, error_code=exc.code, error_message=_message(exc), responses=[])
    for name, topic in wanted:
        answered.append(await _delete_topic(ctx, group_id, name, topic))
    return X(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, responses=answered)


async def _delete_topic(ctx: Context, group_id: str, name: str, topic: Topic | None):
    if topic is None:
        return _deleted(name, NO_TOPIC_ID, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    try:
        deleted = [index for index in range(topic.partitions)
                   if await ctx.broker.share_persister.delete(SharePartitionKey(group_id, topic.topic_id, index))]
    except KafkaError as exc:
        return _deleted(name, topic.topic_id, exc.code, _message(exc))
    if not deleted:  # Kafka's answer for a topic the group never read
        return _deleted(name, NO_TOPIC_ID, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        "There is no offset information to delete.")
    return _deleted(name, topic.topic_id)


def _deleted(name: str, topic_id: uuid.UUID, error: ErrorCode = ErrorCode.NONE, message: str | None = None):
    return XT(topic_name=name, topic_id=topic_id, error_code=error,
              error_message=message or (KAFKA_MESSAGES.get(error) if error else None))
