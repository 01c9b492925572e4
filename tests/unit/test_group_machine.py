"""The classic group protocol's rules, driven without an event loop: a fake driver carries
out the machine's effects and a fake clock fires its timers."""
import ast
import itertools
import pathlib
from collections import defaultdict

import pytest

from kgate.gateway.groups.effects import (
    AfterStore,
    AnswerJoin,
    AnswerSync,
    ArmTimer,
    CancelTimer,
    JoinResult,
    Log,
    Park,
    StoreGroup,
    Timer,
    TimerKey,
    Wait,
)
from kgate.gateway.groups.group import Group, GroupState
from kgate.gateway.groups.machine import GroupMachine, JoinRequest
from kgate.protocol.error_codes import ErrorCode

SESSION_MS = 10_000
REBALANCE_MS = 30_000
RANGE = (("range", b"sub"),)


class Driver:
    """Does what the coordinator does with effects, keeping them for the test to read."""

    def __init__(self, initial_delay_ms=0, max_size=100):
        ids = itertools.count(1)
        self.machine = GroupMachine(min_session_ms=6000, max_session_ms=300_000, initial_delay_ms=initial_delay_ms,
                                    max_size=max_size, new_member_id=lambda prefix: f"{prefix}-{next(ids)}")
        self.now = 1_000_000
        self.timers: dict[TimerKey, int] = {}
        self.parked: set[tuple[Wait, str, str]] = set()
        # Parked requests whose connection went away while the machine still counts them.
        self.orphans: set[tuple[Wait, str, str]] = set()
        self.answers: dict[tuple[Wait, str], list] = defaultdict(list)
        self.stores: list[StoreGroup] = []
        self.logs: list[str] = []

    def carry_out(self, effects):
        for effect in effects:
            match effect:
                case Park(group_id=g, member_id=m, kind=kind):
                    self.parked.add((kind, g, m))
                case AnswerJoin(group_id=g, member_id=m, result=result):
                    self._unpark((Wait.JOIN, g, m))
                    self.answers[Wait.JOIN, m].append(result)
                case AnswerSync(group_id=g, member_id=m, error=error, assignment=assignment):
                    self._unpark((Wait.SYNC, g, m))
                    self.answers[Wait.SYNC, m].append((error, assignment))
                case ArmTimer(key=key, deadline_ms=deadline):
                    self.timers.pop(key, None)
                    self.timers[key] = deadline
                case CancelTimer(key=key):
                    self.timers.pop(key, None)
                case StoreGroup():
                    self.stores.append(effect)
                case Log(message=message, args=args):
                    self.logs.append(message % args)
        # The machine's marks and the requests it parked agree after every step.
        marked = {(kind, g.group_id, m.member_id) for g in self.machine.groups.values() for m in g.members.values()
                  for kind, on in ((Wait.JOIN, m.awaiting_join), (Wait.SYNC, m.awaiting_sync)) if on}
        assert marked == self.parked | self.orphans

    def _unpark(self, key):
        if key in self.orphans:
            self.orphans.remove(key)
        else:
            self.parked.remove(key)

    def abandon(self, kind, member_id, *, group="g"):
        """The parked request's connection closed: the driver forgets it and tells the machine."""
        key = (kind, group, member_id)
        self.parked.remove(key)
        self.machine.abandoned(group, member_id, kind)
        member = self.machine.groups[group].members[member_id]
        if (member.awaiting_join if kind is Wait.JOIN else member.awaiting_sync):
            self.orphans.add(key)

    # -- requests ---------------------------------------------------------------------------------

    def join(self, member_id="", *, group="g", instance=None, client="c", protocols=RANGE, session=SESSION_MS,
             rebalance=REBALANCE_MS, protocol_type="consumer", known_id_required=False, skip_supported=False):
        step = self.machine.join(self.now, JoinRequest(
            group, member_id, instance, client, "/10.0.0.1", session, rebalance, protocol_type, list(protocols),
            known_id_required, skip_supported))
        return self.settle(step)

    def sync(self, member_id, generation, assignments=None, *, group="g", instance=None):
        return self.settle(self.machine.sync(self.now, group, generation, member_id, instance, None, None,
                                             assignments or {}))

    def settle(self, step):
        """The request's answer as its client sees it: given now, or by the step it parked in; else None."""
        self.carry_out(step.effects)
        if step.reply is not None:
            return step.reply
        [park] = [effect for effect in step.effects if isinstance(effect, Park)]
        if (park.kind, park.group_id, park.member_id) in self.parked:
            return None
        return self.answers[park.kind, park.member_id].pop()

    def heartbeat(self, member_id, generation, *, group="g", instance=None):
        step = self.machine.heartbeat(self.now, group, generation, member_id, instance)
        self.carry_out(step.effects)
        return step.reply

    def leave(self, *leaving, group="g"):
        step = self.machine.leave(self.now, group, list(leaving))
        self.carry_out(step.effects)
        return step.reply

    def check_commit(self, member_id, generation, *, group="g", instance=None):
        step = self.machine.check_commit(self.now, group, generation, member_id, instance)
        self.carry_out(step.effects)
        return step.reply

    def stored(self, generation, ok=True, *, group="g"):
        self.carry_out(self.machine.assignment_stored(self.now, group, generation, ok))

    def advance(self, ms):
        """Move the clock, firing due timers in deadline order (timers they arm may fire too)."""
        target = self.now + ms
        while True:
            due = [(deadline, key) for key, deadline in self.timers.items() if deadline <= target]
            if not due:
                break
            deadline, key = min(due, key=lambda item: item[0])
            del self.timers[key]
            self.now = deadline
            self.carry_out(self.machine.timer_fired(self.now, key))
        self.now = target

    # -- reading ----------------------------------------------------------------------------------

    def answer(self, kind, member_id):
        """The oldest answer the member's parked request got and the test has not read."""
        assert self.answers[kind, member_id], f"no {kind.value} answer for {member_id}"
        return self.answers[kind, member_id].pop(0)

    def unanswered(self, kind, member_id):
        return not self.answers[kind, member_id]

    def group(self, group_id="g"):
        return self.machine.groups[group_id]

    def deadline(self, kind, member_id="", group="g"):
        return self.timers.get(TimerKey(group, kind, member_id))


