"""How share mode settles a batch's records (processing/share.py), without a broker.

A batch of polled records goes to the handler; each record ends as one acknowledgement:
ACCEPT when handled, REJECT when it failed its retries with no dead-letter topic,
RELEASE when its retries or delay would outlast its lock. The messages are stand-ins
for librdkafka's (the layer below); the processor's own loop, timers and slots are real.
"""
import asyncio

from confluent_kafka import AcknowledgeType

from kgate.processing import Processor
from kgate.processing.share import ShareProcessor


class Message:
    """What the processor reads of a librdkafka message."""

    def __init__(self, offset: int, value: bytes) -> None:
        self._offset, self._value = offset, value

    def error(self):
        return None

    def topic(self):
        return "jobs"

    def partition(self):
        return 0

    def offset(self):
        return self._offset

    def key(self):
        return None

    def value(self):
        return self._value

    def headers(self):
        return None

    def timestamp(self):
        return 0, None


async def settle(app: ShareProcessor, values: list[bytes], lock_s: float) -> dict[int, AcknowledgeType]:
    app._loop = asyncio.get_running_loop()
    app._lock_s = lock_s
    batch = app._take_batch([Message(offset, value) for offset, value in enumerate(values)])
    assert batch is not None
    await asyncio.wait_for(batch.done.wait(), 10)
    assert len(batch.acks) == len(values), "every record settled once"
    return {offset: ack for _topic, _partition, offset, ack in batch.acks}


def share_app(**settings) -> ShareProcessor:
    app = Processor("127.0.0.1:9", "g", ["jobs"], mode="share", **settings)
    assert isinstance(app, ShareProcessor)
    return app


def test_handled_records_are_accepted_and_a_record_failing_for_good_is_rejected():
    app = share_app(max_retries=2, retry_backoff_ms=(1, 2))
    attempts: dict[bytes, int] = {}

    @app.handler
    async def handle(record):
        attempts[record.value] = attempts.get(record.value, 0) + 1
        if record.value == b"bad":
            raise RuntimeError("never works")

    acks = asyncio.run(settle(app, [b"a", b"bad", b"c"], lock_s=30))
    assert acks == {0: AcknowledgeType.ACCEPT, 1: AcknowledgeType.REJECT, 2: AcknowledgeType.ACCEPT}
    assert attempts[b"bad"] == 3 and app.metrics.rejected._value.get() == 1
    assert app.metrics.retries._value.get() == 2


def test_a_delay_within_the_lock_holds_the_record_and_it_is_accepted_after():
    app = share_app()
    attempts = []

    @app.handler
    async def handle(record):
        attempts.append(record.offset)
        if len(attempts) == 1:
            raise Processor.Delay(0.05)

    acks = asyncio.run(settle(app, [b"a"], lock_s=30))
    assert acks == {0: AcknowledgeType.ACCEPT} and attempts == [0, 0]
    assert app.metrics.released._value.get() == 0


def test_retries_that_would_outlast_the_lock_release_the_record():
    # A 0.4 s lock keeps 0.3 s for the processor; each retry waits at least 0.1 s, so the
    # record has its lock's worth of attempts and is then given back rather than rejected.
    app = share_app(max_retries=50, retry_backoff_ms=(200, 200))
    attempts = []

    @app.handler
    async def handle(record):
        attempts.append(record.offset)
        raise RuntimeError("down")

    acks = asyncio.run(settle(app, [b"a"], lock_s=0.4))
    assert acks == {0: AcknowledgeType.RELEASE}
    assert 1 < len(attempts) < 50 and app.metrics.released._value.get() == 1
