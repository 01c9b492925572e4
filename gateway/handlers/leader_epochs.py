"""OffsetForLeaderEpoch: where a leader epoch ends, for clients checking for truncation.

A partition's epoch history (``partition.epochs``, ``[[epoch, start offset], ...]``)
grows by one epoch each time a broker takes the partition over; every batch stored
carries the epoch it was written in. Kafka's LeaderEpochFileCache.endOffsetFor answers:

- requested epoch -1 (undefined): epoch -1, end offset -1;
- the current epoch: it, and the high watermark (Kafka's leader says its log end
  offset; kgate's end past the high watermark is not yet durable, and no client has
  read there, so the high watermark is the end a client can have seen);
- a larger epoch: epoch -1, end offset -1 (no such epoch);
- a smaller one: the largest epoch not above it (or the requested epoch itself when
  it is older than every epoch) and the start of the first epoch after it, never
  below the log start offset.

``current_leader_epoch`` (v2+) fences as Kafka's Partition.getLocalLog does: older
than the partition's epoch is FENCED_LEADER_EPOCH, newer UNKNOWN_LEADER_EPOCH, -1
skips the check. A partition of a known topic served by another broker is
NOT_LEADER_OR_FOLLOWER; an unknown one UNKNOWN_TOPIC_OR_PARTITION.
"""
from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer import OffsetForLeaderEpochResponse

from kgate.metadata.acls import Operation, ResourceType
from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.errors import KafkaError

from ..partition_router import Client
from ..partition_router import Operation as Route
from . import Context, handles
from .broker_view import per_partition

R = OffsetForLeaderEpochResponse
TopicResult = R.OffsetForLeaderTopicResult
EpochEndOffset = TopicResult.EpochEndOffset

UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


@handles(ApiKey.OffsetForLeaderEpoch)
async def offset_for_leader_epoch(ctx: Context, request):
    async def answer(part, served):
        partition = served.partition
        current = part.current_leader_epoch if ctx.version >= 2 else -1
        if current != -1 and current < partition.leader_epoch:
            raise KafkaError(ErrorCode.FENCED_LEADER_EPOCH)
        if current > partition.leader_epoch:
            raise KafkaError(ErrorCode.UNKNOWN_LEADER_EPOCH)
        epoch, end = end_offset_for(part.leader_epoch, partition.epochs,
                                    partition.ledger.log_start_offset, partition.ledger.high_watermark)
        return EpochEndOffset(error_code=ErrorCode.NONE, partition=part.partition, leader_epoch=epoch, end_offset=end)

    def refused(part, error):
        return EpochEndOffset(error_code=error.code, partition=part.partition,
                              leader_epoch=UNDEFINED_EPOCH, end_offset=UNDEFINED_OFFSET)

    return R(throttle_time_ms=0, topics=[
        TopicResult(topic=topic.topic, partitions=await per_partition(
            ctx.broker, Client.of(ctx.connection), topic.topic, topic.partitions, lambda part: part.partition,
            answer, refused, allowed=ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, topic.topic),
            operation=Route.OWNED))
        for topic in request.topics])


def end_offset_for(requested: int, epochs: list[list[int]], log_start: int, end: int) -> tuple[int, int]:
    """(epoch, end offset) for ``requested`` in a log with epoch history ``epochs``."""
    current = epochs[-1][0]
    if requested == UNDEFINED_EPOCH or requested > current:
        return UNDEFINED_EPOCH, UNDEFINED_OFFSET
    if requested == current:
        return current, end
    before = [epoch for epoch, _ in epochs if epoch <= requested]
    following = next(start for epoch, start in epochs if epoch > requested)
    return (before[-1] if before else requested), max(following, log_start)
