"""Partitions other brokers own, read here for clients of this broker's zone.

A consumer in this zone is sent here by the owner (Fetch's preferred_read_replica) and
reads from shared storage through a :class:`FollowedLedger`: no record byte crosses
zones. What may be served is the owner's to say (``KgateReadEnd``,
gateway/handlers/read_end.py). Per owner, this broker keeps one standing long poll over
the partitions it serves for that owner (:class:`_OwnerPoll`): the owner answers once one
of their high watermarks moves, the views are caught up to what it answered (waking the
fetches waiting on them) and the poll goes out again. A fetch uses what the poll learned
rather than asking per fetch; one cross-zone round trip per change of an owner's high
watermarks, whatever the number of fetches (on object storage, at most one per WAL commit
of the owner). The answer also names how far the owner's store has written, so the views
read the owner's new WAL objects without listing them.

What the poll learned is served only while it stands for the owner the metadata names: a
partition that another broker owns now, an owner that refuses it, a poll that fails (the
peer died, the link broke) drop it, and the next fetch asks the new owner (or the same one)
before it reads. A fetch from past the view's high watermark (a consumer that read further
at the owner a moment ago) asks too, rather than answering OFFSET_OUT_OF_RANGE from a
learned value that lags. Partitions no fetch asked for in ``IDLE_S`` leave the poll, which
ends with its last partition, so idle partitions keep nothing busy.

Each answer of the owner crosses zones. ``kgate.zone.read.end.interval.ms`` spaces the poll's
turns: continued no sooner than that after its last request, the owner answers at most once
per interval (on object storage it may otherwise answer for every WAL object it confirms, up
to four per commit interval), and readers here learn of new records up to that much later.

The standing poll is KgateReadEnd v1. An owner that serves only v0 (a broker not upgraded
yet, in a rolling upgrade; its link says, gateway/peer_links.py) gets no standing poll: each
fetch asks it (v0), and a fetch that waits for data asks it to answer once a high watermark
moves (a long poll, :meth:`Followers.wait`), as zone reads did before v1.

Views are opened on first use and the least recently used are closed past
``MAX_FOLLOWED`` (each holds its ledgers' file handles or indexes).
"""
import asyncio
import contextlib
import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import Mapping
from typing import Protocol

from kgate.metadata.cluster import BrokerInfo, Topic, ledger_list_path
from kgate.metadata.store import MetadataStore
from kgate.protocol.api_versions import KGATE_READ_END
from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.messages import KgateReadEndRequest
from kgate.storage.followed_ledger import FollowedLedger
from kgate.storage.ledger import CorruptLedger, FollowingUnsupported, LedgerStore
from kgate.storage.store_capabilities import TailHints

from .chain_records import MetadataChainRecord
from .partition import Partition
from .peer_links import PeerLinks, PeerUnavailable

log = logging.getLogger(__name__)

Q = KgateReadEndRequest
MAX_FOLLOWED = 200
# An owner that does not answer a plain (not waiting) high-watermark request within this is treated as gone.
ASK_TIMEOUT_S = 5.0
# How long a standing poll's request may wait at the owner; it goes out again when answered.
POLL_WAIT_S = 10.0
# A partition no fetch asked for in this long leaves its owner's poll.
IDLE_S = 10.0


class FollowingBroker(Protocol):
    """What reading other brokers' partitions needs of this broker: the shared stores the
    ledgers and their lists are read from, who owns each partition, and links to the owners."""

    node_id: int
    ledgers: LedgerStore
    metadata: MetadataStore

    @property
    def topics(self) -> Mapping[str, Topic]: ...

    @property
    def peers(self) -> PeerLinks: ...

    def leader(self, topic: Topic, index: int) -> BrokerInfo | None: ...


