"""When a connection's produces by reference go out together, and how the owner's answer is shared.

A stand-in for the peer links records what is sent; the zone tests in tests/integration
send real references between real brokers.
"""
import asyncio

from kgate.gateway.peer_links import PeerUnavailable
from kgate.gateway.reference_outbox import Produce, ReferenceOutbox
from kgate.protocol.messages import KgateProduceReferenceResponse as R


class Links:
    """Peers that serve KgateProduceReference up to version ``served``."""

    def __init__(self, failing: bool = False, served: int = 1):
        self.sent: list[tuple[int, object, int, asyncio.Future]] = []
        self.failing = failing
        self.served = served

    async def opened(self, owner: int) -> None:
        if self.failing:
            raise PeerUnavailable("no link")

    def version(self, owner: int, api_key: int, highest_here: int) -> int | None:
        return min(self.served, highest_here)

    async def send(self, owner: int, request, version: int) -> asyncio.Future:
        if self.failing:
            raise PeerUnavailable("no link")
        answer = asyncio.get_running_loop().create_future()
        self.sent.append((owner, request, version, answer))
        return answer


def produce(topic: str, index: int) -> Produce:
    return Produce(9, None, 30_000, [(topic, index, f"1-1_0_{index}_10", 10)])


def answer(index: int):
    return [R.ProduceAnswer.AnswerTopic(name="t", partitions=[R.ProduceAnswer.AnswerTopic.AnswerPartition(
        index=index, error_code=0, base_offset=index * 100, log_start_offset=0, error_message=None)])]


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def follow_each_other(links: Links) -> tuple[Produce, Produce]:
    """Two produces whose turns come one after the other, the second staged while the first adds."""
    outbox = ReferenceOutbox(links, None, "127.0.0.1:1")  # type: ignore[arg-type]
    first_turn, second_turn = asyncio.get_running_loop().create_future(), None
    outbox.staged(first_turn)
    outbox.turn_came(None, first_turn)
    first = produce("t", 0)
    outbox.add(1, first)
    await settle()
    assert links.sent == [], "sent while the next produce was about to add"
    first_turn.set_result(None)
    outbox.turn_came(first_turn, second_turn)
    second = produce("t", 1)
    outbox.add(1, second)
    await settle()
    return first, second


def base_offsets(produce) -> list[int]:
    """The base offsets of a produce's answer, partition by partition."""
    return [p.base_offset for t in produce.answer.result().topics for p in t.partitions]


def test_produces_that_follow_each_other_share_one_reference_and_each_gets_its_own_answer():
    async def run():
        links = Links()
        first, second = await follow_each_other(links)
        [(owner, request, version, reply)] = links.sent
        assert (owner, version) == (1, 1)
        assert [[p.index for t in q.topics for p in t.partitions] for q in request.produces] == [[0], [1]]
        reply.set_result(R(throttle_time_ms=0, produces=[R.ProduceAnswer(topics=answer(0)),
                                                         R.ProduceAnswer(topics=answer(1))]))
        await settle()
        assert (base_offsets(first), base_offsets(second)) == ([0], [100])
    asyncio.run(run())


def test_to_an_owner_serving_only_version_0_produces_that_follow_each_other_go_one_v0_request_each_in_order():
    async def run():
        links = Links(served=0)
        first, second = await follow_each_other(links)
        assert [(owner, version, [(t.name, [p.index for p in t.partitions]) for t in request.topics])
                for owner, request, version, _ in links.sent] == [(1, 0, [("t", [0])]), (1, 0, [("t", [1])])]
        for (_, _, _, reply), index in zip(reversed(links.sent), (1, 0), strict=True):
            reply.set_result(R(throttle_time_ms=0, topics=answer(index)))
        await settle()
        assert (base_offsets(first), base_offsets(second)) == ([0], [100])
    asyncio.run(run())


def test_a_produce_no_staged_one_follows_goes_at_once_as_version_0():
    async def run():
        links = Links()
        outbox = ReferenceOutbox(links, "alice", "127.0.0.1:1")  # type: ignore[arg-type]
        mine = asyncio.get_running_loop().create_future()
        outbox.turn_came(None, mine)
        outbox.add(2, produce("t", 3))
        await settle()
        [(owner, request, version, _)] = links.sent
        assert (owner, version, request.principal) == (2, 0, "alice")
        assert [(t.name, [p.index for p in t.partitions]) for t in request.topics] == [("t", [3])]
    asyncio.run(run())


def test_a_link_that_cannot_be_had_fails_each_produce_on_it():
    async def run():
        outbox = ReferenceOutbox(Links(failing=True), None, "127.0.0.1:1")  # type: ignore[arg-type]
        outbox.turn_came(None, None)
        produces = [produce("t", 0), produce("t", 1)]
        for p in produces:
            outbox.add(1, p)
        await settle()
        assert all(isinstance(p.answer.exception(), PeerUnavailable) for p in produces)
    asyncio.run(run())
