"""Reading topics: the batch reader, the streaming reader, and the task that reads one
offset range into Arrow record batches.

Planning (which partitions, which offsets) happens in the reader objects; reading
happens in ``read_range``, once per Spark task, on a consumer of its own that is
assigned one partition at one offset: no group, no commits, Spark's checkpoint is the
only record of progress. Records go to Spark as Arrow record batches, column by
column, so no per-row Python tuple is ever built.
"""
import time
from collections.abc import Iterator

import pyarrow as pa
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from . import offsets as O
from .cluster import ClientErrors, Cluster, broker_error, consumer
from .errors import BrokerError, DataLossError, reported_alone
from .options import ReadOptions

# Records per consume() call and so per Arrow batch: big enough to amortize the call,
# small enough to keep a task's memory flat.
BATCH_RECORDS = 10_000
# A task reads one partition from a known offset to a known end, so it asks for big
# fetches: with librdkafka's 1 MiB default a task spends most of its time waiting on
# round trips (3x fewer rows/s in bench/pipeline_read.py). kafka.* options override these.
# read_uncommitted is the Java consumer's default, so Spark's Kafka source reads that way
# (librdkafka's default is read_committed).
READ_DEFAULTS = {"max.partition.fetch.bytes": 32 * 1024 * 1024, "fetch.max.bytes": 64 * 1024 * 1024,
                 "fetch.wait.max.ms": 100, "isolation.level": "read_uncommitted"}
# librdkafka's timestamp kinds (not available, create, log append) as Kafka's ids (-1, 0, 1).
_TIMESTAMP_TYPE = {0: -1, 1: 0, 2: 1}


def _data_loss(options: ReadOptions, message: str) -> None:
    """Raise, unless ``failOnDataLoss`` is false (then the caller skips what is gone)."""
    if options.fail_on_data_loss:
        raise DataLossError(f"{message}; set failOnDataLoss=false to skip what is gone and go on")


def _arrow_batch(messages: list, part: O.PartitionRange, schema: pa.Schema, include_headers: bool) -> pa.RecordBatch:
    stamps = [m.timestamp() for m in messages]
    columns = [
        pa.array([m.key() for m in messages], pa.binary()),
        pa.array([m.value() for m in messages], pa.binary()),
        pa.array([part.topic] * len(messages), pa.string()),
        pa.array([part.partition] * len(messages), pa.int32()),
        pa.array([m.offset() for m in messages], pa.int64()),
        pa.array([ms * 1000 for _kind, ms in stamps], pa.int64()).cast(schema.field("timestamp").type),
        pa.array([_TIMESTAMP_TYPE[kind] for kind, _ms in stamps], pa.int32()),
    ]
    if include_headers:
        columns.append(pa.array([[{"key": k, "value": v} for k, v in (m.headers() or ())] for m in messages],
                                schema.field("headers").type))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def read_range(options: ReadOptions, part: O.PartitionRange, schema: StructType) -> Iterator[pa.RecordBatch]:
    """The records of ``part`` in offset order, as Arrow batches of ``schema``.

    Offsets no longer in the log (trimmed by retention or DeleteRecords) are data
    loss; ``kafkaConsumer.pollTimeoutMs`` without a record fails the task rather than
    letting it wait on a broker that is gone.
    """
    arrow_schema = to_arrow_schema(schema, timezone="UTC")
    where = f"{part.topic}-{part.partition}"
    poll_timeout = options.poll_timeout_ms / 1000
    errors = ClientErrors()
    # Partition EOF tells a range that ends in offsets holding no record (transaction
    # markers of a Kafka cluster) that it is done, instead of waiting for the deadline.
    reader = consumer(options.client, errors, READ_DEFAULTS,
                      {"auto.offset.reset": "error", "enable.partition.eof": True})
    try:
        try:
            low, high = reader.get_watermark_offsets(KafkaTopicPartition(part.topic, part.partition),
                                                     timeout=options.client.api_timeout_ms / 1000, cached=False)
        except KafkaException as exc:
            raise broker_error(options.client, f"offsets of {where}", exc, reader, errors) from None
        start, end = part.start, part.end
        if start < low:
            _data_loss(options, f"{where}: offsets {start} to {min(low, end) - 1} are no longer in the log "
                                f"(it starts at {low})")
            start = low
        if end > high:
            _data_loss(options, f"{where}: the log ends at {high}, before the planned end {end} "
                                f"(was the topic deleted and created again?)")
            end = high
        position = start
        if position < end:
            reader.assign([KafkaTopicPartition(part.topic, part.partition, position)])
        deadline = time.monotonic() + poll_timeout
        while position < end:
            messages = reader.consume(min(BATCH_RECORDS, end - position), timeout=min(1.0, poll_timeout))
            rows = []
            following = position  # the offset after the last row
            at_end = False
            for message in messages:
                error, offset = message.error(), message.offset()
                if error is not None and error.code() == KafkaError._PARTITION_EOF:
                    at_end = offset is not None and offset >= end
                    break
                if error is not None:
                    if error.code() != KafkaError._AUTO_OFFSET_RESET:
                        raise BrokerError(f"reading {where} at offset {position}: {error.str()}")
                    _data_loss(options, f"{where}: offset {position} is out of range ({error.str()})")
                    low, _high = reader.get_watermark_offsets(KafkaTopicPartition(part.topic, part.partition),
                                                              timeout=options.client.api_timeout_ms / 1000,
                                                              cached=False)
                    position = max(position, low)
                    reader.assign([KafkaTopicPartition(part.topic, part.partition, position)])
                    break
                if offset is None or offset >= end:
                    break
                rows.append(message)
                following = offset + 1
            if rows:
                position = following
                deadline = time.monotonic() + poll_timeout
                yield _arrow_batch(rows, part, arrow_schema, options.include_headers)
            if at_end:
                break
            if not rows and time.monotonic() > deadline:
                raise BrokerError(f"reading {where}: no record for {options.poll_timeout_ms} ms "
                                  f"(kafkaConsumer.pollTimeoutMs) at offset {position}, {end - position} "
                                  f"records before the planned end {end}; is kafka.bootstrap.servers="
                                  f"{options.client.bootstrap} up?")
    finally:
        reader.close()