def stable(driver, count, **join_options):
    """A Stable group "g" of ``count`` members and its generation (the leader first)."""
    first = driver.join(client="m0", **join_options)  # alone, it completes a generation at once
    members = [first.member_id]
    for i in range(1, count):
        assert driver.join(client=f"m{i}", **join_options) is None
        members.append(list(driver.group().members)[-1])
    if count > 1:
        driver.join(first.member_id, **join_options)
    generation = driver.group().generation
    leader, *followers = members
    for follower in followers:
        assert driver.sync(follower, generation) is None
    driver.sync(leader, generation, {m: f"part-of-{m}".encode() for m in members})
    driver.stored(generation)
    assert driver.group().state is GroupState.STABLE
    driver.answers.clear()
    driver.stores.clear()
    driver.logs.clear()
    return members, generation


def follower_syncing(driver):
    """A Stable group of two that rejoined (CompletingRebalance), follower b parked in
    SyncGroup for the new generation; returns a, b and the generation before."""
    (a, b), generation = stable(driver, 2)
    driver.join(a)
    driver.join(b)
    driver.sync(b, generation + 1)
    return a, b, generation


# -- the first generation -------------------------------------------------------------------------


def test_first_join_without_delay_completes_at_once():
    driver = Driver()
    result = driver.join()
    assert result == JoinResult(ErrorCode.NONE, "c-1", 1, "consumer", "range", "c-1", [("c-1", None, b"sub")])
    group = driver.group()
    assert group.state is GroupState.COMPLETING_REBALANCE and group.leader_id == "c-1"
    assert driver.deadline(Timer.SESSION, "c-1") == driver.now + SESSION_MS
    assert driver.deadline(Timer.REBALANCE) is None
    assert driver.logs == ["group g rebalancing (generation 0): member c-1 joined",
                           "group g generation 1: 1 members, protocol range, leader c-1"]


def test_initial_delay_gathers_the_first_generation():
    driver = Driver(initial_delay_ms=3000)
    assert driver.join(client="a") is None and driver.join(client="b") is None
    assert driver.group().state is GroupState.PREPARING_REBALANCE
    assert driver.deadline(Timer.REBALANCE) == driver.now + 3000
    driver.advance(2999)
    assert driver.unanswered(Wait.JOIN, "a-1") and driver.unanswered(Wait.JOIN, "b-2")
    driver.advance(1)
    leader, follower = driver.answer(Wait.JOIN, "a-1"), driver.answer(Wait.JOIN, "b-2")
    assert (leader.generation, leader.leader_id, [m for m, _, _ in leader.members]) == (1, "a-1", ["a-1", "b-2"])
    assert (follower.generation, follower.leader_id, follower.members) == (1, "a-1", [])
    assert driver.deadline(Timer.REBALANCE) is None


def test_after_the_initial_delay_the_rebalance_waits_for_outstanding_member_ids():
    driver = Driver(initial_delay_ms=3000)
    driver.join(client="a")
    required = driver.join(client="b", known_id_required=True)
    assert required.error == ErrorCode.MEMBER_ID_REQUIRED
    driver.advance(3000)
    assert driver.unanswered(Wait.JOIN, "a-1")
    assert driver.deadline(Timer.REBALANCE) == driver.now + REBALANCE_MS
    driver.advance(1000)
    assert driver.join(required.member_id, client="b").generation == 1
    assert driver.answer(Wait.JOIN, "a-1").generation == 1