class Followers:
    def __init__(self, broker: FollowingBroker, poll_interval: float = 0.0):
        """``poll_interval``: the least time between two requests of a standing poll (seconds)."""
        self._broker = broker
        self.poll_interval = poll_interval
        self._followed: OrderedDict[tuple[str, int], tuple[uuid.UUID, Partition]] = OrderedDict()
        self._opening: dict[tuple[str, int], asyncio.Future] = {}
        self._polls: dict[int, _OwnerPoll] = {}  # by owner

    @property
    def available(self) -> bool:
        """Whether this broker can read partitions it does not own (the store shows a ledger being written)."""
        return self._broker.ledgers.follows

    async def partition(self, topic: Topic, index: int) -> Partition:
        """The read-only view of ``topic``-``index``, opened on first use."""
        key = (topic.name, index)
        known = self._followed.get(key)
        if known is not None and known[0] == topic.topic_id:
            self._followed.move_to_end(key)
            return known[1]
        opening = self._opening.get(key)
        if opening is None:
            opening = self._opening[key] = asyncio.ensure_future(self._open(topic, index))
            opening.add_done_callback(lambda _: self._opening.pop(key, None))
        return await asyncio.shield(opening)

    async def _open(self, topic: Topic, index: int) -> Partition:
        broker = self._broker
        ledger = FollowedLedger(f"{topic.name}-{index}", broker.ledgers,
                                MetadataChainRecord(broker.metadata, ledger_list_path(topic, index)))
        partition = Partition(topic.name, index, ledger)
        partition.epochs = [[-1, 0]]  # the owner's epoch is not known here: clients are told not to compare
        await partition.open()
        stale = self._followed.pop((topic.name, index), None)
        if stale is not None:
            await stale[1].ledger.close()
        self._followed[(topic.name, index)] = (topic.topic_id, partition)
        while len(self._followed) > MAX_FOLLOWED:
            _, (_, evicted) = self._followed.popitem(last=False)
            await evicted.ledger.close()
        return partition

    async def refresh(self, partitions: list[Partition],
                      offsets: Mapping[tuple[str, int], int] | None = None) -> dict[tuple[str, int], ErrorCode]:
        """Catch each partition's view up to its owner's high watermark, learned from the owner's
        standing poll, or asked now (one question per owner) for those the poll does not hold
        (or whose view is behind the offset in ``offsets`` a fetch reads from; with no
        ``offsets`` every partition is asked now).

        The errors, by partition, of those that cannot be served here now (the owner moved,
        is gone, or said why not): the client goes to the owner.
        """
        broker = self._broker
        by_owner: dict[int, list[Partition]] = {}
        errors: dict[tuple[str, int], ErrorCode] = {}
        now = time.monotonic()
        for partition in partitions:
            key = (partition.topic, partition.index)
            owner = self._owner(partition)
            for node_id, poll in self._polls.items():
                if node_id != owner:
                    poll.forget(key)  # owned elsewhere now: what that poll learned no longer stands
            if owner is None or owner == broker.node_id:
                errors[key] = ErrorCode.NOT_LEADER_FOR_PARTITION
                continue
            standing = self._polls.get(owner)
            if (standing is not None and standing.holds(partition, now) and offsets is not None
                    and offsets.get(key, -1) <= partition.ledger.high_watermark):
                continue
            by_owner.setdefault(owner, []).append(partition)
        for node_id, found in zip(by_owner, await asyncio.gather(
                *(self._ask(node_id, asked) for node_id, asked in by_owner.items())), strict=True):
            errors.update(found)
            learned = [p for p in by_owner[node_id] if (p.topic, p.index) not in found]
            if learned and self._polls_served(node_id):
                self._poll_for(node_id).add(learned, time.monotonic())
        return errors

    async def wait(self, partitions: list[Partition], max_wait: float) -> None:
        """For a fetch waiting for data: ask the owners that keep no standing poll here (they
        serve only v0) to answer once one of these partitions' high watermarks moves, or after
        ``max_wait`` seconds, and catch the views up (waking the fetch)."""
        by_owner: dict[int, list[Partition]] = {}
        for partition in partitions:
            owner = self._owner(partition)
            if owner is not None and owner != self._broker.node_id and not self._polls_served(owner):
                by_owner.setdefault(owner, []).append(partition)
        await asyncio.gather(*(self._ask(node_id, asked, max_wait) for node_id, asked in by_owner.items()))

    def _owner(self, partition: Partition) -> int | None:
        """The id of the broker the metadata names as ``partition``'s owner, None if none is live."""
        topic = self._broker.topics.get(partition.topic)
        owner = self._broker.leader(topic, partition.index) if topic is not None else None
        return owner.node_id if owner is not None else None

    def _polls_served(self, owner: int) -> bool:
        """Whether ``owner`` serves the standing poll (KgateReadEnd v1)."""
        return self._broker.peers.version(owner, KGATE_READ_END, 1) == 1

    def _poll_for(self, owner: int) -> "_OwnerPoll":
        poll = self._polls.get(owner)
        if poll is None or poll.ended:
            poll = self._polls[owner] = _OwnerPoll(self, owner)
        return poll

    async def _ask(self, owner: int, partitions: list[Partition],
                   max_wait: float = 0.0) -> dict[tuple[str, int], ErrorCode]:
        """Ask ``owner`` for ``partitions``' high watermarks (now, or once one moves within
        ``max_wait``) and catch their views up; the errors of those not servable here."""
        response = await self._request(owner, _request(partitions, max_wait, {}), 0, max_wait)
        if response is None:
            return {(p.topic, p.index): ErrorCode.NOT_LEADER_FOR_PARTITION for p in partitions}
        return await self._learn(response, partitions, {}, True)

    async def _request(self, owner: int, request, version: int, max_wait: float):
        """The owner's answer, or None if it cannot be had (the owner is gone or its link failed)."""
        began = time.monotonic()
        try:
            return await self._broker.peers.request(owner, request, version, max_wait + ASK_TIMEOUT_S)
        except (TimeoutError, PeerUnavailable) as exc:
            log.debug("asking broker %d for high watermarks failed after %.3f s: %s", owner,
                      time.monotonic() - began, exc)
            return None

    async def _learn(self, response, partitions: list[Partition], known: dict[tuple[str, int], int],
                     complete: bool) -> dict[tuple[str, int], ErrorCode]:
        """Catch the views the owner answered for up to what it said (``known`` keeps it); the
        errors of those it refused, and, for a ``complete`` answer, of those it left out."""
        store = self._broker.ledgers
        if response.store_position and isinstance(store, TailHints):
            store.heard(response.store_position)
        served = {(p.topic, p.index): p for p in partitions}
        errors: dict[tuple[str, int], ErrorCode] = {}
        catching_up = []
        for topic in response.topics:
            for answer in topic.partitions:
                answered = served.pop((topic.name, answer.partition_index), None)
                if answered is None:
                    continue
                if answer.error_code != ErrorCode.NONE:
                    errors[(topic.name, answer.partition_index)] = ErrorCode(answer.error_code)
                    continue
                # What the owner said, not the view's end: a view that cannot index that far yet
                # must not have the owner answer at once, again and again.
                known[(topic.name, answer.partition_index)] = answer.high_watermark
                catching_up.append(_catch_up(answered, answer))
        # Together: on object storage the views of one owner's ledgers share one LIST of its WAL objects.
        for key, error in await asyncio.gather(*catching_up):
            if error is not None:
                errors[key] = error
        if complete:
            for key in served:  # not answered for: treated as not servable here
                errors[key] = ErrorCode.NOT_LEADER_FOR_PARTITION
        return errors

    async def close(self) -> None:
        for poll in self._polls.values():
            poll.stop()
        self._polls.clear()
        for _, partition in self._followed.values():
            await partition.ledger.close()
        self._followed.clear()


