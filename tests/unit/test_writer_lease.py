"""The S3 WAL's writer lease over a metadata session: a connection lost and found again on
the same session keeps the lease; an expired session loses it, even when the round trip that
was waiting is answered afterwards."""
from kgate.gateway.writer_lease import CONFIRM_ATTEMPTS, MetadataWriterLease
from kgate.metadata.store import Node, Session, StoreUnavailable


class Sessions:
    """A stand-in metadata store: each ``get`` is answered by the next scripted step, either a
    failure to raise or a session change to report before answering."""

    def __init__(self, *steps):
        self.steps = list(steps)
        self.callbacks = []
        self.gets = 0

    def on_session(self, callback):
        self.callbacks.append(callback)

    async def get(self, path):
        self.gets += 1
        step = self.steps.pop(0) if self.steps else None
        if isinstance(step, Exception):
            raise step
        if isinstance(step, Session):
            for callback in self.callbacks:
                callback(step)
        return Node(b"", 0)


async def test_a_round_trip_lost_with_the_connection_is_asked_again_and_the_lease_holds():
    store = Sessions(StoreUnavailable("connection lost"))
    lease = MetadataWriterLease(store)  # type: ignore[arg-type]
    assert await lease.confirm(lease.generation)
    assert store.gets == 2


async def test_a_session_that_expires_before_the_answer_loses_the_lease():
    store = Sessions(StoreUnavailable("connection lost"), Session.EXPIRED)
    lease = MetadataWriterLease(store)  # type: ignore[arg-type]
    generation = lease.generation
    assert not await lease.confirm(generation)
    assert lease.generation == generation + 1


async def test_a_store_that_stays_unreachable_confirms_nothing():
    store = Sessions(*[StoreUnavailable("connection lost")] * CONFIRM_ATTEMPTS)
    lease = MetadataWriterLease(store)  # type: ignore[arg-type]
    assert not await lease.confirm(lease.generation)
    assert store.gets == CONFIRM_ATTEMPTS


async def test_a_confirmation_for_an_older_session_asks_nothing():
    store = Sessions()
    lease = MetadataWriterLease(store)  # type: ignore[arg-type]
    store.callbacks[0](Session.EXPIRED)
    assert not await lease.confirm(0)
    assert store.gets == 0
