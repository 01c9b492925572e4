"""KIP-848's online upgrade of a classic group, driven without an event loop: the
conversion (its conditions, state, records and timers), classic members served by the
consumer group (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit), their join,
sync and session timeouts, and the records that rebuild the converted group on a new
coordinator."""
import asyncio
import itertools
import uuid

from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription

from kgate.gateway.groups import records
from kgate.gateway.groups.classic_members import ClassicMemberMachine
from kgate.gateway.groups.consumer_group import ClassicMetadata, MemberState
from kgate.gateway.groups.consumer_machine import MEMBER_TIMER_KINDS, Heartbeat
from kgate.gateway.groups.effects import (
    AfterStore,
    AnswerJoin,
    AnswerSync,
    StoreGroup,
    Timer,
    TimerKey,
)
from kgate.gateway.groups.group import GroupState
from kgate.gateway.groups.machine import JoinRequest
from kgate.protocol.error_codes import ErrorCode
from tests.unit import test_consumer_group_machine as consumer_machine_test
from tests.unit.test_group_shard import assert_replays_to_the_same_state, coordinator

T = uuid.UUID(int=7)
TOPICS = {"t": (T, 6)}
CLASSIC_SESSION_MS = 10_000
REBALANCE_MS = 8000  # shorter than the session: the join and sync deadlines show


def subscription(owned=(), version=1) -> bytes:
    listed = [ConsumerProtocolSubscription.TopicPartition(topic="t", partitions=sorted(owned))] if owned else []
    return ConsumerProtocolSubscription(version=version, topics=["t"], user_data=None,
                                        owned_partitions=listed).encode(version=version)


def partitions_of(assignment: bytes) -> set[int]:
    return {p for tp in ConsumerProtocolAssignment.decode(assignment).assigned_partitions for p in tp.partitions}


def assignment(parts) -> bytes:
    return ConsumerProtocolAssignment(assigned_partitions=[ConsumerProtocolAssignment.TopicPartition(
        topic="t", partitions=sorted(parts))], user_data=None).encode(version=1)


def join_request(member_id="", client="c", owned=(), instance=None, protocol_type="consumer",
                 protocols=None, require_known=False):
    return JoinRequest("g", member_id, instance, client, "/10.0.0.1", CLASSIC_SESSION_MS, REBALANCE_MS,
                       protocol_type, protocols or [("cooperative-sticky", subscription(owned))], require_known, False)