async def _catch_up(partition: Partition, answer) -> tuple[tuple[str, int], ErrorCode | None]:
    """Catch ``partition``'s view up to the high watermark its owner answered."""
    ledger = partition.ledger
    assert isinstance(ledger, FollowedLedger)
    try:
        # Shielded: a long poll cut short must not leave a view half caught up.
        await asyncio.shield(ledger.catch_up(answer.high_watermark, answer.log_start_offset))
    except (OSError, CorruptLedger, FollowingUnsupported) as exc:
        log.warning("%s-%d: cannot follow its ledgers here: %s", partition.topic, partition.index, exc)
        return (partition.topic, partition.index), ErrorCode.NOT_LEADER_FOR_PARTITION
    return (partition.topic, partition.index), None


class _OwnerPoll:
    """The standing KgateReadEnd long poll to one owner over the partitions this broker serves
    for it (see the module's doc): the views it holds are caught up to the owner's answers."""

    def __init__(self, followers: Followers, owner: int):
        self._followers = followers
        self.owner = owner
        self._held: dict[tuple[str, int], Partition] = {}
        self._used: dict[tuple[str, int], float] = {}  # when a fetch last asked for each (time.monotonic())
        self._known: dict[tuple[str, int], int] = {}  # the high watermarks the owner last answered
        self._changed = asyncio.get_running_loop().create_future()  # the held set grew: open the poll again
        self._reopen = False  # the held set shrank: open the poll again at the next turn
        self._task = asyncio.ensure_future(self._run())
        self.ended = False

    def holds(self, partition: Partition, now: float) -> bool:
        """Whether this view stands for this owner (and note that a fetch used it); not a view
        opened since in its place (the topic made again)."""
        key = (partition.topic, partition.index)
        if self._held.get(key) is not partition:
            return False
        self._used[key] = now
        return True

    def add(self, partitions: list[Partition], now: float) -> None:
        """Hold these views from now on (their owner answered for them a moment ago)."""
        new = False
        for partition in partitions:
            key = (partition.topic, partition.index)
            new = new or key not in self._held
            self._held[key], self._used[key] = partition, now
            self._known.pop(key, None)  # asked a moment ago: the view holds what the owner said
        if new and not self._changed.done():
            self._changed.set_result(None)

    def forget(self, key: tuple[str, int]) -> None:
        if key not in self._held and key not in self._known:
            return  # nothing learned for it: the common case, asked for every partition of every fetch
        self._held.pop(key, None)
        self._used.pop(key, None)
        self._known.pop(key, None)

    def stop(self) -> None:
        self.ended = True
        self._held.clear()
        self._task.cancel()

    async def _run(self) -> None:
        """Open the poll over the held partitions, continue it while the owner answers, open it
        again when the held set changes."""
        epoch = 0  # 0: open (naming the partitions); else continue (naming none: the owner keeps them)
        sent_at = 0.0
        try:
            while self._drop_idle() and self._followers._polls_served(self.owner):
                if self._reopen:
                    epoch, self._reopen = 0, False
                if epoch and self._followers.poll_interval:
                    await self._spaced(sent_at)
                if self._changed.done():  # the held set grew: open the poll again, naming it as it is now
                    self._changed = asyncio.get_running_loop().create_future()
                    epoch = 0
                sent_at = time.monotonic()
                held = list(self._held.values())
                request = _request(held if epoch == 0 else [], POLL_WAIT_S, self._known)
                request.poll_epoch = epoch
                asking = asyncio.ensure_future(self._followers._request(self.owner, request, 1, POLL_WAIT_S))
                changed = self._changed
                await asyncio.wait((asking, changed), return_when=asyncio.FIRST_COMPLETED)
                if changed.done():  # the held set grew while the owner held the poll: opened again above
                    asking.cancel()
                    continue
                response = asking.result()
                if response is None:
                    break  # the owner is gone or its link failed: what was learned is dropped below
                if response.error_code != ErrorCode.NONE:  # not the owner's poll any more: open it again
                    epoch = 0
                    continue
                errors = await self._followers._learn(response, held, self._known, epoch == 0)
                epoch = response.poll_epoch
                for key in errors:
                    self.forget(key)
        finally:
            self.ended = True
            self._held.clear()

    async def _spaced(self, sent_at: float) -> None:
        """Continue the poll no sooner than the poll interval after the last request went out,
        so the owner answers at most once per interval (each answer crosses zones); a change of
        the held set goes at once."""
        remaining = sent_at + self._followers.poll_interval - time.monotonic()
        if remaining > 0:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(remaining):
                    await asyncio.shield(self._changed)

    def _drop_idle(self) -> bool:
        """Let go of the partitions no fetch asked for lately (the poll is opened again without
        them, so they keep the owner from answering no more); whether any are left."""
        since = time.monotonic() - IDLE_S
        for key in [key for key, used in self._used.items() if used < since]:
            self.forget(key)
            self._reopen = True
        return bool(self._held)


def _request(partitions: list[Partition], max_wait: float, known: dict[tuple[str, int], int]) -> KgateReadEndRequest:
    """A KgateReadEnd naming ``partitions`` with the high watermarks known here (``known``, else the views')."""
    by_topic: dict[str, list[Partition]] = {}
    for partition in partitions:
        by_topic.setdefault(partition.topic, []).append(partition)
    return Q(max_wait_ms=int(max_wait * 1000), topics=[
        Q.ReadEndTopic(name=name, partitions=[Q.ReadEndTopic.ReadEndPartition(
            partition_index=p.index, known_high_watermark=known.get((p.topic, p.index), p.ledger.high_watermark))
            for p in asked])
        for name, asked in by_topic.items()])
