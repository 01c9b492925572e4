"""KgateReadEnd: a partition owner tells a broker serving reads for it how far it may read.

The asking broker reads the owner's ledgers from shared storage for clients in its
own zone (gateway/followers.py) and must never serve past the owner's high
watermark. A request with ``max_wait_ms`` is a long poll: the owner answers as soon
as one of the asked high watermarks differs from the one the asker knows, or when the
wait ends, so a consumer tailing through another zone's broker waits no longer than
one reading from the owner, plus a round trip. The answer also names how far the owner's
store has written (object storage: its newest confirmed WAL object), so the asker reads the
new objects without listing them. Broker to broker only, like WriteTxnMarkers: it needs
CLUSTER_ACTION on the cluster.
"""
from kgate.metadata.acls import CLUSTER_NAME, Operation, ResourceType
from kgate.protocol.api_versions import KGATE_READ_END
from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.errors import KafkaError
from kgate.protocol.messages import KgateReadEndResponse
from kgate.storage.store_capabilities import TailHints

from . import Context, handles
from .waiters import appended

R = KgateReadEndResponse


@handles(KGATE_READ_END)
async def read_end(ctx: Context, request):
    broker = ctx.broker
    permitted = ctx.allowed(Operation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME)
    asked = []  # (topic, index, known high watermark, partition or None, error)
    for topic in request.topics:
        for part in topic.partitions:
            partition, error = None, ErrorCode.NONE
            try:
                if not permitted:
                    raise KafkaError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
                partition = broker.partition(topic.name, part.partition_index)
            except KafkaError as refused:
                error = refused.code
            asked.append((topic.name, part.partition_index, part.known_high_watermark, partition, error))
    ledgers = [partition.ledger for _, _, _, partition, _ in asked if partition is not None]
    unchanged = all(partition is not None and partition.ledger.high_watermark == known
                    for _, _, known, partition, _ in asked)
    if request.max_wait_ms > 0 and asked and unchanged:
        await appended(ledgers, request.max_wait_ms / 1000)
    topics: dict[str, list] = {}
    for name, index, _, partition, error in asked:
        ledger = partition.ledger if partition is not None else None
        topics.setdefault(name, []).append(R.ReadEndTopic.ReadEndPartition(
            partition_index=index, error_code=error, high_watermark=ledger.high_watermark if ledger else -1,
            log_start_offset=ledger.log_start_offset if ledger else -1))
    # Read after the high watermarks: the objects holding them are stored at or before it.
    store = broker.ledgers
    position = store.position() if permitted and isinstance(store, TailHints) else None
    return R(throttle_time_ms=0, store_position=position,
             topics=[R.ReadEndTopic(name=name, partitions=partitions) for name, partitions in topics.items()])