class Driver(consumer_machine_test.Driver):
    """The consumer-group test driver, with classic members: answers of parked requests, and
    the classic machine's timers and assignments."""

    def __init__(self, policy="bidirectional", max_size=100):
        super().__init__()
        ids = itertools.count(1)
        self.machine = ClassicMemberMachine(self.classic.groups, topics=lambda: TOPICS, policy=policy,
                                            classic_max_size=100,
                                            session_ms=45_000, heartbeat_ms=5000, assignors=["uniform"],
                                            max_size=max_size, new_member_id=lambda: f"m{next(ids)}")
        self.classic.consumers = self.machine
        self.joins: dict[str, object] = {}
        self.syncs: dict[str, tuple] = {}
        self.group_records: list = []

    def carry_out(self, effects):
        super().carry_out(effects)
        for effect in effects:
            if isinstance(effect, StoreGroup):
                self.group_records.append(effect.value)
            if isinstance(effect, StoreGroup) and effect.then is AfterStore.REPORT:
                self.carry_out(self.classic.assignment_stored(self.now, effect.group_id,
                                                               effect.value.generation, True))
            elif isinstance(effect, AnswerJoin):
                self.joins[effect.member_id] = effect.result
            elif isinstance(effect, AnswerSync):
                self.syncs[effect.member_id] = (effect.error, effect.assignment)

    def fire(self, key: TimerKey):
        if key.kind in MEMBER_TIMER_KINDS:
            self.carry_out(self.machine.timer_fired(self.now, key, TOPICS))
        else:
            self.carry_out(self.classic.timer_fired(self.now, key))

    def join(self, request):
        step = self.classic.join(self.now, request)
        self.carry_out(step.effects)
        return step.reply

    def sync(self, member_id, generation, assignments=None, protocol=None):
        step = self.classic.sync(self.now, "g", generation, member_id, None, "consumer", protocol,
                                 assignments or {})
        self.carry_out(step.effects)
        return step.reply

    def heartbeat(self, member_id, generation, instance=None):
        step = self.classic.heartbeat(self.now, "g", generation, member_id, instance)
        self.carry_out(step.effects)
        return step.reply

    def leave(self, *leaving):
        step = self.classic.leave(self.now, "g", list(leaving))
        self.carry_out(step.effects)
        return step.reply

    def leave_consumer(self, member_id):
        step = self.machine.heartbeat(self.now, Heartbeat("g", member_id, -1, "client", "/10.0.0.2", None, None, -1,
                                                          None, None, None, None), TOPICS)
        self.carry_out(step.effects)
        return step.reply

    def beat(self, member_id="", epoch=0, owned=None):
        step = self.machine.heartbeat(self.now, Heartbeat(
            "g", member_id, epoch, "client", "/10.0.0.2", None, None, 60_000 if epoch == 0 else -1,
            ["t"] if epoch == 0 else None, None, None, owned), TOPICS)
        self.carry_out(step.effects)
        return step.reply

    def classic_group(self):
        """Classic members a (partitions 0-2) and b (3-5), Stable at generation 2: (a, b)."""
        a = self.join(join_request(client="a")) or self.joins.pop(next(iter(self.joins)))
        b_id = None
        assert self.join(join_request(client="b")) is None  # parks: the group rebalances
        assert self.heartbeat(a.member_id, 1) == ErrorCode.REBALANCE_IN_PROGRESS
        assert self.join(join_request(a.member_id, client="a")) is None
        a_joined = self.joins.pop(a.member_id)
        b_id = next(member_id for member_id in self.joins if member_id != a.member_id)
        assert a_joined.generation == 2
        assert self.sync(b_id, 2) is None
        self.sync(a.member_id, 2, {a.member_id: assignment({0, 1, 2}), b_id: assignment({3, 4, 5})})
        assert self.classic.groups["g"].is_(GroupState.STABLE)
        self.joins.clear()
        self.syncs.clear()
        return a.member_id, b_id

    def reconcile_classic(self, *member_ids):
        """Classic members at generation 2 told of a new epoch (3) rejoin, give up what they must and rejoin."""
        for member_id in member_ids:
            assert self.heartbeat(member_id, 2) == ErrorCode.REBALANCE_IN_PROGRESS, "the group epoch moved"
            held = self.group().members[member_id].assigned[T]
            joined = self.join(join_request(member_id, owned=held))
            assert (joined.error, joined.generation, joined.protocol, joined.leader_id, joined.members) == (
                ErrorCode.NONE, 2, "cooperative-sticky", "", []), "answered at once, at its epoch, no leader duties"
            error, data = self.sync(member_id, 2, protocol="cooperative-sticky")
            kept = partitions_of(data)
            assert error == ErrorCode.NONE and kept < held, "the partitions it must give up are withheld"
            self.owners()
            assert self.heartbeat(member_id, 2) == ErrorCode.REBALANCE_IN_PROGRESS, "it must revoke, then rejoin"
            rejoined = self.join(join_request(member_id, owned=kept))
            assert rejoined.generation == 3 and self.group().members[member_id].state is MemberState.STABLE
            assert partitions_of(self.sync(member_id, 3)[1]) == kept
            assert self.heartbeat(member_id, 3) == ErrorCode.NONE

    def owners(self) -> dict[int, str]:
        """Who holds each partition; asserts no partition has two holders."""
        seen: dict[int, str] = {}
        for member in self.group().members.values():
            for partitions in (member.assigned, member.pending_revocation):
                for p in partitions.get(T, set()):
                    assert p not in seen, f"{p} held by {seen[p]} and {member.member_id}"
                    seen[p] = member.member_id
        return seen


