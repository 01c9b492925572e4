"""The ``kafka`` entry format: the produced batch bytes, unchanged but for offsets.

The fast path: a magic-2 batch is stored as sent (any codec) after its baseOffset
and partitionLeaderEpoch are set, and served to magic-2 readers byte for byte.
"""
from protocol.record_batch import LOG_OVERHEAD, assigned_prefix

from . import EntryFormat, ProducedBatch, register

_PREFIX_SIZE = LOG_OVERHEAD + 4


class KafkaFormat(EntryFormat):
    name = "kafka"
    code = 0

    def encode(self, batch: ProducedBatch, base_offset: int, leader_epoch: int) -> list:
        return [assigned_prefix(batch.header, base_offset, leader_epoch), batch.data[_PREFIX_SIZE:]]

    def decode(self, payload: memoryview, max_magic: int):
        return payload


register(KafkaFormat())