def test_member_id_required_then_rejoin_with_it():
    driver = Driver()
    required = driver.join(known_id_required=True)
    assert (required.error, required.member_id) == (ErrorCode.MEMBER_ID_REQUIRED, "c-1")
    assert driver.group().state is GroupState.EMPTY and driver.group().pending_members == {"c-1"}
    assert driver.deadline(Timer.PENDING, "c-1") == driver.now + SESSION_MS
    joined = driver.join("c-1", known_id_required=True)
    assert (joined.error, joined.member_id, joined.generation) == (ErrorCode.NONE, "c-1", 1)
    assert driver.group().pending_members == set() and driver.deadline(Timer.PENDING, "c-1") is None


def test_an_unused_member_id_expires_and_an_otherwise_empty_group_goes():
    driver = Driver()
    required = driver.join(known_id_required=True)
    driver.advance(SESSION_MS)
    assert "g" not in driver.machine.groups
    assert driver.join(required.member_id).error == ErrorCode.UNKNOWN_MEMBER_ID


def test_an_unused_member_id_holds_a_rebalance_until_it_expires():
    driver = Driver()
    (a,), generation = stable(driver, 1)
    required = driver.join(client="b", known_id_required=True)
    assert driver.group().state is GroupState.STABLE, "handing out an id is no rebalance"
    assert driver.join(a) is None  # the leader rejoins: a rebalance that waits for the pending id
    driver.advance(SESSION_MS - 1)
    assert driver.unanswered(Wait.JOIN, a)
    driver.advance(1)
    assert driver.answer(Wait.JOIN, a).generation == generation + 1
    assert required.member_id not in driver.group().pending_members


# -- JoinGroup -----------------------------------------------------------------------------------


def test_several_members_join_and_only_the_leader_gets_the_member_list():
    driver = Driver()
    (a,), generation = stable(driver, 1)
    assert driver.join(client="b") is None
    assert driver.group().state is GroupState.PREPARING_REBALANCE
    assert driver.heartbeat(a, generation) == ErrorCode.REBALANCE_IN_PROGRESS
    leader, follower = driver.join(a), driver.answer(Wait.JOIN, "b-2")
    assert leader.generation == follower.generation == generation + 1
    assert leader.leader_id == follower.leader_id == a
    assert [m for m, _, _ in leader.members] == [a, "b-2"] and follower.members == []


@pytest.mark.parametrize("request_options, error", [
    ({"session": 5999}, ErrorCode.INVALID_SESSION_TIMEOUT),
    ({"session": 300_001}, ErrorCode.INVALID_SESSION_TIMEOUT),
    ({"protocol_type": "connect"}, ErrorCode.INCONSISTENT_GROUP_PROTOCOL),
    ({"protocols": (("sticky", b""),)}, ErrorCode.INCONSISTENT_GROUP_PROTOCOL),
    ({"member_id": "stranger"}, ErrorCode.UNKNOWN_MEMBER_ID),
])
def test_join_refusals(request_options, error):
    driver = Driver()
    stable(driver, 1)
    options = dict(request_options)
    assert driver.join(options.pop("member_id", ""), **options).error == error
    assert driver.group().state is GroupState.STABLE


def test_a_new_group_needs_a_protocol_type_and_a_protocol():
    driver = Driver()
    assert driver.join(protocols=()).error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert driver.join(protocol_type="").error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_group_max_size_counts_members_waiting_to_rejoin_with_their_id():
    driver = Driver(max_size=2)
    stable(driver, 1)
    assert driver.join(client="b", known_id_required=True).error == ErrorCode.MEMBER_ID_REQUIRED
    full = driver.join(client="c", known_id_required=True)
    assert (full.error, full.member_id) == (ErrorCode.GROUP_MAX_SIZE_REACHED, "")
    assert len(driver.group().pending_members) == 1


def test_a_known_member_repeating_its_join_is_answered_without_a_rebalance():
    driver = Driver()
    (a, b), generation = stable(driver, 2)
    follower = driver.join(b)
    assert (follower.error, follower.generation, follower.members) == (ErrorCode.NONE, generation, [])
    assert driver.group().state is GroupState.STABLE
    assert driver.join(b, protocols=(("range", b"new topics"),)) is None, "new metadata means a rebalance"
    assert driver.group().state is GroupState.PREPARING_REBALANCE
    assert driver.join(a).generation == generation + 1
    # CompletingRebalance: a retried join (its answer was lost) gets the same generation again.
    again = driver.join(a)
    assert (again.generation, again.leader_id, len(again.members)) == (generation + 1, a, 2)
    assert driver.group().state is GroupState.COMPLETING_REBALANCE


def test_the_leader_rejoining_a_stable_group_rebalances():
    driver = Driver()
    (a, _b), _ = stable(driver, 2)
    assert driver.join(a) is None
    assert driver.group().state is GroupState.PREPARING_REBALANCE


