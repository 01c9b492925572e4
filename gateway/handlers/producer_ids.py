"""InitProducerId for idempotent and transactional producers.

An idempotent producer re-initialising with its id and epoch (KIP-360, v3+) keeps its
id and gets the next epoch. A transactional id goes to its transaction coordinator,
which keeps one producer id per transactional id and bumps its epoch on every init,
fencing the older ones (aborting what they left open first).
"""
from kafka.protocol.api_key import ApiKey
from kafka.protocol.producer import InitProducerIdResponse

from kgate.metadata.acls import CLUSTER_NAME, Operation, ResourceType
from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.errors import KafkaError

from . import Context, handles
from .transactions import error_for

MAX_EPOCH = 32767


@handles(ApiKey.InitProducerId)
async def init_producer_id(ctx: Context, request):
    # Kafka 3's rule (KIP-679): an idempotent producer needs IDEMPOTENT_WRITE on the cluster
    # or WRITE on some topic.
    if request.transactional_id is None and not (
            ctx.allowed_somewhere(Operation.WRITE, ResourceType.TOPIC)
            or ctx.allowed(Operation.IDEMPOTENT_WRITE, ResourceType.CLUSTER, CLUSTER_NAME)):
        return InitProducerIdResponse(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                      producer_id=-1, producer_epoch=-1)
    if request.transactional_id is not None:
        return await _init_transactional(ctx, request)
    if ctx.version >= 3 and request.producer_id >= 0 and 0 <= request.producer_epoch < MAX_EPOCH - 1:
        return InitProducerIdResponse(throttle_time_ms=0, error_code=ErrorCode.NONE,
                                      producer_id=request.producer_id, producer_epoch=request.producer_epoch + 1)
    try:
        producer_id = await ctx.broker.next_producer_id()
    except KafkaError as exc:
        return InitProducerIdResponse(throttle_time_ms=0, error_code=exc.code, producer_id=-1, producer_epoch=-1)
    return InitProducerIdResponse(throttle_time_ms=0, error_code=ErrorCode.NONE,
                                  producer_id=producer_id, producer_epoch=0)


async def _init_transactional(ctx: Context, request):
    transactional_id = request.transactional_id
    expected = (request.producer_id, request.producer_epoch) if ctx.version >= 3 and request.producer_id >= 0 else None
    try:
        ctx.require(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id)
        producer_id, epoch = await ctx.broker.transactions.init_producer(
            transactional_id, request.transaction_timeout_ms, expected)
    except KafkaError as exc:
        return InitProducerIdResponse(throttle_time_ms=0, error_code=error_for(ctx, exc.code), producer_id=-1,
                                      producer_epoch=-1)
    return InitProducerIdResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, producer_id=producer_id,
                                  producer_epoch=epoch)