def test_a_consumer_member_upgrades_a_classic_group_with_its_members_assignments_and_sessions():
    driver = Driver()
    a, b = driver.classic_group()
    driver.stored.clear()
    driver.now = 1000
    reply = driver.beat()
    assert reply.error == ErrorCode.NONE
    group = driver.group()
    assert driver.classic.groups["g"].members == {} and driver.classic.groups["g"].protocol_type == "consumer"
    assert (group.members[a].assigned, group.members[b].assigned) == ({T: {0, 1, 2}}, {T: {3, 4, 5}})
    assert group.members[a].classic == ClassicMetadata(CLASSIC_SESSION_MS,
                                                       (("cooperative-sticky", subscription()),))
    assert group.members[a].subscribed == ["t"] and group.members[a].epoch == 2
    assert (group.epoch, group.assignment_epoch) == (3, 3), "the generation, then the joining member's bump"
    assert reply.member_epoch == 3 and reply.assignment == {}, "everything is still held by the classic members"
    assert driver.timers[TimerKey("g", Timer.MEMBER_SESSION, a)] == 1000 + CLASSIC_SESSION_MS
    assert TimerKey("g", Timer.SESSION, a) not in driver.timers, "the classic session timers end"
    assert driver.stored[0] == (records.group_key("g"), None), "the classic record is tombstoned first"
    member_records = [records.decode(key, value)[1] for key, value in driver.stored
                      if key == records.consumer_key("member", "g", a)]
    assert member_records[0].classic_member_metadata.session_timeout_ms == CLASSIC_SESSION_MS
    assert member_records[0].classic_member_metadata.supported_protocols[0].name == "cooperative-sticky"
    driver.owners()


def test_requests_parked_in_a_rebalance_are_answered_rebalance_in_progress():
    driver = Driver()
    a, b = driver.classic_group()
    assert driver.join(join_request(a, client="a", owned={0, 1, 2, 9})) is None  # a new rebalance: parked
    assert driver.beat().error == ErrorCode.NONE
    assert driver.joins[a].error == ErrorCode.REBALANCE_IN_PROGRESS
    assert TimerKey("g", Timer.REBALANCE) not in driver.timers


def test_the_upgrade_follows_kafkas_conditions():
    refused = Driver(policy="downgrade")
    refused.classic_group()
    assert refused.beat().error == ErrorCode.GROUP_ID_NOT_FOUND
    assert refused.classic.groups["g"].consumer is None and len(refused.classic.groups["g"].members) == 2
    too_many = Driver(max_size=1)
    too_many.classic_group()
    assert too_many.beat().error == ErrorCode.GROUP_ID_NOT_FOUND
    other_protocol = Driver()
    other_protocol.join(join_request(client="a", protocol_type="connect", protocols=[("v1", b"worker")]))
    assert other_protocol.beat().error == ErrorCode.GROUP_ID_NOT_FOUND


def test_classic_members_give_up_partitions_before_the_new_member_gets_them():
    driver = Driver()
    a, b = driver.classic_group()
    new = driver.beat().member_id
    driver.reconcile_classic(a, b)
    reply = driver.beat(new, 3, {})
    assert reply.member_epoch == 3 and len(reply.assignment[T]) == 2
    owners = driver.owners()
    assert sorted(owners) == list(range(6)) and set(owners.values()) == {a, b, new}


def test_classic_requests_to_a_consumer_group_are_checked_as_kafka_does():
    driver = Driver()
    a, b = driver.classic_group()
    consumer_member = driver.beat().member_id
    assert driver.heartbeat(a, 1) == ErrorCode.ILLEGAL_GENERATION
    assert driver.heartbeat("stranger", 2) == ErrorCode.UNKNOWN_MEMBER_ID
    assert driver.heartbeat(consumer_member, 3) == ErrorCode.UNKNOWN_MEMBER_ID, "it speaks the consumer protocol"
    assert driver.sync(a, 1) == (ErrorCode.ILLEGAL_GENERATION, b"")
    assert driver.sync(a, 2, protocol="range") == (ErrorCode.INCONSISTENT_GROUP_PROTOCOL, b"")
    assert driver.sync(a, 2) == (ErrorCode.REBALANCE_IN_PROGRESS, b""), "the group epoch moved past it"
    refused = driver.join(join_request(protocol_type="connect", protocols=[("v1", b"x")]))
    assert refused.error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    unshared = driver.join(join_request(protocols=[("roundrobin", subscription())]))
    assert unshared.error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL, "no protocol in common with the others"
    required = driver.join(join_request(require_known=True))
    assert required.error == ErrorCode.MEMBER_ID_REQUIRED and required.member_id not in driver.group().members
    joined = driver.join(join_request(required.member_id))
    assert joined.error == ErrorCode.NONE and driver.group().members[required.member_id].classic is not None
    assert driver.group().epoch == 4, "a new classic member moves the group epoch"
    check = driver.classic.check_commit
    unheld = [("t", T, 99)]  # at no epoch anyone's
    assert check(0, "g", 1, a, None, unheld).reply == ErrorCode.ILLEGAL_GENERATION, "a classic member's generation"
    assert check(0, "g", 2, a, None, unheld).reply == ErrorCode.NONE
    assert check(0, "g", 0, consumer_member, None, unheld).reply == ErrorCode.STALE_MEMBER_EPOCH


