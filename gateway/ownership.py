"""Partition ownership: the partitions this broker serves, kept true to the cluster.

Every broker computes the same owners (metadata.assignment) from the live brokers, the
topics and the placement overrides. Owning is made safe by a claim, an ephemeral node only one broker can
hold: a broker serves a partition only after taking its claim, and opening the
partition's log then fences whatever ledger the previous owner left open, so a
writer that was superseded without knowing it (paused, cut off) can no longer
confirm anything. A broker that stops being the owner stops serving at once, seals
its ledger and gives the claim up; the next owner, woken by the claim's removal,
takes it. A broker whose metadata session expired has lost every claim with it: it
drops all its partitions without writing anything and claims afresh.

All of this runs from the metadata event manager's one task, or from a client's
topic request, under the broker's topic lock, so one reconcile runs at a time. Within
it, the partitions to gain are opened side by side (``OPEN_CONCURRENCY`` at once): each
opening is a few round trips to the metadata and object stores, and a broker taking
over a lost one's partitions one by one kept them all unavailable for seconds, long
enough for producers to time records out.
"""
import asyncio
import logging
from typing import Protocol

from kgate.metadata.assignment import assign
from kgate.metadata.cluster import BrokerInfo, ClusterState, Topic
from kgate.metadata.events import Event, EventManager
from kgate.metadata.store import Session
from kgate.storage.chain_record import ChainConflict
from kgate.storage.ledger import CorruptLedger, LedgerFenced, TailUnreachable

from .epoch_book import EpochBook
from .groups import OFFSETS_TOPIC
from .partition import Partition
from .shares.coordinator import SHARE_STATE_TOPIC
from .shares.leader import ShareLeaders
from .transactions import TRANSACTION_STATE_TOPIC

log = logging.getLogger(__name__)

# How often a partition whose ledger tail is in another broker's local WAL is tried again.
TAIL_RETRY_SECONDS = 2.0
# Partitions a reconcile opens at once.
OPEN_CONCURRENCY = 8


class ShardedCoordinator(Protocol):
    """A coordinator whose shards live in partitions of its internal topic: it loads a shard
    when this broker gains its partition and drops it when the partition goes."""

    async def gain(self, index: int) -> None: ...

    def lose(self, index: int) -> None: ...


class OwningBroker(Protocol):
    """What ownership needs of the broker: the cluster's claims and epochs, the tables of
    partitions it serves or holds offline, opening a partition's log, the coordinators to
    tell, and the event queue to post changes to."""

    node_id: int
    partitions: dict[tuple[str, int], Partition]
    offline: dict[tuple[str, int], str]
    damaged: dict[tuple[str, int], tuple[Partition, int]]
    registration_wait: float

    @property
    def cluster(self) -> ClusterState: ...

    @property
    def events(self) -> EventManager: ...

    @property
    def groups(self) -> ShardedCoordinator: ...

    @property
    def transactions(self) -> ShardedCoordinator: ...

    @property
    def shares(self) -> ShardedCoordinator: ...

    @property
    def share_leaders(self) -> ShareLeaders: ...

    @property
    def epoch_book(self) -> EpochBook: ...

    def me(self) -> BrokerInfo: ...

    async def open_partition(self, topic: Topic, index: int) -> Partition: ...

    def take_offline(self, name: str, index: int, damage: CorruptLedger | OSError | TailUnreachable) -> None: ...


