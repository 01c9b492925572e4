"""DescribeProducers: the idempotent producers a partition's producer state knows.

Each gets its id, epoch, its last batch's last sequence and max timestamp, as
Kafka's ProducerStateManager reports them, and the first offset of its open transaction
(-1 when none): kafka-transactions abort and find-hanging look for it. The coordinator
epoch is always -1 (markers do not carry it into the producer state here). The state is
what the broker holds in memory, rebuilt on start from the retained ``kafka`` and
``mixed_kafka`` entries: unlike Kafka, whose producer snapshots keep a producer until
``producer.id.expiration.ms``, a restart forgets producers whose batches all lie below
the log start or were stored in the ``pulsar`` format.
"""
from kafka.protocol.admin import DescribeProducersResponse
from kafka.protocol.api_key import ApiKey

from kgate.metadata.acls import Operation, ResourceType
from kgate.protocol.error_codes import ErrorCode

from ..partition_router import Client
from ..partition_router import Operation as Route
from . import Context, handles
from .broker_view import per_partition

R = DescribeProducersResponse
TopicResult = R.TopicResponse
PartitionResult = TopicResult.PartitionResponse
State = PartitionResult.ProducerState

NO_COORDINATOR_EPOCH = -1
NO_TRANSACTION = -1


@handles(ApiKey.DescribeProducers)
async def describe_producers(ctx: Context, request):
    async def answer(index, served):
        partition = served.partition
        return PartitionResult(
            partition_index=index, error_code=ErrorCode.NONE, error_message=None,
            active_producers=[State(producer_id=p.producer_id, producer_epoch=p.epoch,
                                    last_sequence=p.last_sequence, last_timestamp=p.last_timestamp,
                                    coordinator_epoch=NO_COORDINATOR_EPOCH,
                                    current_txn_start_offset=partition.transactions.ongoing.get(
                                        p.producer_id, NO_TRANSACTION))
                              for p in partition.producers.active()])

    def refused(name):
        return lambda index, error: PartitionResult(partition_index=index, error_code=error.code,
                                                    error_message=f"no partition {name}-{index}", active_producers=[])

    return R(throttle_time_ms=0, topics=[
        TopicResult(name=topic.name, partitions=await per_partition(
            ctx.broker, Client.of(ctx.connection), topic.name, topic.partition_indexes, lambda index: index, answer,
            refused(topic.name), allowed=ctx.allowed(Operation.READ, ResourceType.TOPIC, topic.name),
            operation=Route.OWNED))
        for topic in request.topics])