def test_a_repeated_join_answers_the_parked_one_rebalance_in_progress():
    driver = Driver()
    (a, b), generation = stable(driver, 2)
    assert driver.join(a) is None and driver.join(a) is None
    assert driver.answer(Wait.JOIN, a) == JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, a)
    driver.join(b)
    assert driver.answer(Wait.JOIN, a).generation == generation + 1


# -- SyncGroup -----------------------------------------------------------------------------------


def test_leader_sync_stores_the_assignment_before_the_group_is_stable():
    driver = Driver()
    driver.join(client="a")
    driver.join(client="b")
    driver.join("a-1")
    generation = driver.group().generation
    assert driver.sync("b-2", generation) is None, "a follower waits for the leader"
    assert driver.sync("a-1", generation, {"a-1": b"A", "b-2": b"B"}) is None
    [store] = driver.stores
    assert store.then is AfterStore.REPORT and store.value.generation == generation
    assert {m.member_id: m.assignment for m in store.value.members} == {"a-1": b"A", "b-2": b"B"}
    assert driver.group().state is GroupState.COMPLETING_REBALANCE
    assert driver.unanswered(Wait.SYNC, "a-1") and driver.unanswered(Wait.SYNC, "b-2")
    driver.stored(generation)
    assert driver.group().state is GroupState.STABLE
    assert driver.answer(Wait.SYNC, "a-1") == (ErrorCode.NONE, b"A")
    assert driver.answer(Wait.SYNC, "b-2") == (ErrorCode.NONE, b"B")
    assert driver.sync("b-2", generation) == (ErrorCode.NONE, b"B")


def test_a_failed_assignment_store_answers_coordinator_not_available_and_rebalances():
    driver = Driver()
    (a, b), generation = stable(driver, 2)
    driver.join(a)
    driver.join(b)
    generation += 1
    driver.sync(b, generation)
    driver.sync(a, generation, {a: b"A", b: b"B"})
    driver.stored(generation, ok=False)
    assert driver.answer(Wait.SYNC, a) == driver.answer(Wait.SYNC, b) == (ErrorCode.COORDINATOR_NOT_AVAILABLE, b"")
    assert driver.group().state is GroupState.PREPARING_REBALANCE
    assert driver.logs[-1] == f"group g rebalancing (generation {generation}): storing the assignment failed"


def test_an_assignment_stored_after_the_group_moved_on_changes_nothing():
    driver = Driver()
    (a, b), generation = stable(driver, 2)
    driver.join(a)
    driver.join(b)
    driver.sync(a, generation + 1, {a: b"A"})
    driver.leave((b, None))  # while the leader's assignment is being stored
    assert driver.answer(Wait.SYNC, a) == (ErrorCode.REBALANCE_IN_PROGRESS, b"")
    assert driver.join(a).generation == generation + 2
    driver.stored(generation + 1)
    assert driver.group().state is GroupState.COMPLETING_REBALANCE
    assert driver.unanswered(Wait.SYNC, a)


@pytest.mark.parametrize("member, generation_offset, error", [
    ("stranger", 0, ErrorCode.UNKNOWN_MEMBER_ID),
    ("m0-1", 1, ErrorCode.ILLEGAL_GENERATION),
])
def test_sync_refusals(member, generation_offset, error):
    driver = Driver()
    _, generation = stable(driver, 1)
    assert driver.sync(member, generation + generation_offset) == (error, b"")


def test_sync_while_preparing_is_refused_and_in_stable_returns_the_assignment():
    driver = Driver()
    (a, b), generation = stable(driver, 2)
    assert driver.sync(b, generation) == (ErrorCode.NONE, f"part-of-{b}".encode())
    driver.join(a)
    assert driver.sync(b, generation) == (ErrorCode.REBALANCE_IN_PROGRESS, b"")


# -- Heartbeat and sessions ------------------------------------------------------------------------


def test_heartbeat_errors():
    driver = Driver()
    assert driver.heartbeat("a", 0, group="nowhere") == ErrorCode.UNKNOWN_MEMBER_ID
    (a, b), generation = stable(driver, 2)
    assert driver.heartbeat("stranger", generation) == ErrorCode.UNKNOWN_MEMBER_ID
    assert driver.heartbeat(a, generation + 1) == ErrorCode.ILLEGAL_GENERATION
    assert driver.heartbeat(a, generation) == ErrorCode.NONE
    driver.join(a)
    assert driver.heartbeat(b, generation) == ErrorCode.REBALANCE_IN_PROGRESS
    driver.join(b)
    assert driver.heartbeat(b, generation + 1) == ErrorCode.NONE, "CompletingRebalance: heartbeats are fine"


def test_heartbeats_to_an_empty_group_find_no_member():
    driver = Driver()
    driver.join(known_id_required=True)
    assert driver.heartbeat("c-1", 0) == ErrorCode.UNKNOWN_MEMBER_ID