class Ownership:
    def __init__(self, broker: OwningBroker):
        self.broker = broker
        self.safe = True  # False while the metadata session is suspended or lost
        self._expired = False
        self._expiries_unhandled = 0  # expiries reported, their partitions not yet dropped
        self._session = Session.CONNECTED  # the latest state the store reported
        # topic name -> ((partitions, live broker ids, overrides), owners): Metadata asks per partition,
        # and assigning costs a hash per partition and broker, so it runs once per change.
        self._assigned: dict[str, tuple[tuple, list[int]]] = {}
        # Offline partitions whose ledger tail waits for another broker's upload: tried again.
        self._awaiting_tail: set[tuple[str, int]] = set()
        # Served partitions whose ledger failed under this broker: reopened at the next reconcile.
        self._fenced: set[tuple[str, int]] = set()

    def owners(self, topic: Topic) -> list[int]:
        """The owner of each partition of ``topic``; [] when no broker is live."""
        cluster = self.broker.cluster
        placed = cluster.placements.get(topic.name, {})
        inputs = (topic.partitions, tuple(sorted(cluster.brokers)), tuple(sorted(placed.items())))
        known = self._assigned.get(topic.name)
        if known is None or known[0] != inputs:
            known = inputs, assign(topic.name, topic.partitions, inputs[1], placed)
            self._assigned[topic.name] = known
        return known[1]

    async def reconcile(self, topic: Topic, summary: bool = True) -> tuple[int, int]:
        """Gain the partitions of ``topic`` this broker should own and lose the others;
        how many were gained and lost, said in one line with ``summary``."""
        broker = self.broker
        lost = 0
        to_gain = []
        for index, owner in enumerate(self.owners(topic)):
            key = (topic.name, index)
            if key in self._fenced:
                self._fenced.discard(key)
                if key in broker.partitions:
                    await self.lose(topic.name, index, seal=False)
                    lost += 1
            held = key in broker.partitions or key in broker.offline
            if owner == broker.node_id and (not held or key in self._awaiting_tail) and self.safe:
                to_gain.append(index)
            elif owner != broker.node_id and held:
                await self.lose(topic.name, index, seal=True)
                lost += 1
        gained = await self._gain_all(topic, to_gain)
        if summary:
            self._summarise(topic.name, gained, lost)
        return gained, lost

    async def _gain_all(self, topic: Topic, indexes: list[int]) -> int:
        """Gain each partition, ``OPEN_CONCURRENCY`` at once; how many were gained. Every
        attempt ends before this returns, so a failure (raised once all have ended, for the
        event manager to retry) leaves no opening running behind the next reconcile.

        Openings can be slow (under a fault run's faults one reconcile took 28 s): those not
        started when the broker list changes again are left to the reconcile that change
        brings, rather than taken for a list already stale, holding claims a returning broker
        would then wait for (fault run seed 12)."""
        slots = asyncio.Semaphore(OPEN_CONCURRENCY)

        async def gain(index: int) -> bool:
            async with slots:
                if self.broker.events.waiting(Event.BROKERS):
                    return False
                return await self._gain(topic, index)

        gained = 0
        for outcome in await asyncio.gather(*(gain(index) for index in indexes), return_exceptions=True):
            if isinstance(outcome, BaseException):
                raise outcome
            gained += outcome
        return gained

    async def reconcile_all(self) -> None:
        gained = lost = 0
        for topic in list(self.broker.cluster.topics.values()):
            took, handed = await self.reconcile(topic, summary=False)
            gained, lost = gained + took, lost + handed
        self._summarise("all topics", gained, lost)

    def _summarise(self, what: str, gained: int, lost: int) -> None:
        """One line per change of ownership, however many partitions it moved (each
        one is logged at DEBUG): a broker of many partitions starts and stops quietly."""
        if gained or lost:
            log.info("ownership of %s: took %d partitions, handed over %d; serving %d", what, gained, lost,
                     len(self.broker.partitions))

    def reopen_fenced(self, name: str, index: int) -> None:
        """The partition's ledger failed under this broker while its claim held: a WAL object
        was written while the metadata session was in doubt, so the ledger gave up on it.
        Served as it is, every append to it would be refused until the partition moved away;
        instead it is dropped (not sealed) and, while still this broker's, taken again: the
        recovery fences that ledger, keeps what reached storage and starts a new one."""
        if (name, index) in self.broker.partitions and (name, index) not in self._fenced:
            self._fenced.add((name, index))
            self.broker.events.post(Event.OWNERS, name)

    async def _gain(self, topic: Topic, index: int) -> bool:
        broker = self.broker
        if not await broker.cluster.claim(topic, index, broker.node_id):
            return False  # the previous owner still holds it; its release posts OWNERS_CHANGED
        try:
            partition = await broker.open_partition(topic, index)
        except TailUnreachable as away:
            # Held (so nobody seals it short), not served, and tried again until its tail is uploaded.
            first_try = (topic.name, index) not in self._awaiting_tail
            broker.take_offline(topic.name, index, away)
            self._awaiting_tail.add((topic.name, index))
            asyncio.get_running_loop().call_later(TAIL_RETRY_SECONDS, broker.events.post, Event.OWNERS, topic.name)
            return first_try
        except (CorruptLedger, OSError) as damage:
            # Held, served below the damage at most: every other partition starts, and this one says why not.
            broker.take_offline(topic.name, index, damage)
            return True
        except Exception:
            await broker.cluster.release(topic.name, index, broker.node_id)
            raise
        try:
            partition.epochs = await broker.cluster.new_epoch(topic, index, partition.ledger.next_offset)
        except Exception:
            await broker.cluster.release(topic.name, index, broker.node_id)
            raise
        broker.partitions[(topic.name, index)] = partition
        broker.epoch_book.opened(topic, index, partition.leader_epoch)
        if broker.offline.pop((topic.name, index), None) is not None:
            self._awaiting_tail.discard((topic.name, index))
            log.info("%s-%d: its ledger tail was uploaded; serving it", topic.name, index)
        if topic.name == OFFSETS_TOPIC:
            await broker.groups.gain(index)
        elif topic.name == TRANSACTION_STATE_TOPIC:
            await broker.transactions.gain(index)
        elif topic.name == SHARE_STATE_TOPIC:
            await broker.shares.gain(index)
        log.debug("now serving %s-%d (leader epoch %d)", topic.name, index, partition.leader_epoch)
        return True

    async def lose(self, name: str, index: int, seal: bool) -> bool:
        """Stop serving a partition at once; ``seal`` its ledger (a clean hand-over) or just
        drop it (the topic is gone, or the claim was lost with the session). False when the
        seal or the release could not be written (a full disk, a store gone): logged, and
        nothing acknowledged is lost, since what was acknowledged is durable already."""
        broker = self.broker
        partition = broker.partitions.pop((name, index), None)
        offline = broker.offline.pop((name, index), None)
        damaged = broker.damaged.pop((name, index), None)
        self._awaiting_tail.discard((name, index))
        broker.share_leaders.drop(name, index)
        broker.epoch_book.closed(name, index)
        if partition is None:
            if damaged is not None:
                damaged[0].ledger.abandon()  # opened only as far as its damage: nothing to seal
            if offline is not None and not self._expired:
                await broker.cluster.release(name, index, broker.node_id)
            return True
        if name == OFFSETS_TOPIC:
            broker.groups.lose(index)
        elif name == TRANSACTION_STATE_TOPIC:
            broker.transactions.lose(index)
        elif name == SHARE_STATE_TOPIC:
            broker.shares.lose(index)
        clean = True
        if seal:
            try:
                await partition.ledger.close()
            except (LedgerFenced, ChainConflict) as exc:
                # Its next owner got there first: that owner's recovery sealed it.
                log.warning("%s-%d was already taken over: %s", name, index, exc)
            except Exception as exc:
                clean = False
                log.warning("sealing %s-%d on hand-over failed (%r); its next owner's recovery seals it",
                            name, index, exc)
        else:
            partition.ledger.abandon()
        if not self._expired:
            try:
                await broker.cluster.release(name, index, broker.node_id)
            except Exception as exc:
                clean = False  # the claim is ephemeral: it ends with this broker's metadata session instead
                log.warning("releasing %s-%d on hand-over failed (%r); its claim ends with this broker's session",
                            name, index, exc)
        log.debug("stopped serving %s-%d", name, index)
        return clean

    # -- the metadata session ------------------------------------------------------------

    def session_reported(self, session: Session) -> None:
        """The store's report, handled at once: writes stop being acknowledged the moment
        the session is in doubt, not once the event queue reaches the news (an event
        ahead of it may be waiting on the very store that went away)."""
        self._session = session
        if session is not Session.CONNECTED:
            self.safe = False
        if session is Session.EXPIRED:
            self._expiries_unhandled += 1

    @property
    def claims_lost(self) -> bool:
        """The session that held this broker's claims has expired and its partitions are not
        dropped yet: others may own them already, so nothing of them is served, reads
        included. A read served meanwhile from a log another broker now appends to answered
        OFFSET_OUT_OF_RANGE to a consumer already past its end, which sent librdkafka back to
        offset 0 (auto.offset.reset)."""
        return self._expiries_unhandled > 0

    async def session_changed(self, session: Session) -> None:
        """The rest of a session change, from the event queue, in order with other events."""
        broker = self.broker
        if session is Session.SUSPENDED:
            # The claims may be about to vanish: promise nothing until the session is back.
            self.safe = False
            log.warning("metadata session suspended: refusing writes until it is back")
        elif session is Session.EXPIRED:
            # Every expiry reported so far: the event queue merges a report into one still waiting
            # (fault run seed 12: two expiries 11 s apart, one drop, and the broker served nothing
            # for good). One reported while the partitions are dropped posts an event of its own.
            covered = self._expiries_unhandled
            self.safe = False
            self._expired = True
            log.error("metadata session expired: dropping every partition")
            try:
                for name, index in list(broker.partitions):
                    await self.lose(name, index, seal=False)
            finally:
                self._expiries_unhandled -= covered
        elif session is Session.CONNECTED:
            if self._expired:
                await broker.cluster.register(broker.me(), broker.registration_wait)
                self._expired = False
                log.info("registered again after the session expired")
            # Unless the session has been lost again since this report.
            self.safe = self._session is Session.CONNECTED
            broker.events.post(Event.BROKERS)
