"""Partitions other brokers own, read here for clients of this broker's zone.

A consumer in this zone is sent here by the owner (Fetch's preferred_read_replica) and
reads from shared storage through a :class:`FollowedLedger`: no record byte crosses
zones. What may be served is the owner's to say, so before each read the owner is
asked for its high watermark with a small request over the pooled peer link
(``KgateReadEnd``, gateway/handlers/read_end.py); a fetch that waits for data asks
it to answer as soon as its high watermark moves (a long poll), so a tail read here
lags the owner's acknowledgement by one small round trip and a read of shared storage
(on object storage, a GET of each of the owner's new WAL objects, which its answer names:
the partitions of one owner answered together are caught up together and share them).
The answer is not cached across fetches: one request of a few dozen bytes per fetch
per owner is cheap, and a stale high watermark would answer OFFSET_OUT_OF_RANGE to a
consumer that had just read further at the owner.

Views are opened on first use and the least recently used are closed past
``MAX_FOLLOWED`` (each holds its ledgers' file handles or indexes).
"""
import asyncio
import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import Mapping
from typing import Protocol

from kgate.metadata.cluster import BrokerInfo, Topic, ledger_list_path
from kgate.metadata.store import MetadataStore
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
    def __init__(self, broker: FollowingBroker):
        self._broker = broker
        self._followed: OrderedDict[tuple[str, int], tuple[uuid.UUID, Partition]] = OrderedDict()
        self._opening: dict[tuple[str, int], asyncio.Future] = {}

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

    async def refresh(self, partitions: list[Partition], max_wait: float = 0.0) -> dict[tuple[str, int], ErrorCode]:
        """Learn each partition's high watermark from its owner and catch its view up to it.

        With ``max_wait`` an owner answers once a high watermark moves past the one known
        here, or after that many seconds. The errors, by partition, of those that cannot be
        served here now (the owner moved, is gone, or said why not): the client goes to the owner.
        """
        broker = self._broker
        by_owner: dict[int, list[Partition]] = {}
        errors: dict[tuple[str, int], ErrorCode] = {}
        for partition in partitions:
            topic = broker.topics.get(partition.topic)
            owner = broker.leader(topic, partition.index) if topic is not None else None
            if owner is None or owner.node_id == broker.node_id:
                errors[(partition.topic, partition.index)] = ErrorCode.NOT_LEADER_FOR_PARTITION
            else:
                by_owner.setdefault(owner.node_id, []).append(partition)
        for found in await asyncio.gather(*(self._ask(owner, asked, max_wait) for owner, asked in by_owner.items())):
            errors.update(found)
        return errors

    async def _ask(self, owner: int, partitions: list[Partition], max_wait: float) -> dict[tuple[str, int], ErrorCode]:
        by_topic: dict[str, list[Partition]] = {}
        for partition in partitions:
            by_topic.setdefault(partition.topic, []).append(partition)
        request = Q(max_wait_ms=int(max_wait * 1000), topics=[
            Q.ReadEndTopic(name=name, partitions=[Q.ReadEndTopic.ReadEndPartition(
                partition_index=p.index, known_high_watermark=p.ledger.high_watermark) for p in asked])
            for name, asked in by_topic.items()])
        began = time.monotonic()
        try:
            response = await self._broker.peers.request(owner, request, 0, max_wait + ASK_TIMEOUT_S)
        except (TimeoutError, PeerUnavailable) as exc:
            log.debug("asking broker %d for high watermarks failed after %.3f s: %s", owner,
                      time.monotonic() - began, exc)
            return {(p.topic, p.index): ErrorCode.NOT_LEADER_FOR_PARTITION for p in partitions}
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
                catching_up.append(_catch_up(answered, answer))
        # Together: on object storage the views of one owner's ledgers share one LIST of its WAL objects.
        for key, error in await asyncio.gather(*catching_up):
            if error is not None:
                errors[key] = error
        for key in served:  # not answered for: treated as not servable here
            errors[key] = ErrorCode.NOT_LEADER_FOR_PARTITION
        return errors

    async def close(self) -> None:
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