def test_a_heartbeat_puts_the_session_deadline_back():
    driver = Driver()
    (a, b), generation = stable(driver, 2)
    driver.advance(SESSION_MS - 1)
    assert driver.heartbeat(a, generation) == ErrorCode.NONE
    assert driver.deadline(Timer.SESSION, a) == driver.now + SESSION_MS
    driver.advance(1)
    assert b not in driver.group().members and a in driver.group().members
    assert f"group g: member {b} session expired" in driver.logs


def test_session_expiry_in_stable_rebalances_the_rest():
    driver = Driver()
    (a, b), generation = stable(driver, 2)
    driver.join(a)  # parked: kept alive while b's session runs out
    driver.advance(SESSION_MS)
    assert list(driver.group().members) == [a]
    assert driver.answer(Wait.JOIN, a).generation == generation + 1
    assert driver.heartbeat(b, generation) == ErrorCode.UNKNOWN_MEMBER_ID


def test_session_expiry_in_completing_rebalance_answers_the_parked_syncs():
    driver = Driver()
    a, b, generation = follower_syncing(driver)  # the leader never syncs, nor heartbeats
    driver.advance(SESSION_MS - 1)
    driver.heartbeat(b, generation + 1)
    driver.advance(1)
    assert list(driver.group().members) == [b] and driver.group().leader_id == b
    assert driver.answer(Wait.SYNC, b) == (ErrorCode.REBALANCE_IN_PROGRESS, b"")
    assert driver.group().state is GroupState.PREPARING_REBALANCE
    assert f"group g rebalancing (generation {generation + 1}): session expired" in driver.logs
    assert driver.join(b).generation == generation + 2


def test_a_member_waiting_in_join_outlives_its_session_and_the_rebalance_timeout_removes_the_rest():
    driver = Driver()
    (a, b, c), generation = stable(driver, 3)
    assert driver.join(client="d") is None
    assert driver.deadline(Timer.REBALANCE) == driver.now + REBALANCE_MS
    driver.join(a)
    for elapsed in range(5000, REBALANCE_MS, 5000):
        driver.advance(5000)
        # b and c heartbeat (they are told to rejoin) but never do.
        assert driver.heartbeat(b, generation) == driver.heartbeat(c, generation) == ErrorCode.REBALANCE_IN_PROGRESS
        if elapsed == SESSION_MS:
            assert a in driver.group().members and driver.deadline(Timer.SESSION, a) == driver.now + SESSION_MS
    assert driver.unanswered(Wait.JOIN, a)
    driver.advance(5000)
    assert list(driver.group().members) == [a, "d-4"]
    assert driver.answer(Wait.JOIN, a).generation == generation + 1
    assert driver.deadline(Timer.SESSION, b) is None and driver.deadline(Timer.SESSION, c) is None
    assert [line for line in driver.logs if "did not rejoin" in line] == \
        [f"group g: member {b} did not rejoin in time", f"group g: member {c} did not rejoin in time"]


def test_the_rebalance_timeout_drops_unused_member_ids():
    driver = Driver()
    (a,), generation = stable(driver, 1, session=60_000)
    required = driver.join(client="b", known_id_required=True, session=60_000)
    driver.join(a, session=60_000)
    driver.advance(REBALANCE_MS)
    assert driver.group().pending_members == set()
    assert driver.deadline(Timer.PENDING, required.member_id) is None
    assert driver.answer(Wait.JOIN, a).generation == generation + 1


def test_a_member_waiting_in_sync_outlives_its_session():
    driver = Driver()
    a, b, generation = follower_syncing(driver)
    driver.advance(SESSION_MS - 1)
    driver.heartbeat(a, generation + 1)
    driver.advance(1)
    assert b in driver.group().members and driver.unanswered(Wait.SYNC, b)


# -- LeaveGroup ----------------------------------------------------------------------------------


def test_leaving_an_empty_group_with_an_unused_member_id():
    driver = Driver()
    required = driver.join(known_id_required=True)
    assert driver.leave((required.member_id, None)) == [ErrorCode.NONE]
    assert driver.deadline(Timer.PENDING, required.member_id) is None
    assert driver.group().state is GroupState.EMPTY and driver.group().pending_members == set()


def test_leaving_while_preparing_completes_the_join_of_the_rest():
    driver = Driver()
    (a, b), generation = stable(driver, 2)
    driver.join(a)
    assert driver.leave((b, None)) == [ErrorCode.NONE]
    assert driver.answer(Wait.JOIN, a).generation == generation + 1
    assert list(driver.group().members) == [a]


def test_leaving_while_completing_answers_the_parked_syncs_and_moves_the_leader():
    driver = Driver()
    a, b, generation = follower_syncing(driver)
    assert driver.leave((a, None)) == [ErrorCode.NONE]
    assert driver.answer(Wait.SYNC, b) == (ErrorCode.REBALANCE_IN_PROGRESS, b"")
    assert driver.group().leader_id == b
    assert f"group g rebalancing (generation {generation + 1}): 1 member(s) left" in driver.logs


