"""Transactions (KIP-98): AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit,
DescribeTransactions and ListTransactions; WriteTxnMarkers, which a coordinator sends to
the owner of a partition it does not serve; InitProducerId with a transactional id is in
``producer_ids``. The rules live in ``gateway.transactions``.

Clients older than KIP-588 do not know PRODUCER_FENCED: below the version that
introduced it, a fenced producer is told INVALID_PRODUCER_EPOCH, as Kafka does.
"""
from kafka.protocol.admin import DescribeTransactionsResponse, ListTransactionsResponse
from kafka.protocol.api_key import ApiKey
from kafka.protocol.producer import (
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnResponse,
    EndTxnResponse,
    TxnOffsetCommitResponse,
    WriteTxnMarkersResponse,
)

from kgate.metadata.acls import CLUSTER_NAME, Operation, ResourceType
from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.errors import KafkaError
from kgate.storage.ledger import LedgerFenced, StoreUnavailable

from ..groups import OFFSETS_TOPIC
from ..groups.records import CommittedOffset, now_ms
from ..transactions.machine import TxnMetadata, TxnState
from ..transactions.marker_delivery import Marker
from . import Context, handles
from .offsets import commits_to_store, committed_partitions, store_commits

# The first version of each request whose clients understand PRODUCER_FENCED (KIP-588).
FENCED_SINCE = {ApiKey.InitProducerId: 4, ApiKey.AddPartitionsToTxn: 2, ApiKey.AddOffsetsToTxn: 2,
                ApiKey.EndTxn: 2, ApiKey.TxnOffsetCommit: 3}

APResult = AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult
APPartition = APResult.AddPartitionsToTxnPartitionResult
TOCTopic = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
TOCPartition = TOCTopic.TxnOffsetCommitResponsePartition


def error_for(ctx: Context, error: ErrorCode) -> ErrorCode:
    if error == ErrorCode.PRODUCER_FENCED and ctx.version < FENCED_SINCE[ctx.header.api_key]:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return error


