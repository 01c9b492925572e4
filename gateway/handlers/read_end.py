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

Version 1 is the asker's standing poll (gateway/followers.py): a request naming partitions
opens it on this connection, and each later one names none, only the epoch the last answer
gave; this broker remembers the partitions and what it last answered for them, and answers
with those that moved since (or are refused now: they leave the poll). A small request and
answer per change, as a fetch session (KIP-227) does for fetches. A poll continued with
another epoch than the connection's current one (it was opened again meanwhile) is answered
INVALID_FETCH_SESSION_EPOCH, and the asker opens it again.
"""
from kgate.metadata.acls import CLUSTER_NAME, Operation, ResourceType
from kgate.protocol.api_versions import KGATE_READ_END
from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.errors import KafkaError
from kgate.protocol.messages import KgateReadEndResponse
from kgate.storage.store_capabilities import TailHints

from ..read_end_poll import StandingPoll
from . import Context, handles
from .waiters import appended

R = KgateReadEndResponse


@handles(KGATE_READ_END)
async def read_end(ctx: Context, request):
    broker = ctx.broker
    permitted = ctx.allowed(Operation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME)
    poll: StandingPoll | None = None
    wanted = [(topic.name, part.partition_index, part.known_high_watermark)
              for topic in request.topics for part in topic.partitions]
    if ctx.version >= 1:
        if request.poll_epoch == 0:
            poll = ctx.connection.read_end_poll = StandingPoll()
        else:
            poll = ctx.connection.read_end_poll
            if poll is None or poll.epoch != request.poll_epoch:
                return R(throttle_time_ms=0, error_code=ErrorCode.INVALID_FETCH_SESSION_EPOCH, poll_epoch=0, topics=[])
            wanted = [(name, index, hw) for (name, index), (hw, _) in poll.answered.items()]
    asked = []  # (topic, index, known high watermark, partition or None, error)
    for name, index, known in wanted:
        partition, error = None, ErrorCode.NONE
        try:
            if not permitted:
                raise KafkaError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
            partition = broker.partition(name, index)
        except KafkaError as refused:
            error = refused.code
        asked.append((name, index, known, partition, error))
    ledgers = [partition.ledger for _, _, _, partition, _ in asked if partition is not None]
    unchanged = all(partition is not None and partition.ledger.high_watermark == known
                    for _, _, known, partition, _ in asked)
    if request.max_wait_ms > 0 and asked and unchanged:
        await appended(ledgers, request.max_wait_ms / 1000)
    topics: dict[str, list] = {}
    continued = poll is not None and request.poll_epoch != 0
    for name, index, _, partition, error in asked:
        ledger = partition.ledger if partition is not None else None
        now = (ledger.high_watermark, ledger.log_start_offset) if ledger else (-1, -1)
        if poll is not None:
            if continued and error == ErrorCode.NONE and poll.answered.get((name, index)) == now:
                continue  # the asker knows it
            if error == ErrorCode.NONE:
                poll.answered[(name, index)] = now
            else:
                poll.answered.pop((name, index), None)
        topics.setdefault(name, []).append(R.ReadEndTopic.ReadEndPartition(
            partition_index=index, error_code=error, high_watermark=now[0], log_start_offset=now[1]))
    epoch = 0
    if poll is not None:
        if ctx.connection.read_end_poll is not poll:  # opened again while this waited
            return R(throttle_time_ms=0, error_code=ErrorCode.INVALID_FETCH_SESSION_EPOCH, poll_epoch=0, topics=[])
        poll.epoch = epoch = poll.epoch + 1
    # Read after the high watermarks: the objects holding them are stored at or before it.
    store = broker.ledgers
    position = store.position() if permitted and isinstance(store, TailHints) else None
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, poll_epoch=epoch, store_position=position,
             topics=[R.ReadEndTopic(name=name, partitions=partitions) for name, partitions in topics.items()])
