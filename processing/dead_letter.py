"""Records whose handler failed for good go to the dead-letter topic, with why in headers.

The record keeps its key, value and headers; the failure is added in headers named
like Kafka Connect's dead-letter headers (``__connect.errors.*``) under ``kgate.errors.``:
the original topic, partition and offset, the number of attempts, and the exception's
class and message. The source offset is committed only after the dead-letter write is
acknowledged (acks=all, idempotent producer), so a crash in between re-handles the record
rather than losing it.
"""
import asyncio

from confluent_kafka import KafkaException, Producer

from .record import Record

PREFIX = "kgate.errors."


def failure_headers(record: Record, error: BaseException, attempts: int) -> list[tuple[str, bytes]]:
    return [
        (PREFIX + "topic", record.topic.encode()),
        (PREFIX + "partition", str(record.partition).encode()),
        (PREFIX + "offset", str(record.offset).encode()),
        (PREFIX + "attempts", str(attempts).encode()),
        (PREFIX + "exception.class.name", type(error).__qualname__.encode()),
        (PREFIX + "exception.message", str(error).encode(errors="replace")),
    ]


class DeadLetterWriter:
    def __init__(self, topic: str, config: dict) -> None:
        self.topic = topic
        self._producer = Producer({"acks": "all", "enable.idempotence": True, "linger.ms": 5, **config})
        self._pending = 0
        self._poller: asyncio.Task | None = None

    async def send(self, record: Record, error: BaseException, attempts: int) -> None:
        """Returns once the broker acknowledged the record; raises KafkaException if it never does."""
        loop = asyncio.get_running_loop()
        delivered = loop.create_future()

        def on_delivery(err, _message):
            loop.call_soon_threadsafe(_settle, delivered, err)

        headers: list[tuple[str, str | bytes | None]] = [*(record.headers or ()),
                                                         *failure_headers(record, error, attempts)]
        self._producer.produce(self.topic, value=record.value, key=record.key, headers=headers,
                               on_delivery=on_delivery)
        self._pending += 1
        if self._poller is None or self._poller.done():
            self._poller = asyncio.ensure_future(self._poll())
        try:
            await delivered
        finally:
            self._pending -= 1

    async def _poll(self) -> None:
        """Serve delivery reports (in a thread: poll blocks) while any send awaits one."""
        loop = asyncio.get_running_loop()
        while self._pending:
            await loop.run_in_executor(None, self._producer.poll, 0.05)

    def close(self, timeout_s: float) -> int:
        """Flush and let the producer go; the number of records still undelivered."""
        undelivered = self._producer.flush(timeout_s)
        del self._producer
        return undelivered


def _settle(future: asyncio.Future, err) -> None:
    if future.done():
        return
    if err is None:
        future.set_result(None)
    else:
        future.set_exception(KafkaException(err))