def test_a_classic_member_that_leaves_hands_its_partitions_to_the_others():
    driver = Driver()
    a, b = driver.classic_group()
    new = driver.beat().member_id
    before = driver.group().epoch
    assert driver.leave((a, None), ("stranger", None), (new, None)) == [
        ErrorCode.NONE, ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.UNKNOWN_MEMBER_ID]
    assert a not in driver.group().members and driver.group().epoch == before + 1
    assert TimerKey("g", Timer.MEMBER_SESSION, a) not in driver.timers
    reply = driver.beat(new, driver.group().members[new].epoch, {})
    assert reply.assignment[T] == {0, 1, 2} & driver.group().target[new][T], "a's partitions are free at once"
    assert driver.heartbeat(b, 2) == ErrorCode.REBALANCE_IN_PROGRESS
    kept = partitions_of(driver.sync(b, driver.join(join_request(b, owned={3, 4, 5})).generation)[1])
    epoch = driver.join(join_request(b, owned=kept)).generation
    assert partitions_of(driver.sync(b, epoch)[1]) == driver.group().target[b][T]
    driver.beat(new, epoch, reply.assignment)
    owners = driver.owners()
    assert sorted(owners) == list(range(6)) and set(owners.values()) == {b, new}


def test_a_static_classic_member_leaves_by_instance_id():
    driver = Driver()
    static = driver.join(join_request(client="s", instance="box-1")) or driver.joins.popitem()[1]
    driver.sync(static.member_id, 1, {static.member_id: assignment(range(6))})
    driver.beat()
    assert driver.leave(("someone-else", "box-1")) == [ErrorCode.FENCED_INSTANCE_ID]
    assert driver.leave(("", "box-1")) == [ErrorCode.NONE]
    assert static.member_id not in driver.group().members


