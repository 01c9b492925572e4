"""The cluster as planning sees it: topics, partitions and offsets, with deadlines.

Planning runs in Spark's Python worker processes (batch planning, the streaming
source's offset calls), never in the object Spark pickles, so the client here is
made on first use and dropped before pickling. Every call has a deadline
(``kafka.default.api.timeout.ms``): a stopped broker fails the query with a message
naming the servers instead of hanging it.
"""
from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from .errors import BrokerError, DataLossError, UnknownTopicError
from .offsets import Offsets, TopicPartition
from .options import EARLIEST_OFFSET, LATEST_OFFSET, ClientOptions, OffsetSpec, Subscription

# Planning never consumes; a group id is required by librdkafka's consumer all the same.
PLANNER_GROUP = "kgate-spark-planner"


class ClientErrors:
    """The errors librdkafka reports on the side (a failed login, a refused connection):
    a request that then fails says only "transport failure"; the first specific error
    reported this way is the cause worth naming."""

    _VAGUE = (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN)

    def __init__(self):
        self.cause: KafkaError | None = None

    def __call__(self, error: KafkaError) -> None:
        if self.cause is None or (self.cause.code() in self._VAGUE and error.code() not in self._VAGUE):
            self.cause = error


def consumer(client: ClientOptions, errors: ClientErrors, defaults: dict | None = None,
             forced: dict | None = None) -> Consumer:
    """A librdkafka consumer on the reader's settings that never joins a group or commits."""
    config = client.librdkafka(
        {"group.id": PLANNER_GROUP, "socket.connection.setup.timeout.ms": client.api_timeout_ms, **(defaults or {})},
        {"enable.auto.commit": False, "allow.auto.create.topics": False, "error_cb": errors, **(forced or {})})
    try:
        return Consumer(config)
    except KafkaException as exc:
        raise BrokerError(f"kafka.* options rejected by the Kafka client: {exc.args[0].str()}") from None


def broker_error(client: ClientOptions, what: str, exc: KafkaException, connection: Consumer,
                 errors: ClientErrors) -> BrokerError:
    """BrokerError for a failed request, with the cause librdkafka reported on the side."""
    error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
    reason = error.str() if error is not None else str(exc)
    connection.poll(0)  # serves the error callbacks queued meanwhile
    if errors.cause is not None and errors.cause.str() not in reason:
        reason += f" ({errors.cause.str()})"
    return BrokerError(f"{what} from kafka.bootstrap.servers={client.bootstrap} failed within "
                       f"{client.api_timeout_ms} ms (kafka.default.api.timeout.ms): {reason}")


class Cluster:
    def __init__(self, client: ClientOptions):
        self.client = client
        self.errors = ClientErrors()
        self._consumer: Consumer | None = None

    def __getstate__(self):
        return {"client": self.client, "errors": ClientErrors(), "_consumer": None}

    @property
    def _timeout(self) -> float:
        return self.client.api_timeout_ms / 1000

    def _connection(self) -> Consumer:
        if self._consumer is None:
            self._consumer = consumer(self.client, self.errors)
        return self._consumer

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    def partitions(self, subscription: Subscription) -> list[TopicPartition]:
        """The partitions subscribed to now; UnknownTopicError for a named topic that is not there."""
        connection = self._connection()
        try:
            metadata = connection.list_topics(timeout=self._timeout)
        except KafkaException as exc:
            raise broker_error(self.client, "listing topics", exc, connection, self.errors) from None
        topics = {name: sorted(t.partitions) for name, t in metadata.topics.items() if t.error is None}
        if subscription.kind == "subscribePattern":  # internal topics are read only when named
            return [(name, p) for name in sorted(topics) if not name.startswith("__") and subscription.matches(name)
                    for p in topics[name]]
        missing = [name for name in subscription.topics if name not in topics]
        if missing:
            raise UnknownTopicError(f"kgate option '{subscription.kind}': topic {missing[0]!r} does not exist "
                                    f"at kafka.bootstrap.servers={self.client.bootstrap}")
        if subscription.kind == "assign":
            for topic, partition in subscription.partitions:
                if partition not in topics[topic]:
                    raise UnknownTopicError(f"kgate option 'assign': {topic} has no partition {partition}")
            return sorted(subscription.partitions)
        return [(name, p) for name in subscription.topics for p in topics[name]]

    def watermarks(self, partitions: list[TopicPartition]) -> dict[TopicPartition, tuple[int, int]]:
        """(log start, log end) per partition."""
        out = {}
        connection = self._connection()
        for topic, partition in partitions:
            try:
                out[(topic, partition)] = connection.get_watermark_offsets(
                    KafkaTopicPartition(topic, partition), timeout=self._timeout, cached=False)
            except KafkaException as exc:
                raise broker_error(self.client, f"offsets of {topic}-{partition}", exc, connection,
                                   self.errors) from None
        return out

    def offsets_for_timestamp(self, partitions: list[TopicPartition], timestamp: int) -> dict[TopicPartition, int]:
        """The first offset at or after ``timestamp`` per partition, -1 where no record is that recent."""
        if not partitions:
            return {}
        asked = [KafkaTopicPartition(topic, partition, timestamp) for topic, partition in partitions]
        connection = self._connection()
        try:
            found = connection.offsets_for_times(asked, timeout=self._timeout)
        except KafkaException as exc:
            raise broker_error(self.client, f"offsets for timestamp {timestamp}", exc, connection,
                               self.errors) from None
        return {(tp.topic, tp.partition): tp.offset for tp in found}

    def resolve(self, spec: OffsetSpec, partitions: list[TopicPartition], timestamp_strategy: str = "error",
                fail_on_data_loss: bool = True) -> Offsets:
        """Concrete offsets for ``spec`` on ``partitions``.

        Offset JSON must name every partition (as Spark insists) and stay within the
        log; an offset outside it is data loss, reported or (``failOnDataLoss``
        false) moved to the nearest end of the log.
        """
        marks = self.watermarks(partitions)
        if spec.kind == "earliest":
            return {tp: low for tp, (low, _high) in marks.items()}
        if spec.kind == "latest":
            return {tp: high for tp, (_low, high) in marks.items()}
        if spec.timestamp is not None:  # startingTimestamp
            found = self.offsets_for_timestamp(partitions, spec.timestamp)
            late = [tp for tp, offset in found.items() if offset < 0]
            if late and timestamp_strategy == "error":
                topic, partition = late[0]
                raise DataLossError(f"kgate option 'startingTimestamp': {topic}-{partition} has no record at or "
                                    f"after {spec.timestamp}; set startingOffsetsByTimestampStrategy=latest "
                                    f"to start those partitions at their end")
            return {tp: (marks[tp][1] if offset < 0 else offset) for tp, offset in found.items()}
        wanted = spec.offset_map()
        missing = [tp for tp in partitions if tp not in wanted]
        if missing:
            topic, partition = missing[0]
            raise DataLossError(f"kgate option '{spec.option}': specific offsets must name every partition "
                                f"subscribed to; {topic}-{partition} is missing")
        out = {}
        for tp in partitions:
            low, high = marks[tp]
            offset = wanted[tp]
            if offset == EARLIEST_OFFSET:
                offset = low
            elif offset == LATEST_OFFSET:
                offset = high
            elif not low <= offset <= high:
                if fail_on_data_loss:
                    raise DataLossError(f"kgate option '{spec.option}': {tp[0]}-{tp[1]} offset {offset} is out of "
                                        f"range [{low}, {high}]; set failOnDataLoss=false to read from the "
                                        f"nearest available offset instead")
                offset = min(max(offset, low), high)
            out[tp] = offset
        return out
