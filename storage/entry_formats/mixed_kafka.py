"""The ``mixed_kafka`` entry format: every record validated, every entry one magic-2 batch.

KoP's answer to producers whose batches cannot be stored as sent: legacy magic 0/1
sets (0.9/0.10 clients, Sarama's compressed v1 sets) are up-converted to one magic-2
batch with the offsets Kafka would assign, and a topic's ``compression.type`` other
than ``producer`` recompresses (a transactional batch stays transactional, with its
producer id, epoch and sequence). Magic-2 batches already in the wanted codec are
stored as sent once their records have been read, so readers of the log only ever
meet magic-2 batches; on a LogAppendTime topic a rebuilt batch carries the broker's time
and timestamp type as the produced one would have. The price is per-record work on every produce.
"""
from kgate.protocol import conversion, log_append_time
from kgate.protocol.record_batch import read_header

from . import ProducedRecords, register
from .kafka import KafkaFormat


class MixedKafkaFormat(KafkaFormat):
    name = "mixed_kafka"
    code = 1

    def stored_magic(self, produced: ProducedRecords) -> int:
        return 2

    def encode(self, produced: ProducedRecords, base_offset: int, leader_epoch: int, codec: int | None) -> list:
        records = produced.records()
        target = produced.codec if codec is None else codec
        if produced.batch is not None and target == produced.codec:
            return super().encode(produced, base_offset, leader_epoch, codec)
        absolute = [record._replace(offset=base_offset + record.offset) for record in records]
        transactional = produced.batch is not None and produced.batch.is_transactional
        batch = conversion.write(absolute, 2, target, produced.producer, leader_epoch, transactional)
        if produced.log_append_time is not None:  # the rebuilt batch is the broker's time too
            return [log_append_time.stamp_batch(batch, read_header(batch), produced.log_append_time)[0]]
        return [batch]


register(MixedKafkaFormat())