def test_the_last_member_leaving_a_stable_group_empties_it_and_stores_that():
    driver = Driver()
    (a,), generation = stable(driver, 1)
    assert driver.leave((a, None)) == [ErrorCode.NONE]
    group = driver.group()
    assert (group.state, group.generation, group.leader_id, group.protocol) == \
        (GroupState.EMPTY, generation + 1, None, None)
    [store] = driver.stores
    assert (store.then, store.value.generation, store.value.members) == (AfterStore.NOTHING, generation + 1, [])
    assert driver.deadline(Timer.SESSION, a) is None
    assert driver.logs[-1] == f"group g is empty at generation {generation + 1}"


def test_leave_errors_per_member():
    driver = Driver()
    assert driver.leave(("a", None), ("b", "i"), group="nowhere") == [ErrorCode.UNKNOWN_MEMBER_ID] * 2
    (a, _b), _ = stable(driver, 2)
    assert driver.join(instance="i1", client="s") is None
    assert driver.leave(("stranger", None), ("x", "unknown-instance"), ("wrong-id", "i1")) == \
        [ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_INSTANCE_ID]
    assert "i1-3" in driver.group().members
    assert driver.leave(("", "i1")) == [ErrorCode.NONE], "an instance id alone names the member"
    assert "i1-3" not in driver.group().members and a in driver.group().members


# -- static members (KIP-345) --------------------------------------------------------------------------


def test_a_restarted_static_member_takes_its_place_without_a_rebalance():
    driver = Driver()
    first = driver.join(instance="i1", client="a")
    driver.join(instance="i2", client="b")
    driver.join(first.member_id, instance="i1")
    leader, follower = "i1-1", "i2-2"
    generation = driver.group().generation
    driver.sync(follower, generation, instance="i2")
    driver.sync(leader, generation, {leader: b"L", follower: b"F"}, instance="i1")
    driver.stored(generation)
    driver.stores.clear()
    driver.logs.clear()

    rejoined = driver.join(instance="i1", client="a", skip_supported=True)
    assert (rejoined.error, rejoined.member_id, rejoined.generation) == (ErrorCode.NONE, "i1-3", generation)
    assert rejoined.leader_id == "i1-3" and rejoined.skip_assignment
    assert [m for m, _, _ in rejoined.members] == [follower, "i1-3"]
    assert driver.group().state is GroupState.STABLE and driver.logs == []
    [store] = driver.stores
    assert store.then is AfterStore.REPLY and [m.member_id for m in store.value.members] == [follower, "i1-3"]
    assert driver.deadline(Timer.SESSION, leader) is None
    assert driver.deadline(Timer.SESSION, "i1-3") == driver.now + SESSION_MS
    assert driver.sync("i1-3", generation, instance="i1") == (ErrorCode.NONE, b"L")
    assert driver.heartbeat(leader, generation, instance="i1") == ErrorCode.FENCED_INSTANCE_ID
    assert driver.sync(leader, generation, instance="i1") == (ErrorCode.FENCED_INSTANCE_ID, b"")
    assert driver.check_commit(leader, generation, instance="i1") == ErrorCode.FENCED_INSTANCE_ID
    assert driver.join(leader, instance="i1").error == ErrorCode.FENCED_INSTANCE_ID
    assert driver.heartbeat("i1-3", generation, instance="i1") == ErrorCode.NONE


def test_a_static_follower_rejoining_is_not_told_to_skip_the_assignment():
    driver = Driver()
    driver.join(client="a")
    driver.join(instance="i2", client="b")
    driver.join("a-1")
    generation = driver.group().generation
    driver.sync("i2-2", generation, instance="i2")
    driver.sync("a-1", generation, {"a-1": b"A", "i2-2": b"B"})
    driver.stored(generation)
    rejoined = driver.join(instance="i2", client="b", skip_supported=True)
    assert (rejoined.leader_id, rejoined.members, rejoined.skip_assignment) == ("a-1", [], False)


def test_a_static_member_rejoining_with_new_protocols_rebalances():
    driver = Driver()
    first = driver.join(instance="i1")
    driver.sync(first.member_id, 1, {first.member_id: b"A"}, instance="i1")
    driver.stored(1)
    driver.logs.clear()
    rejoined = driver.join(instance="i1", protocols=(("range", b"other topics"),))
    assert (rejoined.member_id, rejoined.generation) == ("i1-2", 2)
    assert driver.logs[0] == "group g rebalancing (generation 1): member i1-2 joined"


