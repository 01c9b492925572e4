"""ListOffsets: earliest, latest (the last stable offset for read_committed), by timestamp,
and max timestamp.

v0 (Kafka 0.10 and older clients) answers a list of offsets: the log end and then
the start of every ledger, newest first, up to ``max_num_offsets`` for latest, and
the log start for earliest.
"""
from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer import ListOffsetsResponse

from kgate.metadata.acls import Operation, ResourceType
from kgate.protocol import conversion
from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.errors import KafkaError
from kgate.storage.entry_formats import decode_entry
from kgate.storage.ledger import CorruptLedger

from ..partition_router import Client, Followed, Local
from ..partition_router import Operation as Route
from ..partition_transactions import READ_COMMITTED
from . import Context, handles
from .broker_view import per_partition

R = ListOffsetsResponse
P = R.ListOffsetsTopicResponse.ListOffsetsPartitionResponse

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5


@handles(ApiKey.ListOffsets)
async def list_offsets(ctx: Context, request):
    async def answer(part, served):
        partition = served.partition
        if isinstance(served, Local) and served.damaged_from is not None and \
                part.timestamp not in (EARLIEST, EARLIEST_LOCAL):
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR)  # only the log start lies before the damage
        if ctx.version == 0:
            return _old_style(partition, part)
        try:
            offset, timestamp = await _lookup(partition.ledger, part.timestamp)
            if part.timestamp == LATEST and ctx.version >= 2 and request.isolation_level == READ_COMMITTED:
                offset = partition.transactions.last_stable_offset(offset)
        except CorruptLedger as damage:
            if isinstance(served, Followed):
                raise KafkaError(ErrorCode.NOT_LEADER_FOR_PARTITION) from None  # the owner's to judge
            ctx.broker.take_offline(partition.topic, partition.index, damage)
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR) from None
        # No offset found (-1: an empty log's max timestamp, a time after every record): no epoch either, as Kafka.
        return P(partition_index=part.partition_index, error_code=ErrorCode.NONE, timestamp=timestamp, offset=offset,
                 leader_epoch=partition.leader_epoch if offset >= 0 else -1)

    def refused(part, error):
        return P(partition_index=part.partition_index, error_code=error.code, timestamp=-1, offset=-1,
                 old_style_offsets=[])

    return R(throttle_time_ms=0, topics=[
        R.ListOffsetsTopicResponse(name=topic.name, partitions=await per_partition(
            ctx.broker, Client.of(ctx.connection), topic.name, topic.partitions, lambda part: part.partition_index,
            answer, refused, allowed=ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, topic.name),
            operation=Route.DESCRIBE))
        for topic in request.topics])


async def _lookup(ledger, timestamp) -> tuple[int, int]:
    if timestamp == LATEST:
        return ledger.high_watermark, -1
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return ledger.log_start_offset, -1
    if timestamp == LATEST_TIERED:
        return -1, -1
    if timestamp == MAX_TIMESTAMP:
        entries = await ledger.entries_with_max_timestamp()
        if not entries:
            return -1, -1
        best = entries[0].header.max_timestamp
        found = _first_record(entries[0], ledger.log_start_offset, lambda ts: ts == best)
    else:
        entries = await ledger.entries_from_timestamp(timestamp)
        found = entries and _first_record(entries[0], ledger.log_start_offset, lambda ts: ts >= timestamp)
    return found if found else (-1, -1)


def _first_record(stored, start: int, wanted) -> tuple[int, int] | None:
    """Offset and timestamp of the first record in ``stored`` from offset ``start`` on for which
    ``wanted(timestamp)`` holds. An entry may begin before the log start (DeleteRecords moves it
    to any offset), and records before it are deleted, whatever their timestamps.

    Per-record work (it decompresses the entry), for lookups by timestamp only.
    """
    for record in conversion.read(decode_entry(stored)):
        if record.offset >= start and wanted(record.timestamp):
            return record.offset, record.timestamp
    return None


def _old_style(partition, part):
    ledger = partition.ledger
    if part.timestamp == EARLIEST:
        offsets = [ledger.log_start_offset]
    else:
        offsets = [ledger.high_watermark] + sorted(ledger.ledger_first_offsets(), reverse=True)
        offsets = list(dict.fromkeys(o for o in offsets if o >= ledger.log_start_offset))
    return P(partition_index=part.partition_index, error_code=ErrorCode.NONE,
             old_style_offsets=offsets[:max(part.max_num_offsets, 0)])
