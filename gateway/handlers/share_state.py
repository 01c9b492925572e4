"""The share-state APIs (KIP-932): InitializeShareGroupState, ReadShareGroupState,
WriteShareGroupState, DeleteShareGroupState and ReadShareGroupStateSummary (83-87).

Broker to broker, as in Kafka: a share-partition's leader (the broker serving the topic
partition) reads and writes the state the share coordinator keeps for it, over the peer
links (gateway/shares/persister.py), and the group coordinator initializes and deletes it.
Kafka's tools and peers may send them too. They need ClusterAction on the cluster, as
Kafka's ACLs say; each share-partition is answered on its own by the shard owning its
``__share_group_state`` partition (NOT_COORDINATOR from any other broker). As Kafka 4.4
answers: only InitializeShareGroupState checks that the topic partition exists
(UNKNOWN_TOPIC_OR_PARTITION); reading or writing a share-partition never initialized is
INVALID_REQUEST; a request naming no group is answered with no results.
"""
from collections.abc import Awaitable, Callable

from kafka.protocol.api_key import ApiKey

from kgate.metadata.acls import CLUSTER_NAME, Operation, ResourceType
from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.error_messages import KAFKA_MESSAGES
from kgate.protocol.errors import KafkaError
from kgate.protocol.messages import (
    DeleteShareGroupStateResponse,
    InitializeShareGroupStateResponse,
    ReadShareGroupStateResponse,
    ReadShareGroupStateSummaryResponse,
    WriteShareGroupStateResponse,
)

from ..shares.partition_state import DeliveryState, StateBatch
from ..shares.records import SharePartitionKey
from ..shares.shard import MAX_WINDOW
from . import Context, handles

# Each response with its per-topic result class.
INIT = (InitializeShareGroupStateResponse, InitializeShareGroupStateResponse.InitializeStateResult)
READ = (ReadShareGroupStateResponse, ReadShareGroupStateResponse.ReadStateResult)
WRITE = (WriteShareGroupStateResponse, WriteShareGroupStateResponse.WriteStateResult)
DELETE = (DeleteShareGroupStateResponse, DeleteShareGroupStateResponse.DeleteStateResult)
SUMMARY = (ReadShareGroupStateSummaryResponse, ReadShareGroupStateSummaryResponse.ReadStateSummaryResult)

# answer(key, partition data) -> the partition result's own fields; KafkaError for its error.
Answer = Callable[[SharePartitionKey, object], Awaitable[dict]]


async def _answered(ctx: Context, request, classes: tuple, answer: Answer, failed: dict | None = None):
    """The response with one result per share-partition asked, in the request's order."""
    response, topic_class = classes
    partition_class = topic_class.PartitionResult
    permitted = ctx.allowed(Operation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME)
    if permitted and not request.group_id:
        return response(results=[])  # Kafka answers nothing for a request naming no group
    if permitted:
        await ctx.broker.shares.ensure_topic()
    results = []
    for topic in request.topics:
        partitions = []
        for part in topic.partitions:
            try:
                if not permitted:
                    raise KafkaError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
                if part.partition < 0:
                    raise KafkaError(ErrorCode.INVALID_REQUEST, "The partition id cannot be a negative number.")
                key = SharePartitionKey(request.group_id, topic.topic_id, part.partition)
                fields = await answer(key, part)
                partitions.append(partition_class(partition=part.partition, error_code=ErrorCode.NONE,
                                                  error_message=None, **fields))
            except KafkaError as exc:
                partitions.append(partition_class(partition=part.partition, error_code=exc.code,
                                                  error_message=exc.message or KAFKA_MESSAGES.get(exc.code),
                                                  **(failed or {})))
        results.append(topic_class(topic_id=topic.topic_id, partitions=partitions))
    return response(results=results)


@handles(ApiKey.InitializeShareGroupState)
async def initialize_share_group_state(ctx: Context, request):
    async def answer(key: SharePartitionKey, part) -> dict:
        topic = ctx.broker.topic_by_id(key.topic_id)
        if topic is None or key.partition >= topic.partitions:  # only a new share-partition is checked
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        await ctx.broker.shares.initialize(key, part.state_epoch, part.start_offset)
        return {}
    return await _answered(ctx, request, INIT, answer)


@handles(ApiKey.ReadShareGroupState)
async def read_share_group_state(ctx: Context, request):
    R = READ[1].PartitionResult

    async def answer(key: SharePartitionKey, part) -> dict:
        stored = await ctx.broker.shares.read(key, part.leader_epoch)
        return {"state_epoch": stored.state_epoch, "start_offset": stored.start_offset, "state_batches": [
            R.StateBatch(first_offset=b.first, last_offset=b.last, delivery_state=int(b.state),
                         delivery_count=b.delivery_count) for b in stored.batches]}
    return await _answered(ctx, request, READ, answer,
                           {"state_epoch": 0, "start_offset": 0, "state_batches": []})


@handles(ApiKey.WriteShareGroupState)
async def write_share_group_state(ctx: Context, request):
    async def answer(key: SharePartitionKey, part) -> dict:
        batches = [StateBatch(b.first_offset, b.last_offset, _delivery_state(b.delivery_state), b.delivery_count)
                   for b in part.state_batches]
        if sum(max(b.last - b.first + 1, 0) for b in batches) > MAX_WINDOW:  # each is walked before it is merged
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"state batches over more than {MAX_WINDOW} offsets")
        await ctx.broker.shares.write(key, part.state_epoch, part.leader_epoch, part.start_offset, batches,
                                      part.delivery_complete_count)
        return {}
    return await _answered(ctx, request, WRITE, answer)


def _delivery_state(value: int) -> DeliveryState:
    """A batch's state as stored (Kafka stores any of its delivery states, ACQUIRED too)."""
    if value not in DeliveryState._value2member_map_:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"{value} is not a delivery state")
    return DeliveryState(value)


@handles(ApiKey.DeleteShareGroupState)
async def delete_share_group_state(ctx: Context, request):
    async def answer(key: SharePartitionKey, part) -> dict:
        await ctx.broker.shares.delete(key)
        return {}
    return await _answered(ctx, request, DELETE, answer)


@handles(ApiKey.ReadShareGroupStateSummary)
async def read_share_group_state_summary(ctx: Context, request):
    async def answer(key: SharePartitionKey, part) -> dict:
        summary = ctx.broker.shares.read_summary(key, part.leader_epoch)
        return {"state_epoch": summary.state_epoch, "leader_epoch": summary.leader_epoch,
                "start_offset": summary.start_offset, "delivery_complete_count": summary.delivery_complete}
    return await _answered(ctx, request, SUMMARY, answer,
                           {"state_epoch": 0, "leader_epoch": 0, "start_offset": 0, "delivery_complete_count": -1})