def test_a_static_rejoin_fences_the_old_instances_parked_request():
    driver = Driver()
    driver.join(client="a")
    driver.join(instance="i2", client="b")
    driver.join("a-1")
    assert driver.sync("i2-2", driver.group().generation, instance="i2") is None
    assert driver.join(instance="i2", client="b") is None, "CompletingRebalance: the new instance waits"
    assert driver.answer(Wait.SYNC, "i2-2") == (ErrorCode.FENCED_INSTANCE_ID, b"")
    assert driver.group().state is GroupState.PREPARING_REBALANCE


# -- OffsetCommit checks ---------------------------------------------------------------------------


def test_commit_checks():
    driver = Driver()
    assert driver.check_commit("", -1, group="fresh") == ErrorCode.NONE, "a simple commit may create a group"
    assert driver.check_commit("m", 3, group="fresh") == ErrorCode.ILLEGAL_GENERATION
    driver.join(known_id_required=True, group="idle")
    assert driver.check_commit("", -1, group="idle") == ErrorCode.NONE
    (a, b), generation = stable(driver, 2)
    assert driver.check_commit("", -1) == ErrorCode.UNKNOWN_MEMBER_ID
    assert driver.check_commit(a, generation + 1) == ErrorCode.ILLEGAL_GENERATION
    driver.advance(SESSION_MS - 1)
    assert driver.check_commit(a, generation) == ErrorCode.NONE
    assert driver.deadline(Timer.SESSION, a) == driver.now + SESSION_MS, "a commit counts as a heartbeat"
    driver.join(a)
    assert driver.check_commit(b, generation) == ErrorCode.NONE, "PreparingRebalance: the old generation commits"
    driver.join(b)
    assert driver.check_commit(a, generation + 1) == ErrorCode.REBALANCE_IN_PROGRESS


# -- the driver's events ---------------------------------------------------------------------------


def test_unload_sends_parked_requests_to_the_new_coordinator():
    driver = Driver()
    (a, _b), _ = stable(driver, 2)
    driver.join(client="c")
    driver.join(a)
    driver.join(client="h", group="h")
    driver.sync("h-4", 1, {"h-4": b"H"}, group="h")
    for group_id in ("g", "h"):
        driver.carry_out(driver.machine.unload(group_id))
    assert driver.answer(Wait.JOIN, a) == JoinResult(ErrorCode.NOT_COORDINATOR, a)
    assert driver.answer(Wait.JOIN, "c-3") == JoinResult(ErrorCode.NOT_COORDINATOR, "c-3")
    assert driver.answer(Wait.SYNC, "h-4") == (ErrorCode.NOT_COORDINATOR, b"")
    assert driver.machine.groups == {}


def test_restore_resumes_replayed_members_as_stable_with_running_sessions():
    driver = Driver()
    (a, b), generation = stable(driver, 2)
    value = driver.group().metadata_value()
    replayed = Driver()
    replayed.machine.groups["g"] = Group("g")
    replayed.group().load_metadata(value)
    replayed.machine.groups["idle"] = Group("idle")
    for group_id in ("g", "idle"):
        replayed.carry_out(replayed.machine.restore(replayed.now, group_id))
    group = replayed.group()
    assert (group.state, group.generation, group.leader_id, list(group.members)) == \
        (GroupState.STABLE, generation, a, [a, b])
    assert replayed.sync(b, generation) == (ErrorCode.NONE, f"part-of-{b}".encode())
    assert replayed.deadline(Timer.SESSION, a) == replayed.now + SESSION_MS
    assert (replayed.group("idle").state, replayed.group("idle").state_timestamp) == (GroupState.EMPTY, replayed.now)
    replayed.advance(SESSION_MS)
    assert replayed.group().members == {} and replayed.group().state is GroupState.EMPTY


def test_a_join_abandoned_in_the_initial_delay_counts_and_its_session_evicts_it():
    """The issue's case: a consumer parked in the initial delay dies without LeaveGroup.
    The next consumer gets its assignment after the delay plus the dead one's session,
    not after the rebalance timeout."""
    driver = Driver(initial_delay_ms=3000)
    start = driver.now
    assert driver.join(client="a") is None
    driver.abandon(Wait.JOIN, "a-1")
    assert driver.join(client="b") is None
    driver.advance(3000)
    assert driver.group().state is GroupState.COMPLETING_REBALANCE, "the delay's end completes the rebalance"
    assert driver.answer(Wait.JOIN, "a-1").leader_id == "a-1"  # answered into the void
    assert driver.answer(Wait.JOIN, "b-2").generation == 1
    assert driver.sync("b-2", 1) is None
    driver.advance(SESSION_MS - 1000)
    driver.heartbeat("b-2", 1)
    driver.advance(1000)
    assert list(driver.group().members) == ["b-2"] and driver.group().leader_id == "b-2"
    assert driver.answer(Wait.SYNC, "b-2") == (ErrorCode.REBALANCE_IN_PROGRESS, b"")
    rejoined = driver.join("b-2")
    assert (rejoined.generation, rejoined.leader_id) == (2, "b-2")
    assert driver.sync("b-2", 2, {"b-2": b"all"}) is None
    driver.stored(2)
    assert driver.answer(Wait.SYNC, "b-2") == (ErrorCode.NONE, b"all")
    assert driver.now - start <= 3000 + SESSION_MS < REBALANCE_MS