@handles(ApiKey.AddPartitionsToTxn)
async def add_partitions_to_txn(ctx: Context, request):
    broker = ctx.broker
    transactional_id = request.v3_and_below_transactional_id
    asked = [(topic.name, index) for topic in request.v3_and_below_topics for index in topic.partitions]
    results: dict[tuple[str, int], ErrorCode] = {}
    try:
        ctx.require(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id)
    except KafkaError as exc:
        results = dict.fromkeys(asked, exc.code)
    if not results:
        for topic, index in asked:
            known = broker.topics.get(topic)
            if not ctx.allowed(Operation.WRITE, ResourceType.TOPIC, topic):
                results[(topic, index)] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif known is None or not 0 <= index < known.partitions or broker.is_internal(topic):
                results[(topic, index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if results:  # Kafka adds none when any is refused
            results = {tp: results.get(tp, ErrorCode.OPERATION_NOT_ATTEMPTED) for tp in asked}
    if not results:
        try:
            await broker.transactions.add_partitions(transactional_id, request.v3_and_below_producer_id,
                                                     request.v3_and_below_producer_epoch, asked)
            error = ErrorCode.NONE
        except KafkaError as exc:
            error = error_for(ctx, exc.code)
        results = dict.fromkeys(asked, error)
    by_topic: dict[str, list] = {}
    for (topic, index), error in results.items():
        by_topic.setdefault(topic, []).append(APPartition(partition_index=index, partition_error_code=error))
    return AddPartitionsToTxnResponse(throttle_time_ms=0, results_by_topic_v3_and_below=[
        APResult(name=topic, results_by_partition=partitions) for topic, partitions in by_topic.items()])


@handles(ApiKey.AddOffsetsToTxn)
async def add_offsets_to_txn(ctx: Context, request):
    broker = ctx.broker
    try:
        ctx.require(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id)
        ctx.require(Operation.READ, ResourceType.GROUP, request.group_id)
        await broker.transactions.add_partitions(
            request.transactional_id, request.producer_id, request.producer_epoch,
            [(OFFSETS_TOPIC, broker.groups.partition_of(request.group_id))])
        error = ErrorCode.NONE
    except KafkaError as exc:
        error = error_for(ctx, exc.code)
    return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=error)


@handles(ApiKey.EndTxn)
async def end_txn(ctx: Context, request):
    try:
        ctx.require(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id)
        await ctx.broker.transactions.end(request.transactional_id, request.producer_id, request.producer_epoch,
                                          request.committed)
        error = ErrorCode.NONE
    except KafkaError as exc:
        error = error_for(ctx, exc.code)
    return EndTxnResponse(throttle_time_ms=0, error_code=error)


@handles(ApiKey.TxnOffsetCommit)
async def txn_offset_commit(ctx: Context, request):
    """Offsets committed inside a transaction: stored now, visible to the group on COMMIT."""
    broker = ctx.broker
    groups = broker.groups
    version = ctx.version
    member_id = request.member_id if version >= 3 else ""
    generation = request.generation_id if version >= 3 else -1
    try:
        ctx.require(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id)
        ctx.require(Operation.READ, ResourceType.GROUP, request.group_id)
        groups.check_group_id(request.group_id, allow_empty=False)
        # Kafka checks the member only when the producer names one (KIP-447's consumer group metadata).
        error = (groups.check_commit(request.group_id, generation, member_id, request.group_instance_id,
                                     committed_partitions(broker, request.topics))
                 if member_id or generation >= 0 else ErrorCode.NONE)
    except KafkaError as exc:
        error = exc.code
    now = now_ms()
    accepted, results = commits_to_store(
        ctx, request.topics, error,
        lambda p, metadata: CommittedOffset(p.committed_offset, p.committed_leader_epoch if version >= 2 else -1,
                                            metadata, now))
    await store_commits(accepted, results, lambda: groups.commit_in_transaction(
        request.group_id, request.producer_id, request.producer_epoch, accepted))
    return TxnOffsetCommitResponse(throttle_time_ms=0, topics=[
        TOCTopic(name=topic.name, partitions=[
            TOCPartition(partition_index=p.partition_index, error_code=results[(topic.name, p.partition_index)])
            for p in topic.partitions])
        for topic in request.topics])


@handles(ApiKey.DescribeTransactions)
async def describe_transactions(ctx: Context, request):
    R = DescribeTransactionsResponse
    states = []
    for transactional_id in request.transactional_ids:
        txn: TxnMetadata | None = None
        try:
            ctx.require(Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, transactional_id)
            txn = ctx.broker.transactions.describe(transactional_id)
            error = ErrorCode.NONE if txn is not None else ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
        except KafkaError as exc:
            error = exc.code
        by_topic: dict[str, list[int]] = {}
        for topic, index in sorted(txn.partitions if txn is not None else ()):
            by_topic.setdefault(topic, []).append(index)
        states.append(R.TransactionState(
            error_code=error, transactional_id=transactional_id,
            transaction_state=txn.state.kafka_name if txn is not None else "",
            transaction_timeout_ms=txn.timeout_ms if txn is not None else 0,
            transaction_start_time_ms=txn.start_ms if txn is not None else -1,
            producer_id=txn.producer_id if txn is not None else -1, producer_epoch=txn.epoch if txn is not None else -1,
            topics=[R.TransactionState.TopicData(topic=t, partitions=p) for t, p in by_topic.items()]))
    return R(throttle_time_ms=0, transaction_states=states)


@handles(ApiKey.ListTransactions)
async def list_transactions(ctx: Context, request):
    """The transactions this broker coordinates (the admin client asks every broker), filtered
    by state, producer id and, from v1, by running longer than ``duration_filter`` ms."""
    R = ListTransactionsResponse
    known = {state.kafka_name for state in TxnState}
    wanted_states = set(request.state_filters)
    wanted_producers = set(request.producer_id_filters)
    min_duration = request.duration_filter if ctx.version >= 1 else -1
    now = now_ms()
    listed = [txn for txn in ctx.broker.transactions.listed()
              if (not wanted_states or txn.state.kafka_name in wanted_states)
              and (not wanted_producers or txn.producer_id in wanted_producers)
              and (min_duration < 0 or (txn.start_ms >= 0 and now - txn.start_ms >= min_duration))
              and ctx.allowed(Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, txn.transactional_id, quietly=True)]
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE,
             unknown_state_filters=sorted(wanted_states - known),
             transaction_states=[R.TransactionState(transactional_id=txn.transactional_id,
                                                    producer_id=txn.producer_id,
                                                    transaction_state=txn.state.kafka_name) for txn in listed])


@handles(ApiKey.WriteTxnMarkers)
async def write_txn_markers(ctx: Context, request):
    """Append the markers a coordinator asks for to the partitions this broker serves."""
    R = WriteTxnMarkersResponse
    permitted = ctx.allowed(Operation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME)
    results = []
    for marker in request.markers:
        topics = []
        for topic in marker.topics:
            partitions = []
            for index in topic.partition_indexes:
                try:
                    if not permitted:
                        raise KafkaError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
                    partition = ctx.broker.partition(topic.name, index)
                    await ctx.broker.markers.append_local(partition, Marker(
                        marker.producer_id, marker.producer_epoch, marker.transaction_result,
                        marker.coordinator_epoch))
                    error = ErrorCode.NONE
                except KafkaError as exc:
                    error = exc.code
                except (OSError, LedgerFenced, StoreUnavailable):
                    # Kafka's answer for a partition it cannot write; the coordinator sends it again.
                    error = ErrorCode.KAFKA_STORAGE_ERROR
                partitions.append(R.WritableTxnMarkerResult.WritableTxnMarkerTopicResult.WritableTxnMarkerPartitionResult(
                    partition_index=index, error_code=error))
            topics.append(R.WritableTxnMarkerResult.WritableTxnMarkerTopicResult(name=topic.name,
                                                                                partitions=partitions))
        results.append(R.WritableTxnMarkerResult(producer_id=marker.producer_id, topics=topics))
    return R(markers=results)
