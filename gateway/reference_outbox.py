"""A client connection's produces by reference on their way to the owners, sent together when they can be.

On object storage a zone's broker stages a connection's pipelined produces in its next WAL
object, so their staging ends at once, at the commit, and each then sends the owner its
reference in the connection's turn (gateway/handlers/produce.py). Each small reference
costs a request and an answer across zones; this outbox lets the produces that go one
right after the other share one KgateProduceReference v1 per owner, which lists them in
the order they were sent (the owner appends them in that order and answers each on its
own, gateway/handlers/produce_reference.py).

When to send: a produce adds its references when its turn comes; the outbox then waits
only while the connection's next produce has its references staged and is waiting for
that turn (it adds its own in the same pass of the event loop, or nearly); otherwise it
sends at once, so no produce waits for one that is still staging or never comes. A lone
produce goes as version 0, which every broker version serves, and so does each produce to an
owner that serves only version 0 (in a rolling upgrade; its link says, gateway/peer_links.py).
"""
import asyncio
import functools
import logging
from dataclasses import dataclass, field

from kgate.protocol.api_versions import KGATE_PRODUCE_REFERENCE
from kgate.protocol.messages import KgateProduceReferenceRequest

from .peer_links import PeerLinks, PeerUnavailable

log = logging.getLogger(__name__)

Q = KgateProduceReferenceRequest
V1 = Q.ReferencedProduce


@dataclass(slots=True)
class Produce:
    """One client produce's references to one owner, and the future of the owner's answer to it
    (an object with ``topics``: each topic's ``name`` and ``partitions``)."""

    version: int
    transactional_id: str | None
    timeout_ms: int
    staged: list[tuple[str, int, str, int]]  # (topic, partition, staged name, size), in request order
    answer: asyncio.Future = field(default_factory=lambda: asyncio.get_running_loop().create_future())


class ReferenceOutbox:
    """One per client connection (see the module's doc): the references go over ``links``
    naming the client by its ``principal`` and ``address``."""

    def __init__(self, links: PeerLinks, principal: str | None, address: str) -> None:
        self._links, self._principal, self._address = links, principal, address
        self._waiting: set[asyncio.Future] = set()  # the turns staged produces wait for
        self._last: asyncio.Future | None = None  # the turn of the produce that added last
        self._pending: dict[int, list[Produce]] = {}  # by owner, in the connection's order
        self._check: asyncio.Handle | None = None

    def staged(self, behind: asyncio.Future | None) -> None:
        """A produce has its references staged and waits for the turn ``behind``."""
        if behind is not None and not behind.done():
            self._waiting.add(behind)

    def turn_came(self, behind: asyncio.Future | None, mine: asyncio.Future | None) -> None:
        """That produce's turn came (or it gave up): it adds its references now, if any."""
        if behind is not None:
            self._waiting.discard(behind)
        self._last = mine
        self._schedule()

    def add(self, owner: int, produce: Produce) -> None:
        self._pending.setdefault(owner, []).append(produce)
        self._schedule()

    def _schedule(self) -> None:
        if self._check is None:
            self._check = asyncio.get_running_loop().call_soon(self._send_unless_followed)

    def _send_unless_followed(self) -> None:
        self._check = None
        if self._last is not None and self._last in self._waiting:
            return  # the next produce adds in a moment, and checks again
        pending, self._pending = self._pending, {}
        for owner, produces in pending.items():
            asyncio.ensure_future(self._send(owner, produces))

    async def _send(self, owner: int, produces: list[Produce]) -> None:
        """Send ``produces`` to ``owner`` in their order: in one v1 request if the owner serves
        v1, else each as its own v0 request (an owner not upgraded yet), written one after the other."""
        unsent = produces
        try:
            await self._links.opened(owner)  # its versions are known from here on
            grouped = len(produces) > 1 and self._links.version(owner, KGATE_PRODUCE_REFERENCE, 1) == 1
            for batch in [produces] if grouped else [[produce] for produce in produces]:
                request, version = _reference(self._principal, self._address, batch)
                answer = await self._links.send(owner, request, version)
                answer.add_done_callback(functools.partial(_answered, produces=batch, version=version))
                unsent = unsent[len(batch):]
        except PeerUnavailable as exc:
            for produce in unsent:
                produce.answer.set_exception(exc)


def _reference(principal: str | None, address: str, produces: list[Produce]) -> tuple[Q, int]:
    """The request naming ``produces`` (version 0 for one), and its version."""
    if len(produces) == 1:
        (produce,) = produces
        return Q(produce_version=produce.version, principal=principal, client_address=address,
                 transactional_id=produce.transactional_id, timeout_ms=produce.timeout_ms,
                 topics=_topics(produce, Q.ReferenceTopic, Q.ReferenceTopic.ReferencePartition)), 0
    return Q(principal=principal, client_address=address, produces=[V1(
        produce_version=produce.version, transactional_id=produce.transactional_id, timeout_ms=produce.timeout_ms,
        topics=_topics(produce, V1.ReferencedTopic, V1.ReferencedTopic.ReferencedPartition))
        for produce in produces]), 1


def _topics(produce: Produce, topic_class, partition_class) -> list:
    """``produce``'s staged record sets by topic, in the classes of the request's version."""
    by_topic: dict[str, list] = {}
    for name, index, staged, size in produce.staged:
        by_topic.setdefault(name, []).append(partition_class(index=index, staged=staged, size=size))
    return [topic_class(name=name, partitions=partitions) for name, partitions in by_topic.items()]


def _answered(done: asyncio.Future, produces: list[Produce], version: int) -> None:
    """Each produce's share of the owner's answer (or of the link's failure)."""
    failure = PeerUnavailable("the reference was not answered") if done.cancelled() else done.exception()
    if failure is not None:
        for produce in produces:
            produce.answer.set_exception(failure)
        return
    response = done.result()
    shares = [response] if version == 0 else response.produces
    if len(shares) != len(produces):
        log.warning("an owner answered %d of %d produces by reference", len(shares), len(produces))
    for index, produce in enumerate(produces):
        if index < len(shares):
            produce.answer.set_result(shares[index])
        else:
            produce.answer.set_exception(PeerUnavailable("the owner did not answer this produce"))
