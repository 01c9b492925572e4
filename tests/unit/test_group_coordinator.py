"""The coordinator as the group machine's driver: parked requests are futures answered by
the machine's effects, and group records go through its write path (faked here)."""
import asyncio
import itertools
import logging
from types import SimpleNamespace

from kgate.gateway.config import Settings
from kgate.gateway.groups import GroupCoordinator, JoinRequest
from kgate.gateway.groups.group import GroupState
from kgate.protocol.error_codes import ErrorCode


def coordinator(store=None):
    """A coordinator owning every offsets partition, whose appends ``store`` fakes."""
    settings = Settings()
    settings.values["group.initial.rebalance.delay.ms"] = 0
    coordinator = GroupCoordinator(SimpleNamespace(settings=settings))
    coordinator._owned.update(range(coordinator.num_partitions))
    written = []

    async def write(group_id, keyed):
        written.append(keyed)
        if store is not None:
            await store()

    coordinator._write = write
    coordinator.written = written
    return coordinator


def join_request(member_id="", client="c", group="g"):
    return JoinRequest(group, member_id, None, client, "/10.0.0.1", 10_000, 30_000, "consumer", [("range", b"sub")],
                       False, False)


async def two_members(groups, group="g"):
    """Members a and b joined in one generation (CompletingRebalance): (a, b, generation)."""
    first = await groups.join(join_request(client="a", group=group))
    b_joins = asyncio.ensure_future(groups.join(join_request(client="b", group=group)))
    await asyncio.sleep(0)
    a_rejoined = await groups.join(join_request(first.member_id, client="a", group=group))
    b_joined = await b_joins
    assert a_rejoined.generation == b_joined.generation == 2
    return a_rejoined.member_id, b_joined.member_id, 2


async def test_the_leaders_assignment_is_written_before_anyone_is_answered():
    groups = coordinator()
    a, b, generation = await two_members(groups)
    follower = asyncio.ensure_future(groups.sync("g", generation, b, None, None, None, {}))
    await asyncio.sleep(0)
    assert not follower.done()
    leader = await groups.sync("g", generation, a, None, None, None, {a: b"A", b: b"B"})
    assert leader == (ErrorCode.NONE, b"A") and await follower == (ErrorCode.NONE, b"B")
    [(key, _, value)] = groups.written[-1]
    assert key == ("group", "g") and value.generation == generation
    assert {m.member_id: m.assignment for m in value.members} == {a: b"A", b: b"B"}
    assert groups.groups["g"].state is GroupState.STABLE
    await groups.close()


async def test_a_failed_assignment_write_answers_coordinator_not_available_and_rebalances(caplog):
    failing = False

    async def store():
        if failing:
            raise OSError("disk full")

    groups = coordinator(store)
    a, b, generation = await two_members(groups)
    follower = asyncio.ensure_future(groups.sync("g", generation, b, None, None, None, {}))
    failing = True
    with caplog.at_level(logging.INFO, logger="kgate.gateway.groups.coordinator"):
        leader = await groups.sync("g", generation, a, None, None, None, {a: b"A", b: b"B"})
    assert leader == await follower == (ErrorCode.COORDINATOR_NOT_AVAILABLE, b"")
    assert groups.groups["g"].state is GroupState.PREPARING_REBALANCE
    assert f"group g: storing generation {generation} failed" in caplog.messages
    assert "group g rebalancing (generation 2): storing the assignment failed" in caplog.messages
    await groups.close()


async def test_losing_the_partition_answers_parked_requests_not_coordinator():
    groups = coordinator()
    index = groups.partition_of("g")
    neighbour = next(f"h{i}" for i in itertools.count() if groups.partition_of(f"h{i}") == index)
    _, b, generation = await two_members(groups)
    await two_members(groups, neighbour)
    parked = [asyncio.ensure_future(groups.sync("g", generation, b, None, None, None, {})),
              asyncio.ensure_future(groups.join(join_request(client="c", group=neighbour)))]
    await asyncio.sleep(0)
    groups.lose(index)
    (sync_error, _), join_result = await asyncio.gather(*parked)
    assert sync_error == join_result.error == ErrorCode.NOT_COORDINATOR
    assert groups.groups == {} and groups._timers == {} and groups._parked == {}


async def test_a_cancelled_parked_join_still_counts_and_its_answer_goes_nowhere():
    """A closed connection cancels the parked JoinGroup; the rebalance completes without it."""
    groups = coordinator()
    a, b, _ = await two_members(groups)
    joining = asyncio.ensure_future(groups.join(join_request(client="c")))
    await asyncio.sleep(0)
    c = list(groups.groups["g"].members)[-1]
    joining.cancel()
    await asyncio.sleep(0)
    assert groups.groups["g"].members[c].awaiting_join and groups._parked == {}
    b_rejoins = asyncio.ensure_future(groups.join(join_request(b, client="b")))
    await asyncio.sleep(0)
    a_rejoined = await groups.join(join_request(a, client="a"))
    assert a_rejoined.generation == (await b_rejoins).generation == 3
    assert [m for m, _, _ in a_rejoined.members] == [a, b, c]
    assert groups.groups["g"].state is GroupState.COMPLETING_REBALANCE and groups._parked == {}
    await groups.close()