def test_a_classic_member_must_rejoin_and_sync_within_its_rebalance_timeout():
    driver = Driver()
    a, b = driver.classic_group()
    driver.beat()
    assert driver.heartbeat(a, 2) == ErrorCode.REBALANCE_IN_PROGRESS
    assert driver.join(join_request(b, owned={3, 4, 5})).error == ErrorCode.NONE
    driver.advance(REBALANCE_MS // 2)
    assert driver.heartbeat(a, 2) == ErrorCode.REBALANCE_IN_PROGRESS, "told again: the deadline does not move"
    driver.advance(REBALANCE_MS // 2 - 1)
    assert set(driver.group().members) >= {a, b}
    driver.advance(1)
    assert a not in driver.group().members, "told to rejoin, it did not within its rebalance timeout"
    assert b not in driver.group().members, "joined, it never sent SyncGroup"


def test_a_classic_member_expires_on_its_own_session_timeout():
    driver = Driver()
    a, b = driver.classic_group()
    driver.beat()
    driver.advance(CLASSIC_SESSION_MS - 1)
    driver.heartbeat(b, 2)
    driver.advance(1)
    assert a not in driver.group().members and b in driver.group().members


async def test_the_converted_group_replays_with_its_classic_members():
    groups = await coordinator()
    first = await groups.join(JoinRequest("g", "", None, "a", "/h", CLASSIC_SESSION_MS, REBALANCE_MS, "consumer",
                                          [("range", subscription())], False, False))
    assert await groups.sync("g", 1, first.member_id, None, None, None,
                             {first.member_id: assignment(range(4))}) == (ErrorCode.NONE, assignment(range(4)))
    reply = await groups.consumer_heartbeat(Heartbeat("g", "", 0, "client", "/h", None, None, 60_000, ["t"],
                                                      None, None, None))
    assert reply.error == ErrorCode.NONE
    await assert_replays_to_the_same_state(groups)
    fresh = await coordinator(writer=groups.writer)
    member = fresh.describe("g").consumer.members[first.member_id]
    assert member.classic == ClassicMetadata(CLASSIC_SESSION_MS, (("range", subscription()),))
    assert member.assigned == {uuid.UUID(int=1): {0, 1, 2, 3}} and member.epoch == 1
    assert fresh.heartbeat("g", 1, first.member_id, None) == ErrorCode.REBALANCE_IN_PROGRESS
    await asyncio.gather(groups.close(), fresh.close())


def test_the_last_consumer_member_leaving_turns_the_group_classic_again():
    driver = Driver()
    a, b = driver.classic_group()
    new = driver.beat().member_id
    epoch = driver.group().epoch
    targets = {member_id: driver.group().target[member_id][T] for member_id in (a, b)}
    driver.stored.clear()
    assert driver.leave_consumer(new).error == ErrorCode.NONE
    group = driver.classic.groups["g"]
    assert group.consumer is None and set(group.members) == {a, b}
    assert (group.generation, group.protocol_type, group.protocol) == (epoch, "consumer", "cooperative-sticky")
    assert group.is_(GroupState.PREPARING_REBALANCE)
    assert (records.consumer_key("group_epoch", "g"), None) in driver.stored, "the consumer records go"
    [stored] = driver.group_records[-1:]
    assert stored.generation == epoch
    assert {m.member_id: partitions_of(m.assignment) for m in stored.members} == targets
    assert driver.timers[TimerKey("g", Timer.SESSION, a)] == driver.now + CLASSIC_SESSION_MS
    assert TimerKey("g", Timer.MEMBER_SESSION, a) not in driver.timers
    assert driver.heartbeat(a, epoch) == ErrorCode.REBALANCE_IN_PROGRESS, "a classic rebalance now"
    assert driver.join(join_request(a)) is None and driver.join(join_request(b)) is None
    assert driver.joins[a].generation == epoch + 1 and group.is_(GroupState.COMPLETING_REBALANCE)


def test_a_fenced_consumer_member_turns_the_group_classic_but_not_under_the_upgrade_policy():
    fenced = Driver()
    a, b = fenced.classic_group()
    fenced.beat()
    fenced.reconcile_classic(a, b)
    for _ in range(10):  # the classic members keep heartbeating; the consumer member's session runs out
        fenced.advance(CLASSIC_SESSION_MS // 2)
        if fenced.classic.groups["g"].consumer is None:
            break
        assert [fenced.heartbeat(member_id, 3) for member_id in (a, b)] == [ErrorCode.NONE] * 2
    assert fenced.classic.groups["g"].consumer is None and set(fenced.classic.groups["g"].members) == {a, b}
    kept = Driver(policy="upgrade")
    kept.classic_group()
    new = kept.beat().member_id
    kept.leave_consumer(new)
    assert len(kept.group().members) == 2 and new not in kept.group().members, "a consumer group serving its classics"


def test_a_classic_member_leaving_does_not_turn_the_group_classic():
    driver = Driver()
    a, b = driver.classic_group()
    new = driver.beat().member_id
    driver.leave((a, None))
    assert set(driver.group().members) == {b, new}


async def test_the_group_turned_classic_again_replays_as_a_classic_group():
    groups = await coordinator()
    first = await groups.join(JoinRequest("g", "", None, "a", "/h", CLASSIC_SESSION_MS, REBALANCE_MS, "consumer",
                                          [("range", subscription())], False, False))
    await groups.sync("g", 1, first.member_id, None, None, None, {first.member_id: assignment(range(4))})
    joined = await groups.consumer_heartbeat(Heartbeat("g", "", 0, "client", "/h", None, None, 60_000, ["t"],
                                                       None, None, None))
    await groups.consumer_heartbeat(Heartbeat("g", joined.member_id, -1, "client", "/h", None, None, -1, None,
                                              None, None, None))
    group = groups.describe("g")
    assert group.consumer is None and list(group.members) == [first.member_id] and group.generation == 2
    target = partitions_of(group.members[first.member_id].assignment)
    assert target < {0, 1, 2, 3}, "its target: the leaving member's share waits for the rebalance"
    await assert_replays_to_the_same_state(groups)
    fresh = await coordinator(writer=groups.writer)
    replayed = fresh.describe("g")
    assert replayed.consumer is None and replayed.generation == 2
    assert partitions_of(replayed.members[first.member_id].assignment) == target
    await asyncio.gather(groups.close(), fresh.close())
