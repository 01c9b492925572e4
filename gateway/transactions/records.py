"""The records the transaction coordinator keeps in ``__transaction_state``, as Kafka lays them out.

Key: int16 version 0, then the transactional id. Value: int16 version, then the
producer id and epoch, timeout, status, partitions and timestamps. Records are
magic-2 batches appended like the group coordinator's, so the partition replays with
the ordinary read path.
"""
from collections import defaultdict

from kafka.protocol.api_data import ApiData

from ..coordinator.record_codec import CorruptRecord as CorruptRecord  # what decode raises
from ..coordinator.record_codec import decoding, key_version, unknown_key_version
from . import schemas
from .machine import TxnMetadata, TxnState


class TransactionLogKey(ApiData, load_json=schemas):  # type: ignore[call-arg]  # kafka-python's untyped class keyword
    pass


class TransactionLogValue(ApiData, load_json=schemas):  # type: ignore[call-arg]  # kafka-python's untyped class keyword
    pass


KEY_VERSION = 0
VALUE_VERSION = 0


def key(transactional_id: str) -> bytes:
    return TransactionLogKey(transactional_id=transactional_id).encode(version=KEY_VERSION)


def value(txn: TxnMetadata) -> bytes:
    by_topic: dict[str, list[int]] = defaultdict(list)
    for topic, index in sorted(txn.partitions):
        by_topic[topic].append(index)
    partitions = [TransactionLogValue.PartitionsSchema(topic=topic, partition_ids=ids)
                  for topic, ids in by_topic.items()]
    return TransactionLogValue(
        producer_id=txn.producer_id, producer_epoch=txn.epoch, transaction_timeout_ms=txn.timeout_ms,
        transaction_status=int(txn.state), transaction_partitions=partitions,
        transaction_last_update_timestamp_ms=txn.update_ms,
        transaction_start_timestamp_ms=txn.start_ms).encode(version=VALUE_VERSION)


def decode(key_bytes: bytes, value_bytes: bytes | None) -> tuple[str, TxnMetadata | None]:
    """The transactional id and its metadata (None: a tombstone, the id expired)."""
    with decoding():
        version = key_version(key_bytes)
        if version != KEY_VERSION:
            raise unknown_key_version(version)
        transactional_id = TransactionLogKey.decode(key_bytes[2:], version=version, header=False).transactional_id
        if value_bytes is None:
            return transactional_id, None
        v = TransactionLogValue.decode(value_bytes)
        partitions = frozenset((p.topic, index) for p in v.transaction_partitions or () for index in p.partition_ids)
        return transactional_id, TxnMetadata(
            transactional_id, v.producer_id, v.producer_epoch, v.transaction_timeout_ms,
            TxnState(v.transaction_status), partitions, v.transaction_start_timestamp_ms,
            v.transaction_last_update_timestamp_ms)
