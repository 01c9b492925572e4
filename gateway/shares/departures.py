"""What every broker's share-partition leaders learn from a share group's coordinator.

A share group's membership lives with its coordinator, but the records its members hold
are held by the leaders of the topic partitions (``leader.py``), on whichever brokers
serve them, each with its members' share sessions. When a member leaves or its session
expires, what it holds goes back to the group at once, and when the group is deleted
what is held of it is forgotten: as Kafka's coordinator reaches the share-partitions
through the persister and the share-partition manager, this broker applies the change to
its own leaders and tells every other live broker (``KgateShareGone``, broker to broker,
handlers/share_gone.py). A deleted group's persisted state goes with it too, from every
broker's share coordinator (the group's share-partitions' states are placed each on its
own), before DeleteGroups is answered, so a group made again under the same id starts
afresh wherever it reads. A broker that cannot be told of a departure still gets there:
the locks run out.
"""
import asyncio
import logging
from collections.abc import Callable
from typing import Protocol

from kgate.protocol.messages import KgateShareGoneRequest

from ..peer_links import PeerUnavailable
from .coordinator import ShareCoordinator
from .leader import ShareLeaders
from .sessions import ShareSessionCache

log = logging.getLogger(__name__)

TELL_TIMEOUT_S = 10.0


class Peers(Protocol):
    async def request(self, node_id: int, request, version: int, timeout: float): ...


class ShareDepartures:
    def __init__(self, node_id: int, coordinator: ShareCoordinator, sessions: ShareSessionCache,
                 leaders: ShareLeaders, live_brokers: Callable[[], list[int]], peers: Callable[[], Peers]):
        self.node_id = node_id
        self.coordinator = coordinator
        self.sessions = sessions
        self.leaders = leaders
        self._live_brokers = live_brokers
        self._peers = peers
        self._tasks: set[asyncio.Task] = set()

    def close(self) -> None:
        for task in self._tasks:
            task.cancel()

    async def member_gone(self, group_id: str, member_id: str) -> None:
        """The coordinator removed a member (it left, or its session expired)."""
        await self.apply(group_id, False, [member_id])
        for node_id in self._others():  # not waited for: the coordinator's shard goes on meanwhile
            task = asyncio.ensure_future(self._tell(node_id, KgateShareGoneRequest(
                group_id=group_id, group_deleted=False, member_ids=[member_id])))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def group_deleted(self, group_id: str) -> None:
        """The coordinator deleted the group: once this returns, every broker told has forgotten it."""
        await self.apply(group_id, True, [])
        request = KgateShareGoneRequest(group_id=group_id, group_deleted=True, member_ids=[])
        await asyncio.gather(*(self._tell(node_id, request) for node_id in self._others()))

    async def apply(self, group_id: str, deleted: bool, member_ids: list[str]) -> None:
        """This broker's share sessions and share-partitions, told of a departure."""
        for member_id in member_ids:
            self.sessions.drop_member(group_id, member_id)
            await self.leaders.release_member(group_id, member_id)
        if deleted:
            self.leaders.drop_group(group_id)
            await self.coordinator.delete_group(group_id)

    def _others(self) -> list[int]:
        return [node_id for node_id in self._live_brokers() if node_id != self.node_id]

    async def _tell(self, node_id: int, request) -> None:
        try:
            await self._peers().request(node_id, request, 0, TELL_TIMEOUT_S)
        except (PeerUnavailable, TimeoutError) as exc:
            if request.group_deleted:
                log.warning("share group %s deleted, but broker %d could not be told (%s): the group's state it "
                            "holds stays until the group's offsets are deleted or reset", request.group_id, node_id,
                            exc)
            else:
                log.info("share group %s: broker %d not told that %s left (%s); their locks run out instead",
                         request.group_id, node_id, ", ".join(request.member_ids), exc)
