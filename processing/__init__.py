"""kgate.processing: at-least-once processing of a topic's records by key-ordered parallel handlers.

    from kgate.processing import Processor

    app = Processor(bootstrap="127.0.0.1:9092", group="catalog-sync", topics=["meta-events"],
                    key=lambda record: record.key, concurrency=200, max_retries=5,
                    retry_backoff_ms=(100, 30_000), dead_letter_topic="meta-events.dlq", handler_timeout_s=60)

    @app.handler
    async def handle(record):            # or a plain function, run in a thread pool
        if not_ready(record):
            raise app.Delay(seconds=30)  # handled again later (at most max_delay_s, default 60)

    app.run()                            # or: kgate process --app module:app --metrics 127.0.0.1:9464

``mode="share"`` reads a share group (KIP-932) instead: no key order, any number of
processors on the same partitions, each record acknowledged on its own (``share.py``).

Guarantees (keyed mode, the default): an offset is committed only once every record before it in its partition is
finished (handled, or dead-lettered after its retries), so a crash re-handles only
records after the last commit and loses none; records of one key are handled one at a
time in the order taken, different keys in parallel, across partitions; the records in
memory are bounded in count and bytes (fetching pauses at the bound). The per-partition
commit structure is in ``offsets.py``, per-key order in ``keys.py``.

The client library is confluent-kafka (librdkafka), chosen by measurement
(``bench/processing_client.py``: a plain consume loop over 500,000 100-byte records in
16 partitions of a kgate broker, touching key, value and offset of each, medians of 2
runs on a 2-core machine): confluent-kafka 996,000 records/s at 0.73 us of process CPU
per record, aiokafka 0.14 669,000 records/s at 1.15 us. With librdkafka's default
``fetch.queue.backoff.ms`` (1 s) the same loop read only 169,000 records/s, so the
processor sets it to 0. Beyond speed, librdkafka has the cooperative-sticky assignor
(aiokafka has no incremental rebalancing) and pause/resume, which the rebalance and
memory guarantees need; and it is already the project's client for the test extra.
"""
from .processor import Delay, ProcessingError, Processor
from .record import Record

__all__ = ["Delay", "ProcessingError", "Processor", "Record"]