class _RangeReading:
    """What the batch and streaming readers share: their options, a lazily opened
    cluster view, and reading a planned range."""

    def __init__(self, options: ReadOptions, schema: StructType):
        self.options = options
        self.schema = schema
        self.cluster = Cluster(options.client)

    def _plan(self, start: O.Offsets, end: O.Offsets) -> list[InputPartition]:
        parts = O.split(O.ranges(start, end), self.options.min_partitions)
        return [InputPartition(part) for part in parts]

    @reported_alone
    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield from read_range(self.options, partition.value, self.schema)


class BatchReader(_RangeReading, DataSourceReader):
    """startingOffsets (or startingTimestamp) to endingOffsets, fixed when the query is planned."""

    @reported_alone
    def partitions(self) -> list[InputPartition]:
        try:
            subscribed = self.cluster.partitions(self.options.subscription)
            start = self.cluster.resolve(self.options.starting, subscribed, self.options.timestamp_strategy,
                                         self.options.fail_on_data_loss)
            end = self.cluster.resolve(self.options.ending, subscribed,
                                       fail_on_data_loss=self.options.fail_on_data_loss)
        finally:
            self.cluster.close()
        backwards = [tp for tp in subscribed if end[tp] < start[tp]]
        if backwards:
            topic, partition = backwards[0]
            raise DataLossError(f"kgate options 'startingOffsets'/'endingOffsets': {topic}-{partition} would end "
                                f"at {end[(topic, partition)]}, before its start {start[(topic, partition)]}")
        return self._plan(start, end)


class StreamReader(_RangeReading, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches over the subscribed partitions, offsets checkpointed as Spark's Kafka source does.

    The subscription is looked at again for every micro-batch, so partitions and
    (with ``subscribePattern``) topics created later are picked up from their start.
    """

    def __init__(self, options: ReadOptions, schema: StructType):
        super().__init__(options, schema)
        self._target: O.Offsets | None = None  # set by Trigger.AvailableNow

    @reported_alone
    def initialOffset(self) -> dict:
        subscribed = self.cluster.partitions(self.options.subscription)
        start = self.cluster.resolve(self.options.starting, subscribed, self.options.timestamp_strategy,
                                     self.options.fail_on_data_loss)
        return O.to_json_dict(start)

    def _latest(self) -> O.Offsets:
        subscribed = self.cluster.partitions(self.options.subscription)
        return {tp: high for tp, (_low, high) in self.cluster.watermarks(subscribed).items()}

    @reported_alone
    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._latest()

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        return ReadAllAvailable()

    @reported_alone
    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        latest = self._latest()
        gone = [tp for tp in O.from_json_dict(start) if tp not in latest]
        if gone:
            _data_loss(self.options, f"partition {gone[0][0]}-{gone[0][1]} is gone (topic deleted?)")
        begin = self._from_log_start(O.from_json_dict(start), latest)
        if self._target is not None:
            latest = {tp: max(min(offset, self._target[tp]), begin[tp])
                      for tp, offset in latest.items() if tp in self._target}
        if isinstance(limit, ReadMaxRows):
            latest = O.cap(begin, latest, limit.max_rows)
        return O.to_json_dict(latest)

    def reportLatestOffset(self) -> dict | None:
        return O.to_json_dict(self._latest())

    def _from_log_start(self, start: O.Offsets, partitions) -> O.Offsets:
        """``start`` with a start for each of ``partitions``: one created since is read from
        its log start, as Spark's Kafka source reads new partitions."""
        new = [tp for tp in partitions if tp not in start]
        return {**start, **{tp: low for tp, (low, _high) in self.cluster.watermarks(new).items()}}

    @reported_alone
    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        stop = O.from_json_dict(end)
        begin = self._from_log_start(O.from_json_dict(start), stop)
        shrunk = [tp for tp, offset in stop.items() if offset < begin[tp]]
        if shrunk:
            topic, partition = shrunk[0]
            _data_loss(self.options, f"{topic}-{partition} went back from offset {begin[(topic, partition)]} to "
                                     f"{stop[(topic, partition)]} (topic deleted and created again?)")
        return self._plan(begin, stop)

    def commit(self, end: dict) -> None:
        """Nothing to do: progress lives in Spark's checkpoint, not in a consumer group."""

    def stop(self) -> None:
        self.cluster.close()
