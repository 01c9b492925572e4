"""The copying itself: assigned source partitions in, the same partitions of the target out.

One consumer per route with partitions assigned by hand (assign, never subscribe: no
consumer group, so no group rebalance ever stops the copy), one idempotent acks=all
producer per target cluster with unbounded delivery time (uReplicator's no-loss
producer), and positions stored in the mirror's state only up to what the target
acknowledged (see partition_copy). Keys, values, headers and timestamps go over as they
are; every record gets an origin header naming the cluster it was first written to,
and a record is never copied to its origin.
"""
import logging
import time
from functools import partial

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition

from . import audit
from .config import MirrorConfig
from .metrics import MirrorMetrics
from .mm2_formats import OffsetSync, offset_syncs_topic
from .partition_copy import PartitionCopy
from .routes import ORIGIN_HEADER, Route
from .state import Item, MirrorState, item_key

log = logging.getLogger(__name__)
BATCH = 2000
WATERMARK_TIMEOUT = 10.0
RELEASE_FLUSH_TIMEOUT = 30.0
TAKE_RETRY_SECONDS = 1.0
METADATA_TIMEOUT = 5.0


def origin_of(headers: list | None, default: str) -> str:
    origin = _origin_header(headers)
    return default if origin is None else origin


def _origin_header(headers: list | None) -> str | None:
    """The origin a record's headers name, None when they name none (it was first written here)."""
    if headers:
        for name, value in headers:
            if name == ORIGIN_HEADER and value is not None:
                return value.decode()
    return None


def _log_failure(error, message) -> None:
    if error is not None:
        log.warning("offset sync into %s not written: %s", message.topic(), error.str())


