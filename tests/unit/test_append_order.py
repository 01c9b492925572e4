"""Appends land in the order they arrived, whatever pauses in between.

Requests of several connections arrive on a schedule Hypothesis draws; each may pause
before appending (a slow validation), and meanwhile the ledger rolls over by size, is
rolled over on demand, and is trimmed by retention, all writing a chain record that
answers only after a drawn number of loop turns. A connection's requests take their
turn as the produce handler's do (gateway/handlers/produce.py, ``Turn``), and the
ledger is the real one over the file store: every connection's records must end up at
offsets in the order it sent them, and offsets must stay contiguous.
"""
import asyncio
import itertools
import os
import tempfile
from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kgate.gateway.chain_records import MetadataChainRecord
from kgate.gateway.handlers.produce import Turn
from kgate.metadata.cluster import ClusterState
from kgate.metadata.stores.embedded import EmbeddedMetadataStore
from kgate.storage.managed_ledger import ManagedLedger, RetentionPolicy, RolloverPolicy
from kgate.storage.stores.file_store import FileLedgerStore

PAYLOAD = 64


class SlowChain:
    """A chain record whose writes take some loop turns, as a remote metadata store's do."""

    def __init__(self, chain: MetadataChainRecord, pauses, written=lambda: None):
        self._chain = chain
        self._pauses = pauses
        self.written = written  # called as each replace returns

    async def _pause(self) -> None:
        for _ in range(next(self._pauses)):
            await asyncio.sleep(0)

    async def read(self):
        return await self._chain.read()

    async def create(self, data: bytes) -> int:
        await self._pause()
        return await self._chain.create(data)

    async def replace(self, data: bytes, version: int) -> int:
        await self._pause()
        version = await self._chain.replace(data, version)
        self.written()
        return version

    async def delete(self, version: int | None = None) -> None:
        await self._chain.delete(version)


@dataclass
class Connection:
    """What Turn needs of a connection: its newest produce's turn."""

    appending: asyncio.Future | None = None


@dataclass
class Request:
    connection: int
    arrives_after: int  # loop turns after the previous request's arrival
    validation_pauses: int  # loop turns it pauses before it may append (inflating, parsing)


requests = st.lists(st.builds(Request, st.integers(0, 2), st.integers(0, 3), st.integers(0, 4)),
                    min_size=2, max_size=60)
housekeeping = st.lists(st.sampled_from(["roll", "retention", "none"]), min_size=1, max_size=8)
pauses = st.lists(st.integers(0, 5), min_size=1, max_size=10)


_arrivals = itertools.count()


async def _produce(ledger: ManagedLedger, connection: Connection, request: Request, number: int, sent: list) -> None:
    """What the produce handler does for one partition: take the turn, validate, wait, append."""
    turn = Turn(connection)
    try:
        for _ in range(request.validation_pauses):
            await asyncio.sleep(0)
        await turn.wait()
        entered = next(_arrivals)
        await ledger.prepare_append()
        base, durable = ledger.append(1, 1000, 2, 0, lambda base: [number.to_bytes(8, "big") * (PAYLOAD // 8)])
    finally:
        turn.release()
    sent.append((request.connection, number, base, entered))
    await durable


async def _housekeeper(ledger: ManagedLedger, chores: list[str], stop: asyncio.Event) -> None:
    for chore in itertools.cycle(chores):
        if stop.is_set():
            return
        if chore == "roll":
            await ledger.roll_over()
        elif chore == "retention":
            await ledger.enforce_retention()
        await asyncio.sleep(0)


async def _run(directory: str, schedule: list[Request], chores: list[str], chain_pauses: list[int]) -> list:
    metadata = EmbeddedMetadataStore(os.path.join(directory, "metadata.sqlite"))
    cluster = ClusterState(metadata)
    chain = SlowChain(MetadataChainRecord(metadata, "/managed-ledgers/t/0"), itertools.cycle(chain_pauses))
    ledger = ManagedLedger("t-0", FileLedgerStore(os.path.join(directory, "ledgers")), chain,
                           lambda: cluster.allocate("ledger-id"),
                           rollover=RolloverPolicy(max_bytes=3 * PAYLOAD),
                           retention=RetentionPolicy(ms=-1, bytes=20 * PAYLOAD))
    await ledger.open()
    connections = [Connection() for _ in range(3)]
    sent: list = []
    stop = asyncio.Event()
    keeper = asyncio.create_task(_housekeeper(ledger, chores, stop))
    tasks = []
    for number, request in enumerate(schedule):
        for _ in range(request.arrives_after):
            await asyncio.sleep(0)
        tasks.append(asyncio.create_task(_produce(ledger, connections[request.connection], request, number, sent)))
    await asyncio.gather(*tasks)
    stop.set()
    await keeper
    await ledger.close()
    await metadata.close()
    return sent


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(requests, housekeeping, pauses)
def test_each_connections_appends_keep_their_arrival_order(schedule, chores, chain_pauses):
    with tempfile.TemporaryDirectory() as directory:
        sent = asyncio.run(_run(directory, schedule, chores, chain_pauses))
    assert sorted(s[2] for s in sent) == list(range(len(schedule))), "offsets are contiguous"
    in_ledger_arrival_order = [s[2] for s in sorted(sent, key=lambda s: s[3])]
    assert in_ledger_arrival_order == sorted(in_ledger_arrival_order), "appends land in the order they arrived"
    for connection in range(3):
        bases = [base for who, _, base, _ in sorted(sent, key=lambda s: s[1]) if who == connection]
        assert bases == sorted(bases), f"connection {connection}'s records left their order: {bases}"


async def _overtaken_across_a_roll(directory: str) -> list[int]:
    """Two appends wait for a roll in progress; a third arrives once the new ledger is open.

    From three connections, so only the ledger orders them: it appends in arrival order too.
    """
    schedule = [Request(0, 0, 0), Request(1, 0, 0), Request(2, 0, 0)]
    metadata = EmbeddedMetadataStore(os.path.join(directory, "metadata.sqlite"))
    cluster = ClusterState(metadata)
    chain = SlowChain(MetadataChainRecord(metadata, "/managed-ledgers/t/0"), itertools.cycle([3]))
    ledger = ManagedLedger("t-0", FileLedgerStore(os.path.join(directory, "ledgers")), chain,
                           lambda: cluster.allocate("ledger-id"), rollover=RolloverPolicy(max_bytes=2 * PAYLOAD))
    await ledger.open()
    for _ in range(2):  # the next append rolls over, the one after it does not
        await ledger.prepare_append()
        await ledger.append(1, 1000, 2, 0, lambda base: [b"\0" * PAYLOAD])[1]
    sent: list = []
    first = asyncio.create_task(_produce(ledger, Connection(), schedule[0], 0, sent))
    second = asyncio.create_task(_produce(ledger, Connection(), schedule[1], 1, sent))
    arrived = []

    def arrive():  # the roll's chain write is done: the new ledger opens before the next await
        arrived.append(asyncio.create_task(_produce(ledger, Connection(), schedule[2], 2, sent)))
        chain.written = lambda: None
    chain.written = arrive
    await asyncio.gather(first, second)
    third = arrived[0]
    await asyncio.gather(first, second, third)
    await ledger.close()
    await metadata.close()
    return [s[2] for s in sorted(sent, key=lambda s: s[1])]


def test_a_request_arriving_after_a_roll_waits_for_those_that_waited_for_it(tmp_path):
    assert asyncio.run(_overtaken_across_a_roll(str(tmp_path))) == [2, 3, 4]
