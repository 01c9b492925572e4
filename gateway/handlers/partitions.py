"""CreatePartitions: grow a topic's partition count.

Errors follow Kafka's controller (ReplicationControlManager.createPartitions): a topic
named twice is INVALID_REQUEST and neither entry is applied; an unknown topic is
UNKNOWN_TOPIC_OR_PARTITION; a count that is not larger is INVALID_PARTITIONS; manual
assignments must give one replica list per new partition, each non-empty, without a
broker twice and naming only registered brokers, else INVALID_REPLICATION_ASSIGNMENT.
Replicas are the ledger store's business, so an accepted assignment changes nothing
about where data lives. Where kgate differs: Kafka lets clients grow
``__consumer_offsets``; kgate refuses with POLICY_VIOLATION (as for altering its
configs), because a group's coordinator partition is ``hash(group) % partitions``
and growing the topic would strand every group's stored state. Adding more than
10,000 partitions at once is POLICY_VIOLATION, the limit of Kafka's controller on the
records one operation may write.
"""
from collections import Counter
from collections.abc import Container

from kafka.protocol.admin import CreatePartitionsResponse
from kafka.protocol.api_key import ApiKey

from kgate.metadata.acls import Operation, ResourceType
from kgate.metadata.cluster import NotAnIncrease, UnknownTopic
from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.errors import KafkaError

from . import Context, handles
from .broker_view import BrokerView, InternalTopic

# Kafka's controller refuses an operation that would write more records than this.
MAX_NEW_PARTITIONS = 10_000

R = CreatePartitionsResponse
Result = R.CreatePartitionsTopicResult


@handles(ApiKey.CreatePartitions)
async def create_partitions(ctx: Context, request):
    named = Counter(topic.name for topic in request.topics)
    results = []
    for name in (name for name, times in named.items() if times > 1):
        results.append(Result(name=name, error_code=ErrorCode.INVALID_REQUEST, error_message="Duplicate topic name."))
    for topic in request.topics:
        if named[topic.name] > 1:
            continue
        error, message = ErrorCode.NONE, None
        try:
            ctx.require(Operation.ALTER, ResourceType.TOPIC, topic.name)
            await ctx.broker.create_partitions(topic.name, topic.count, _check(ctx.broker, topic),
                                               request.validate_only)
        except KafkaError as refused:
            error, message = refused.code, refused.message
        except UnknownTopic:
            error, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {topic.name!r}"
        except InternalTopic:
            error, message = ErrorCode.POLICY_VIOLATION, f"{topic.name} is internal; kgate fixes its partition count"
        except NotAnIncrease as exc:
            error, message = ErrorCode.INVALID_PARTITIONS, f"Topic already has {exc.args[0]} partition(s)."
        results.append(Result(name=topic.name, error_code=error, error_message=message))
    return R(throttle_time_ms=0, results=results)


def _check(broker: BrokerView, request_topic):
    """What to refuse, given the topic as it is under the broker's topic lock."""
    count, assignments = request_topic.count, request_topic.assignments

    def check(topic):
        if count == topic.partitions:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {topic.partitions} partition(s).")
        if count < topic.partitions:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"The topic {topic.name} currently has {topic.partitions} "
                                                         f"partition(s); {count} would not be an increase.")
        additional = count - topic.partitions
        if additional > MAX_NEW_PARTITIONS:
            raise KafkaError(ErrorCode.POLICY_VIOLATION, "Unable to perform excessively large batch operation.")
        if assignments is None:
            return
        if len(assignments) != additional:
            raise KafkaError(ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
                           f"Attempted to add {additional} additional partition(s), but only {len(assignments)} "
                           "assignment(s) were specified.")
        for assignment in assignments:
            check_replica_list(assignment.broker_ids, {broker.node_id})
    return check


def check_replica_list(broker_ids, registered: Container[int]) -> None:
    """Kafka's controller's check of a manual replica list (validateManualPartitionAssignment),
    for CreatePartitions and AlterPartitionReassignments alike: KafkaError if it is empty,
    names a broker not ``registered`` or one broker twice (checked in broker id order)."""
    if not broker_ids:
        raise KafkaError(ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
                         "The manual partition assignment includes an empty replica list.")
    for broker_id, times in sorted(Counter(broker_ids).items()):
        if broker_id not in registered:
            raise KafkaError(ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
                             f"The manual partition assignment includes broker {broker_id}, but no such broker is "
                             "registered.")
        if times > 1:
            raise KafkaError(ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
                             f"The manual partition assignment includes the broker {broker_id} more than once.")
