"""A coordinator's log: an internal topic partition of keyed records, last value per key wins.

``__consumer_offsets`` and ``__transaction_state`` are both kept this way, as in
Kafka: records are appended as uncompressed magic-2 batches in the ``kafka`` entry
format, and a coordinator that gains the partition replays it by keeping each key's
last value. Offsets committed inside a transaction are appended as that producer's
transactional batches and count only once its COMMIT marker follows; replay hands
back the ones whose marker has not come yet.
"""
import asyncio
import time
from dataclasses import dataclass, field

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from kgate.protocol import control_batch, record_batch
from kgate.storage import entry_formats
from kgate.storage.entry_formats import ProducedRecords

RECORDS_PER_BATCH = 5000
NO_PRODUCER = (-1, -1)


def build_batch(records: list[tuple[bytes, bytes | None]], producer: tuple[int, int] = NO_PRODUCER) -> bytes:
    """One uncompressed magic-2 batch holding ``records`` (offsets assigned on append);
    transactional when ``producer`` (id, epoch) is given."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=producer[0] >= 0,
                                        producer_id=producer[0], producer_epoch=producer[1], base_sequence=-1,
                                        batch_size=2**31 - 1)
    now = int(time.time() * 1000)
    for i, (key, value) in enumerate(records):
        builder.append(i, timestamp=now, key=key, value=value, headers=[])
    return bytes(builder.build())


def append(partition, pairs: list[tuple[bytes, bytes | None]],
           producer: tuple[int, int] = NO_PRODUCER) -> list[asyncio.Future]:
    """Append ``(key, value)`` records; the futures complete when they are durable.

    The caller has awaited ``prepare_append`` and does not await before this returns,
    so what it applies to memory alongside keeps the log's order.
    """
    kafka_format = entry_formats.by_name("kafka")
    durable = []
    for start in range(0, len(pairs), RECORDS_PER_BATCH):
        data = build_batch(pairs[start:start + RECORDS_PER_BATCH], producer)
        header = record_batch.validate(data)
        produced = ProducedRecords.of_batch(memoryview(data), header)
        base, done = partition.ledger.append(
            header.record_count, header.max_timestamp, 2, kafka_format.code,
            lambda base, p=produced: kafka_format.encode(p, base, partition.leader_epoch, None))
        if header.is_transactional:
            partition.transactions.batch_appended(header.producer_id, base)
        durable.append(done)
    return durable


async def durable(futures: list[asyncio.Future]) -> None:
    """Return once the futures :func:`append` gave are done; raise the first failure.

    They are the ledger's confirm rounds, shared by every append of a round (other
    groups' commits, produces). A writer cancelled with its connection must not cancel
    them, as ``gather`` does its children: the other writers of the round would never
    be answered, and their clients' heartbeats, answered in order behind, would stop.
    """
    if futures:
        await asyncio.wait(futures)
    for future in futures:
        future.result()


@dataclass
class Replayed:
    latest: dict[bytes, bytes | None] = field(default_factory=dict)
    count: int = 0
    # Per producer id, the records of its transaction still waiting for a marker.
    open_transactions: dict[int, dict[bytes, bytes | None]] = field(default_factory=dict)


async def replay(ledger) -> Replayed:
    """Each key's last committed value, how many records were read, and open transactions'
    records. Only each key's final value is decoded by the caller: replay costs a dict
    store per record."""
    offset = ledger.log_start_offset
    replayed = Replayed()
    while offset < ledger.high_watermark:
        entries = await ledger.read(offset, 1 << 20)
        for stored in entries:
            _replay_payload(entry_formats.decode_entry(stored), ledger.log_start_offset, replayed)
        offset = entries[-1].header.last_offset + 1
    return replayed


def _replay_payload(payload, log_start: int, replayed: Replayed) -> None:
    for pos, header in record_batch.iter_headers(payload):
        if header.is_control:
            pending = replayed.open_transactions.pop(header.producer_id, {})
            if control_batch.marker_type(payload, pos) == control_batch.COMMIT:
                replayed.latest.update(pending)
            continue
        target = (replayed.open_transactions.setdefault(header.producer_id, {}) if header.is_transactional
                  else replayed.latest)
        for record in DefaultRecordBatch(bytes(payload[pos:pos + header.size])):
            if record.offset >= log_start:
                target[record.key] = record.value
                replayed.count += 1