def test_a_join_abandoned_in_a_running_rebalance_lets_it_complete_and_the_session_evicts_it():
    driver = Driver()
    (a, b), generation = stable(driver, 2)
    assert driver.join(a) is None
    driver.abandon(Wait.JOIN, a)
    assert driver.join(b).generation == generation + 1, "the rebalance does not wait for its timeout"
    assert driver.sync(b, generation + 1) is None
    driver.advance(SESSION_MS - 1)
    driver.heartbeat(b, generation + 1)
    driver.advance(1)
    assert list(driver.group().members) == [b]
    assert driver.answer(Wait.SYNC, b) == (ErrorCode.REBALANCE_IN_PROGRESS, b"")
    assert f"group g: member {a} session expired" in driver.logs


def test_an_abandoned_sync_no_longer_keeps_its_member_alive():
    driver = Driver()
    a, b, generation = follower_syncing(driver)  # the leader a heartbeats but does not sync yet
    driver.abandon(Wait.SYNC, b)
    driver.advance(SESSION_MS - 1)
    driver.heartbeat(a, generation + 1)
    driver.advance(1)
    assert list(driver.group().members) == [a]
    assert driver.group().state is GroupState.PREPARING_REBALANCE


def test_session_expiry_in_preparing_rebalance_completes_the_join_without_the_silent_member():
    driver = Driver()
    (a, b), generation = stable(driver, 2)
    driver.advance(SESSION_MS - 1)
    driver.heartbeat(a, generation)
    assert driver.join(a) is None  # b has not heartbeated since the group formed
    assert driver.group().state is GroupState.PREPARING_REBALANCE
    driver.advance(1)
    assert list(driver.group().members) == [a]
    assert driver.answer(Wait.JOIN, a).generation == generation + 1


def test_a_leader_that_heartbeats_but_never_syncs_is_removed_after_the_rebalance_timeout():
    driver = Driver()
    a, b, generation = follower_syncing(driver)
    assert driver.deadline(Timer.SYNC) == driver.now + REBALANCE_MS
    for _ in range(REBALANCE_MS // 5000 - 1):
        driver.advance(5000)
        assert driver.heartbeat(a, generation + 1) == driver.heartbeat(b, generation + 1) == ErrorCode.NONE
    assert a in driver.group().members and driver.unanswered(Wait.SYNC, b)
    driver.advance(5000)
    assert list(driver.group().members) == [b]
    assert f"group g: member {a} did not sync in time" in driver.logs
    assert driver.answer(Wait.SYNC, b) == (ErrorCode.REBALANCE_IN_PROGRESS, b"")
    assert driver.join(b).generation == generation + 2


def test_a_follower_that_never_syncs_leaves_a_stable_group_after_the_rebalance_timeout():
    driver = Driver()
    (a, b), generation = stable(driver, 2)
    driver.join(a)
    driver.join(b)
    driver.sync(a, generation + 1, {a: b"A", b: b"B"})
    driver.stored(generation + 1)
    assert driver.group().state is GroupState.STABLE and driver.deadline(Timer.SYNC) is not None
    for _ in range(REBALANCE_MS // 5000):
        driver.advance(5000)
        driver.heartbeat(a, generation + 1)
        driver.heartbeat(b, generation + 1)
    assert list(driver.group().members) == [a]
    assert driver.group().state is GroupState.PREPARING_REBALANCE


def test_every_member_that_syncs_clears_the_sync_deadline():
    driver = Driver()
    (a, b), generation = stable(driver, 2)
    assert driver.deadline(Timer.SYNC) is None and driver.group().pending_sync == set()
    driver.join(a)
    driver.join(b)
    assert driver.group().pending_sync == {a, b}
    driver.sync(b, generation + 1)
    assert driver.deadline(Timer.SYNC) is not None
    driver.sync(a, generation + 1, {a: b"A", b: b"B"})
    assert driver.deadline(Timer.SYNC) is None
    driver.advance(REBALANCE_MS)
    assert list(driver.group().members) == [a, b]


def test_the_machine_imports_no_event_loop_and_reads_no_clock():
    root = pathlib.Path(__file__).resolve().parents[2] / "gateway" / "groups"
    for module in ("machine.py", "effects.py", "group.py"):
        tree = ast.parse((root / module).read_text())
        imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                    for alias in node.names}
        imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                     if isinstance(node, ast.ImportFrom) and node.module and node.level == 0}
        assert not imported & {"asyncio", "time", "datetime", "uuid", "random"}, module
