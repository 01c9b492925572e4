"""Writing a DataFrame to topics, batch or streaming, through an idempotent producer.

The columns are those of Spark's Kafka sink: ``value`` (required), ``key``,
``topic`` (unless the ``topic`` option names one for every row; the option wins),
``partition`` and ``headers``; key and value may be string or binary. Each task
produces its rows with ``enable.idempotence`` (no duplicates from the producer's own
retries, order kept per partition) and fails if any record is not acknowledged, so
Spark retries or fails the job instead of reporting a write that did not happen. As
with Spark's Kafka sink, a task retried after a partial write may write some rows
twice: delivery is at least once.
"""
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from confluent_kafka import KafkaException, Producer
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructType

from .errors import BrokerError, OptionError, reported_alone
from .options import WriteOptions

# Java's producer default, which Spark's Kafka sink inherits (librdkafka's is 300 s).
DEFAULT_DELIVERY_TIMEOUT_MS = 120_000
_BYTES = (BinaryType, StringType)
HEADERS_TYPE = "array<struct<key:string,value:binary>>"


@dataclass
class Written(WriterCommitMessage):
    records: int


def check_schema(options: WriteOptions, schema: StructType) -> None:
    """Refuse, before any task starts, a DataFrame the sink could not write row by row."""
    fields = {field.name: field.dataType for field in schema.fields}
    expected = {"key": _BYTES, "value": _BYTES, "topic": (StringType,), "partition": (IntegerType,)}
    if "value" not in fields:
        raise OptionError("value", "the DataFrame needs a 'value' column (string or binary)")
    if options.topic is None and "topic" not in fields:
        raise OptionError("topic", "set the 'topic' option or give the DataFrame a 'topic' column")
    for name, types in expected.items():
        if name in fields and not isinstance(fields[name], types):
            allowed = " or ".join(t.typeName() for t in types)
            raise OptionError(name, f"column '{name}' must be {allowed}, not {fields[name].simpleString()}")
    headers = fields.get("headers")
    if headers is not None and not (isinstance(headers, ArrayType) and headers.elementType.simpleString()
                                    == "struct<key:string,value:binary>"):
        raise OptionError("headers", f"column 'headers' must be {HEADERS_TYPE}, not {headers.simpleString()}")


def _column(batch: pa.RecordBatch, name: str) -> list:
    index = batch.schema.get_field_index(name)
    return batch.column(index).to_pylist() if index >= 0 else [None] * batch.num_rows


def produce_batches(options: WriteOptions, batches: Iterator[pa.RecordBatch]) -> int:
    """Produce every row; BrokerError unless every record was acknowledged."""
    config = options.client.librdkafka({"linger.ms": 5, "delivery.timeout.ms": DEFAULT_DELIVERY_TIMEOUT_MS},
                                       {"enable.idempotence": True, "acks": "all"})
    try:
        producer = Producer(config)
    except KafkaException as exc:
        raise BrokerError(f"kafka.* options rejected by the Kafka producer: {exc.args[0].str()}") from None
    failures = []

    def delivered(error, message):
        if error is not None:
            failures.append(f"{message.topic()}-{message.partition()}: {error.str()}")

    count = 0
    for batch in batches:
        keys, values, topics, partitions, headers = (_column(batch, name) for name in
                                                     ("key", "value", "topic", "partition", "headers"))
        for i in range(batch.num_rows):
            topic = options.topic or topics[i]
            if topic is None:
                raise OptionError("topic", f"row {count} has a null topic and no 'topic' option is set")
            record = {"key": keys[i], "value": values[i], "on_delivery": delivered}
            if partitions[i] is not None:
                record["partition"] = partitions[i]
            if headers[i]:
                record["headers"] = [(h["key"], h["value"]) for h in headers[i]]
            while True:
                try:
                    producer.produce(topic, **record)
                    break
                except BufferError:  # the local queue is full: wait for deliveries to drain it
                    producer.poll(0.1)
                except KafkaException as exc:  # refused before sending: an unknown partition, too large
                    raise BrokerError(f"writing row {count} to {topic}: {exc.args[0].str()}") from None
            count += 1
            if failures:
                break
        producer.poll(0)
        if failures:
            break
    undelivered = producer.flush(int(config["delivery.timeout.ms"]) / 1000 + 5)
    if failures or undelivered:
        raise BrokerError(f"writing to kafka.bootstrap.servers={options.client.bootstrap}: "
                          f"{len(failures)} records failed, {undelivered} not acknowledged"
                          + (f"; first failure {failures[0]}" if failures else ""))
    return count


class _Producing:
    def __init__(self, options: WriteOptions, schema: StructType, overwrite: bool):
        if overwrite:
            raise OptionError("mode", "overwrite is not possible on a topic; use append (Spark refuses it too)")
        check_schema(options, schema)
        self.options = options

    @reported_alone
    def write(self, iterator: Iterator[pa.RecordBatch]) -> Written:
        return Written(produce_batches(self.options, iterator))


class BatchWriter(_Producing, DataSourceArrowWriter):
    def commit(self, messages) -> None:
        """Nothing to do: each record was acknowledged by the broker before its task ended."""


class StreamWriter(_Producing, DataSourceStreamArrowWriter):
    def commit(self, messages, batchId: int) -> None:
        """Nothing to do: each record was acknowledged by the broker before its task ended."""

    def abort(self, messages, batchId: int) -> None:
        """Nothing can be taken back from a topic; Spark re-runs the micro-batch (at least once)."""