class Replicator:
    def __init__(self, config: MirrorConfig, state: MirrorState, metrics: MirrorMetrics, worker_id: str):
        self.config = config
        self.state = state
        self.metrics = metrics
        self.worker_id = worker_id
        self.copies: dict[Item, PartitionCopy] = {}
        self._consumers: dict[str, Consumer] = {}
        self._producers: dict[str, Producer] = {}
        self._fatal: set[str] = set()
        self._waiting: dict[Item, Route] = {}
        self._last_take = 0.0
        self._last_store = time.monotonic()
        self._last_status: tuple[float, dict[Item, tuple[int, int]]] = (time.monotonic(), {})

    # Clients

    def _consumer(self, route: Route) -> Consumer:
        if route.name not in self._consumers:
            self._consumers[route.name] = Consumer(self.config.cluster(route.source).client_config(**{
                "group.id": f"kgate-mirror-{route.name}",  # required by librdkafka; never joined nor committed
                "enable.auto.commit": False, "enable.auto.offset.store": False,
                "enable.partition.eof": False, "auto.offset.reset": self.config["start"],
                # Fetches of at least 64 KiB or 50 ms: under load each request carries many records
                # (the source broker's work is per request), idle partitions wait at most 50 ms.
                "fetch.max.bytes": 32 * 1024 * 1024, "fetch.min.bytes": 64 * 1024, "fetch.wait.max.ms": 50,
                "client.id": f"kgate-mirror-{self.worker_id}"}))
        return self._consumers[route.name]

    def producer(self, target: str) -> Producer:
        if target not in self._producers:
            self._producers[target] = Producer(self.config.cluster(target).client_config(**{
                "enable.idempotence": True, "acks": "all", "message.timeout.ms": 0,
                # 20 ms of linger fills larger batches (the target's work is per request too), well
                # inside the lag a mirror is allowed.
                "linger.ms": 20, "batch.size": 1024 * 1024, "compression.type": "none",
                "queue.buffering.max.kbytes": 256 * 1024, "client.id": f"kgate-mirror-{self.worker_id}"}))
        return self._producers[target]

    # Assignment

    def set_work(self, routes: dict[str, Route], items: set[Item]) -> None:
        """Copy exactly ``items`` from now on (those of known routes): release the rest first."""
        wanted = {i: routes[i[0]] for i in items if i[0] in routes and routes[i[0]].matches(i[1])}
        released = [i for i in self.copies if i not in wanted or self.copies[i].route != wanted[i]]
        if released:
            self.release(released)
        waiting = {i: route for i, route in wanted.items() if i not in self.copies}
        for item in self._waiting.keys() - waiting.keys():
            self.state.unclaim(item)  # claimed by an earlier try that could not start it
        self._waiting = waiting
        self._take_waiting()

    def _take_waiting(self) -> None:
        """Start the partitions not yet started. One still claimed by the worker it moved
        from (storing its last position) or whose start cannot be resolved yet (its metadata
        has not reached this worker) is tried again on a later step."""
        self._last_take = time.monotonic()
        for item, route in sorted(self._waiting.items()):
            if not self.state.claim(item, self.worker_id):
                continue
            try:
                self._take(item, route)
                del self._waiting[item]
            except KafkaException as exc:
                log.info("cannot start %s yet: %s", item_key(item), exc.args[0].str())

    def _take(self, item: Item, route: Route) -> None:
        consumer = self._consumer(route)
        stored = self.state.position(item)
        if stored is not None:
            offset = stored["offset"]
        elif self.config["start"] == "earliest":
            offset = OFFSET_BEGINNING  # a successor starting before any record arrives starts there too
        else:
            # "latest" moves: resolve it now and store it, so a successor starts from the same place.
            offset = consumer.get_watermark_offsets(TopicPartition(item[1], item[2]), timeout=WATERMARK_TIMEOUT)[1]
            self.state.put_position(item, {"offset": offset})
        consumer.incremental_assign([TopicPartition(item[1], item[2], offset)])
        self.copies[item] = PartitionCopy(item, route, route.target_topic(item[1]), acked=offset, stored=offset)
        log.info("copying %s from %s to %s", item_key(item), offset if offset >= 0 else "the start", route.target)

    def release(self, items: list[Item]) -> None:
        """Stop copying ``items``: wait for what is in flight, store the positions, unassign,
        and only then hand the partitions over (drop their claims)."""
        for target in {self.copies[i].route.target for i in items}:
            self.producer(target).flush(RELEASE_FLUSH_TIMEOUT)
        self.store_positions([self.copies[i] for i in items])
        self._publish()
        for item in items:
            copy = self.copies.pop(item)
            consumer = self._consumers[copy.route.name]
            consumer.incremental_unassign([TopicPartition(item[1], item[2])])
            self.metrics.forget(*item)
            self.state.unclaim(item)
            log.info("stopped copying %s at offset %d", item_key(item), copy.acked)
        for name in [n for n in self._consumers if not any(c.route.name == n for c in self.copies.values())]:
            self._consumers.pop(name).close()

    # Copying

    def step(self, timeout: float = 0.1) -> int:
        """Copy what the consumers have, serve delivery reports, rewind failed partitions,
        store positions when due; returns the number of records read."""
        read = 0
        per_consumer = timeout / max(1, len(self._consumers))
        for name, consumer in list(self._consumers.items()):
            for message in consumer.consume(BATCH, per_consumer):
                error = message.error()
                if error is not None:
                    log.warning("reading for route %s: %s", name, error.str())
                    continue
                read += 1
                topic, partition = message.topic(), message.partition()
                copy = None if topic is None or partition is None else self.copies.get((name, topic, partition))
                if copy is not None and not copy.failed:
                    self._copy(copy, message)
        for producer in list(self._producers.values()):  # reports may add the source's producer (offset syncs)
            producer.poll(0)
        self._publish()
        if not self._consumers:
            time.sleep(timeout)
        self._recover()
        now = time.monotonic()
        if self._waiting and now - self._last_take >= TAKE_RETRY_SECONDS:
            self._take_waiting()
        if now - self._last_store >= self.config["commit.interval.ms"] / 1000:
            self._last_store = now
            self.store_positions(list(self.copies.values()))
        return read

    def _copy(self, copy: PartitionCopy, message) -> None:
        offset = message.offset()
        if copy.acked < 0:
            copy.acked = offset  # started at the log's beginning: this is where it is
        elif offset < copy.acked:
            return  # fetched before a rewind or a release, and already on the target
        headers = message.headers()
        key, value = message.key(), message.value()
        size = (len(key) if key else 0) + (len(value) if value else 0)
        origin = _origin_header(headers)
        if origin is None:
            origin = copy.route.source
            headers = [*headers, copy.origin_header] if headers else [copy.origin_header]
        elif origin == copy.route.target:
            copy.skipped(offset, size)
            return
        _, timestamp = message.timestamp()
        producer = self.producer(copy.route.target)
        report = partial(self._delivered, copy, copy.epoch, offset, timestamp, size, origin == copy.route.source)
        while True:
            try:
                producer.produce(copy.target_topic, value, key, partition=copy.partition, headers=headers,
                                 timestamp=timestamp if timestamp > 0 else 0, on_delivery=report)
                break
            except BufferError:
                producer.poll(0.05)  # the target is slower than the source: wait, losing nothing
            except KafkaException as exc:
                # A partition the controller just added, not yet in this producer's metadata:
                # ask for it and re-read the partition from what was acknowledged.
                log.info("%s: %s; refreshing metadata", item_key(copy.item), exc.args[0].str())
                producer.list_topics(copy.target_topic, timeout=METADATA_TIMEOUT)
                copy.delivery_failed(copy.epoch)
                return
        copy.sent(offset, size)

    def _delivered(self, copy: PartitionCopy, epoch: int, offset: int, timestamp: int, size: int, audited: bool,
                   error, message) -> None:
        if error is not None:
            log.warning("%s offset %d not copied: %s", item_key(copy.item), offset, error.str())
            copy.delivery_failed(epoch)
            if error.fatal():
                self._fatal.add(copy.route.target)
            return
        if copy.delivered(epoch, offset, message.offset(), timestamp):
            self._write_sync(copy, at_commit=False)
        if audited:  # on the target, whichever attempt put it there
            minute = audit.minute_of(timestamp)
            copy.minute_counts[minute] = copy.minute_counts.get(minute, 0) + 1
        copy.reported_records += 1
        copy.reported_bytes += size

    def _publish(self) -> None:
        """Acknowledgements into the metrics once per step, not per record: the counters take
        the step's totals, and the latency histogram the newest acknowledged record of each
        partition that moved (a sample per partition and step)."""
        now = time.time()
        for copy in self.copies.values():
            if copy.reported_records:
                name = copy.route.name
                self.metrics.records.labels(name).inc(copy.reported_records)
                self.metrics.bytes.labels(name).inc(copy.reported_bytes)
                copy.reported_records = copy.reported_bytes = 0
                if copy.acked_timestamp_ms > 0:
                    self.metrics.latency.labels(name).observe(max(0.0, now - copy.acked_timestamp_ms / 1000))

    def _recover(self) -> None:
        """Rewind partitions whose records the target did not take, and replace a producer
        that hit a fatal error (its idempotence state is gone: a new one starts clean)."""
        for target in list(self._fatal):
            self._fatal.discard(target)
            self._producers.pop(target).purge()
            for copy in self.copies.values():
                if copy.route.target == target:
                    copy.failed = True
        for copy in self.copies.values():
            if copy.failed:
                offset = copy.rewind()
                # Re-assigning (rather than seek, which needs a partition already fetching)
                # also drops whatever the consumer had prefetched past the rewind point.
                consumer = self._consumers[copy.route.name]
                consumer.incremental_unassign([TopicPartition(copy.source_topic, copy.partition)])
                consumer.incremental_assign([TopicPartition(copy.source_topic, copy.partition, offset)])
                log.warning("re-copying %s from offset %d", item_key(copy.item), offset)

    # Positions and status

    def _write_sync(self, copy: PartitionCopy, at_commit: bool) -> None:
        """An offset sync into the source's mm2-offset-syncs.<target>.internal, as MM2 writes it."""
        pair = copy.sync_due(self.config["offset.lag.max"], at_commit)
        if pair is not None:
            sync = OffsetSync(copy.source_topic, copy.partition, *pair)
            self.producer(copy.route.source).produce(offset_syncs_topic(copy.route.target), sync.value(), sync.key(),
                                                     partition=0, on_delivery=_log_failure)

    def store_positions(self, copies: list[PartitionCopy]) -> None:
        """Audit counts first, then positions: a crash between the two makes the successor copy
        and count those records again (the target holds them twice too), never counts less
        than the target holds."""
        counts: dict[tuple[str, str], dict[int, int]] = {}
        for copy in copies:
            per_minute = counts.setdefault((copy.route.name, copy.source_topic), {})
            for minute, count in copy.minute_counts.items():
                per_minute[minute] = per_minute.get(minute, 0) + count
            copy.minute_counts = {}
        for (route, topic), per_minute in counts.items():
            if per_minute:
                audit.add_source_counts(self.state, route, topic, per_minute)
        for copy in copies:
            self._write_sync(copy, at_commit=True)
            if copy.acked > copy.stored:
                self.state.put_position(copy.item, {"offset": copy.acked})
                copy.stored = copy.acked

    def status(self) -> dict:
        """Rates and lags of every partition copied here, for the controller and `status`."""
        now = time.monotonic()
        last_time, last_counts = self._last_status
        elapsed = max(now - last_time, 1e-3)
        partitions = {}
        for item, copy in self.copies.items():
            consumer = self._consumers[copy.route.name]
            _, high = consumer.get_watermark_offsets(TopicPartition(item[1], item[2]), cached=True)
            if high is not None and high >= 0:
                copy.high_watermark = high
            records, seconds = copy.lag()
            before = last_counts.get(item, (copy.bytes_in, copy.records_in))
            partitions[item_key(item)] = {
                "bytes_per_second": (copy.bytes_in - before[0]) / elapsed,
                "records_per_second": (copy.records_in - before[1]) / elapsed,
                "lag_records": records, "lag_seconds": round(seconds, 3),
                "position": copy.acked, "target": copy.route.target, "target_topic": copy.target_topic}
            self.metrics.lag_records.labels(*item).set(records)
            self.metrics.lag_seconds.labels(*item).set(seconds)
        self._last_status = (now, {i: (c.bytes_in, c.records_in) for i, c in self.copies.items()})
        return {"partitions": partitions}

    def close(self) -> None:
        """Hand everything back cleanly: flush, store positions, close the clients."""
        if self.copies:
            self.release(list(self.copies))
        for producer in list(self._producers.values()):
            producer.flush(RELEASE_FLUSH_TIMEOUT)
