"""AlterPartitionReassignments and ListPartitionReassignments: Kafka's way to move a partition.

kgate keeps one replica per partition in shared storage, so a reassignment moves
ownership and copies nothing: the first broker of the requested replica list becomes
the partition's owner, written as a placement override (metadata.placements) that
every broker follows as it follows the hash. Validation and errors follow Kafka's
controller (ReplicationControlManager.alterPartitionReassignment): an unknown topic or
partition is UNKNOWN_TOPIC_OR_PARTITION; an empty list, a broker twice or one not
registered is INVALID_REPLICA_ASSIGNMENT; null replicas cancel a reassignment in
progress, else NO_REASSIGNMENT_IN_PROGRESS; v1's AllowReplicationFactorChange=false
refuses a list of other than one broker with INVALID_REPLICATION_FACTOR. Both need the
cluster permission (ALTER, DESCRIBE), refused as a whole with CLUSTER_AUTHORIZATION_FAILED.

A reassignment is in progress from the override's write until its broker holds the
partition's claim (usually well under a second): ListPartitionReassignments answers
those, with the holder as the replica being removed and the target as the one added,
as Kafka answers a move from one broker to another at replication factor 1. Where
kgate differs: Metadata keeps answering one replica, the owner, whatever the list had.
"""
from kafka.protocol.admin import AlterPartitionReassignmentsResponse, ListPartitionReassignmentsResponse
from kafka.protocol.api_key import ApiKey

from kgate.metadata.acls import CLUSTER_NAME, Operation, ResourceType
from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.errors import KafkaError

from . import Context, handles
from .broker_view import BrokerView
from .partitions import check_replica_list

AR = AlterPartitionReassignmentsResponse
LR = ListPartitionReassignmentsResponse


@handles(ApiKey.AlterPartitionReassignments)
async def alter_partition_reassignments(ctx: Context, request):
    broker = ctx.broker
    if not ctx.allowed(Operation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        refused = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return _altered(request, refused, "Cluster authorization failed.", [
            (topic.name, [(p.partition_index, refused, None) for p in topic.partitions]) for topic in request.topics])
    one_replica = ctx.version >= 1 and not request.allow_replication_factor_change
    ongoing = await broker.reassignments()
    placed: dict[tuple[str, int], int | None] = {}
    answers = []
    for topic in request.topics:
        results: list[tuple[int, int, str | None]] = []
        for part in topic.partitions:
            key = (topic.name, part.partition_index)
            try:
                placed[key] = _target(broker, topic.name, part, one_replica, key in ongoing)
                results.append((part.partition_index, ErrorCode.NONE, None))
            except KafkaError as refused:
                results.append((part.partition_index, refused.code, refused.message))
        answers.append((topic.name, results))
    if placed:
        await broker.reassign(placed)
    return _altered(request, ErrorCode.NONE, None, answers)


def _target(broker: BrokerView, name: str, part, one_replica: bool, in_progress: bool) -> int | None:
    """The broker the partition goes to; None to cancel its reassignment. KafkaError to refuse."""
    topic = broker.topics.get(name)
    if topic is None:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {name}.")
    if not 0 <= part.partition_index < topic.partitions:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                         f"Unable to find partition {name}:{part.partition_index}.")
    replicas = part.replicas
    if replicas is None:
        if not in_progress:
            raise KafkaError(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS)  # Kafka 4.4 says no more
        return None
    check_replica_list(replicas, broker.live_broker_ids())
    if one_replica and len(replicas) != 1:
        raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                         f"The replication factor is changed from 1 to {len(replicas)} but "
                         "AllowReplicationFactorChange is false.")
    return replicas[0]


def _altered(request, error: int, message: str | None, answers: list):
    """The answer, echoing v1's AllowReplicationFactorChange as Kafka 4.4 does."""
    return AR(throttle_time_ms=0, allow_replication_factor_change=request.allow_replication_factor_change,
              error_code=error, error_message=message,
              responses=[AR.ReassignableTopicResponse(name=name, partitions=[
                  AR.ReassignableTopicResponse.ReassignablePartitionResponse(
                      partition_index=index, error_code=code, error_message=text) for index, code, text in results])
                  for name, results in answers])


@handles(ApiKey.ListPartitionReassignments)
async def list_partition_reassignments(ctx: Context, request):
    if not ctx.allowed(Operation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        return LR(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                  error_message="Cluster authorization failed.", topics=[
                      LR.OngoingTopicReassignment(name=topic.name, partitions=[
                          LR.OngoingTopicReassignment.OngoingPartitionReassignment(
                              partition_index=index, replicas=[], adding_replicas=[], removing_replicas=[])
                          for index in topic.partition_indexes]) for topic in request.topics or []])
    ongoing = await ctx.broker.reassignments()
    if request.topics is not None:
        asked = {(topic.name, index) for topic in request.topics for index in topic.partition_indexes}
        ongoing = {key: moving for key, moving in ongoing.items() if key in asked}
    by_topic: dict[str, list] = {}
    for (name, index), (holder, target) in sorted(ongoing.items()):
        removing = [holder] if holder is not None else []
        by_topic.setdefault(name, []).append(LR.OngoingTopicReassignment.OngoingPartitionReassignment(
            partition_index=index, replicas=removing + [target], adding_replicas=[target],
            removing_replicas=removing))
    return LR(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
              topics=[LR.OngoingTopicReassignment(name=name, partitions=parts) for name, parts in by_topic.items()])
