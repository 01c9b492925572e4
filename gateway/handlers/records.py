"""DeleteRecords: move a partition's log start offset forward.

As Kafka's ReplicaManager and Partition.deleteRecordsOnLeader answer: an internal
topic is INVALID_TOPIC (checked before the partition is looked up), an unknown
partition UNKNOWN_TOPIC_OR_PARTITION, a topic whose ``cleanup.policy`` lacks
``delete`` POLICY_VIOLATION, offset -1 means the high watermark, a negative offset or
one beyond the high watermark is OFFSET_OUT_OF_RANGE, and an offset at or below the
current log start changes nothing. The low watermark returned is the log start
offset after the request (-1 with an error).

The managed ledger stores the new log start with its ledger list, so it survives a
restart, and drops every sealed ledger wholly below it; a ledger holding both sides
stays until the start passes its end (Kafka keeps a segment's head the same way).
Fetch below the start is OFFSET_OUT_OF_RANGE and ListOffsets EARLIEST returns it.
"""
from kafka.protocol.admin import DeleteRecordsResponse
from kafka.protocol.api_key import ApiKey

from kgate.metadata.acls import Operation, ResourceType
from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.errors import KafkaError

from . import Context, handles
from .broker_view import BrokerView

R = DeleteRecordsResponse
TopicResult = R.DeleteRecordsTopicResult
PartitionResult = TopicResult.DeleteRecordsPartitionResult

HIGH_WATERMARK = -1


@handles(ApiKey.DeleteRecords)
async def delete_records(ctx: Context, request):
    topics = []
    for topic in request.topics:
        partitions = []
        for part in topic.partitions:
            if ctx.allowed(Operation.DELETE, ResourceType.TOPIC, topic.name):
                error, low_watermark = await _delete(ctx.broker, topic.name, part.partition_index, part.offset)
            else:
                error, low_watermark = ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1
            partitions.append(PartitionResult(partition_index=part.partition_index, low_watermark=low_watermark,
                                              error_code=error))
        topics.append(TopicResult(name=topic.name, partitions=partitions))
    return R(throttle_time_ms=0, topics=topics)


async def _delete(broker: BrokerView, name, index, offset) -> tuple[ErrorCode, int]:
    if broker.is_internal(name):
        return ErrorCode.INVALID_TOPIC, -1
    topic = broker.topics.get(name)
    try:
        partition = broker.partition(name, index)
    except KafkaError as error:
        return error.code, -1
    if topic is None:  # deleted while its partitions are being dropped
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1
    if "delete" not in broker.topic_config(topic, "cleanup.policy").split(","):
        return ErrorCode.POLICY_VIOLATION, -1
    ledger = partition.ledger
    target = ledger.high_watermark if offset == HIGH_WATERMARK else offset
    if not 0 <= target <= ledger.high_watermark:
        return ErrorCode.OFFSET_OUT_OF_RANGE, -1
    if target >= ledger.log_start_offset:
        # Also at the current start: drops ledgers a restart left wholly below it.
        await ledger.trim_before(target)
    return ErrorCode.NONE, ledger.log_start_offset
