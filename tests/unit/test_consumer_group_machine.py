"""KIP-848's consumer group rules, driven without an event loop: epochs, the target
assignment, revocation before reassignment, timeouts, the classic/consumer namespace,
and the records that rebuild a group after a coordinator move."""
import itertools
import uuid

from kgate.gateway.groups import records
from kgate.gateway.groups.assignors import range_, uniform
from kgate.gateway.groups.consumer_group import ConsumerGroup, MemberState
from kgate.gateway.groups.consumer_machine import ConsumerGroupMachine, Heartbeat
from kgate.gateway.groups.effects import StoreConsumer, Timer, TimerKey
from kgate.gateway.groups.machine import GroupMachine, JoinRequest
from kgate.protocol.error_codes import ErrorCode
from tests.unit.effect_ledger import EffectLedger

T = uuid.UUID(int=1)
TOPICS = {"t": (T, 4)}
SESSION_MS = 45_000


class Driver(EffectLedger):
    def __init__(self, assignors=("uniform", "range"), session_of=lambda _group_id: None):
        super().__init__()
        ids = itertools.count(1)
        self.classic = GroupMachine(min_session_ms=6000, max_session_ms=300_000, initial_delay_ms=0, max_size=100,
                                    new_member_id=lambda prefix: f"{prefix}-{next(ids)}")
        self.machine = ConsumerGroupMachine(self.classic.groups, session_ms=SESSION_MS, heartbeat_ms=5000,
                                            assignors=list(assignors), max_size=100,
                                            new_member_id=lambda: f"m{next(ids)}", session_of=session_of)

    def beat(self, member_id="", epoch=0, owned=None, topics=("t",), assignor=None, group="g", instance=None,
             regex=None, cluster=TOPICS):
        step = self.machine.heartbeat(self.now, Heartbeat(
            group, member_id, epoch, "client", "/10.0.0.1", instance, None, 60_000 if epoch == 0 else -1,
            list(topics) if epoch == 0 else None, regex, assignor, owned), cluster)
        self.carry_out(step.effects)
        return step.reply

    def fire(self, key: TimerKey):
        self.carry_out(self.machine.timer_fired(self.now, key, TOPICS))

    def group(self, group="g") -> ConsumerGroup:
        consumer = self.classic.groups[group].consumer
        assert consumer is not None
        return consumer

    def assert_no_partition_has_two_owners(self):
        seen: dict[tuple, str] = {}
        for member in self.group().members.values():
            for partitions in (member.assigned, member.pending_revocation):
                for topic_id, parts in partitions.items():
                    for p in parts:
                        assert (topic_id, p) not in seen, f"{p} held by {seen[(topic_id, p)]} and {member.member_id}"
                        seen[(topic_id, p)] = member.member_id


def test_a_member_joins_and_gets_every_partition():
    driver = Driver()
    reply = driver.beat()
    assert (reply.error, reply.member_id, reply.member_epoch, reply.assignment) == (ErrorCode.NONE, "m1", 1,
                                                                                   {T: {0, 1, 2, 3}})
    group = driver.group()
    assert (group.epoch, group.assignment_epoch, group.assignor, group.state) == (1, 1, "uniform", "Stable")
    assert driver.timers[TimerKey("g", Timer.MEMBER_SESSION, "m1")] == SESSION_MS
    assert driver.beat("m1", 1, {T: {0, 1, 2, 3}}).assignment is None, "nothing changed: no assignment sent"


def test_a_partition_moves_only_after_its_owner_revoked_it():
    driver = Driver()
    driver.beat()
    b = driver.beat(member_id="b")  # a client-chosen member id (v1)
    assert (b.member_id, b.member_epoch, b.assignment) == ("b", 2, {}), "a's partitions are not released yet"
    assert driver.group().members["b"].state is MemberState.UNRELEASED_PARTITIONS
    a = driver.beat("m1", 1, {T: {0, 1, 2, 3}})
    assert (a.member_epoch, a.assignment) == (1, {T: {0, 1}}), "a must revoke first, staying at its epoch"
    assert driver.group().state == "Reconciling"
    driver.assert_no_partition_has_two_owners()
    assert driver.beat("b", 2, {}).assignment is None
    a = driver.beat("m1", 1, {T: {0, 1}})  # revoked
    assert (a.member_epoch, a.assignment) == (2, {T: {0, 1}})
    b = driver.beat("b", 2, {})
    assert b.assignment == {T: {2, 3}}
    driver.assert_no_partition_has_two_owners()
    assert driver.group().state == "Stable"


def test_a_member_that_leaves_gives_its_partitions_to_the_others():
    driver = Driver()
    driver.beat()
    driver.beat(member_id="b")
    driver.beat("m1", 1, {T: {0, 1, 2, 3}})
    driver.beat("m1", 1, {T: {0, 1}})
    driver.beat("b", 2, {})
    left = driver.beat("b", -1)
    assert (left.error, left.member_epoch) == (ErrorCode.NONE, -1)
    a = driver.beat("m1", 2, {T: {0, 1}})
    assert (a.member_epoch, a.assignment) == (3, {T: {0, 1, 2, 3}})
    assert (records.consumer_key("member", "g", "b"), None) in driver.stored


def test_session_expiry_removes_the_member_and_bumps_the_epoch():
    driver = Driver()
    driver.beat()
    driver.beat(member_id="b")
    driver.advance(SESSION_MS - 1)
    driver.beat("b", 2, {})
    driver.advance(1)
    group = driver.group()
    assert list(group.members) == ["b"] and group.epoch == 3 and group.target["b"] == {T: {0, 1, 2, 3}}
    assert driver.beat("m1", 1, {T: {0, 1, 2, 3}}).error == ErrorCode.UNKNOWN_MEMBER_ID
    assert driver.beat("b", 2, {}).assignment == {T: {0, 1, 2, 3}}, "released by the expiry"


def test_a_groups_own_session_timeout_times_its_members_and_no_other_groups():
    own = {"g": 50_000}
    driver = Driver(session_of=own.get)
    driver.beat()
    driver.beat(group="other")
    assert driver.timers[TimerKey("g", Timer.MEMBER_SESSION, "m1")] == 50_000
    assert driver.timers[TimerKey("other", Timer.MEMBER_SESSION, "m2")] == SESSION_MS
    own["g"] = 60_000  # altered: each member's next heartbeat arms the new timeout
    driver.advance(10)
    driver.beat("m1", 1, {T: {0, 1, 2, 3}})
    assert driver.timers[TimerKey("g", Timer.MEMBER_SESSION, "m1")] == 60_010
    driver.advance(SESSION_MS)
    assert list(driver.group().members) == ["m1"], "past the broker's timeout, within the group's own"


def test_a_member_that_does_not_revoke_within_its_rebalance_timeout_is_fenced():
    driver = Driver()
    driver.beat()
    driver.beat(member_id="b")
    driver.beat("m1", 1, {T: {0, 1, 2, 3}})  # told to revoke 2 and 3
    assert driver.timers[TimerKey("g", Timer.REVOCATION, "m1")] == driver.now + 60_000
    for _ in range(5):
        driver.advance(10_000)
        driver.beat("m1", 1, {T: {0, 1, 2, 3}})
        driver.beat("b", 2, {})
    driver.advance(10_000)
    assert list(driver.group().members) == ["b"]


def test_epochs_are_checked():
    driver = Driver()
    driver.beat()
    assert driver.beat("m1", 5, {}).error == ErrorCode.FENCED_MEMBER_EPOCH
    assert driver.beat("nobody", 1, {}).error == ErrorCode.UNKNOWN_MEMBER_ID
    driver.beat(member_id="b")
    driver.beat("m1", 1, {T: {0, 1, 2, 3}})
    driver.beat("m1", 1, {T: {0, 1}})  # now at epoch 2, previous 1
    assert driver.beat("m1", 1, {T: {0, 1}}).error == ErrorCode.NONE, "the answer that moved it may have been lost"
    assert driver.beat("m1", 1, {T: {0, 1, 2}}).error == ErrorCode.FENCED_MEMBER_EPOCH


def test_assignor_choice_and_refusals():
    driver = Driver(assignors=("range", "uniform"))
    assert driver.beat(assignor="sticky").error == ErrorCode.UNSUPPORTED_ASSIGNOR
    driver.beat()
    assert driver.group().assignor == "range", "the broker's first assignor by default"
    driver.beat(member_id="b", assignor="uniform")
    driver.beat(member_id="c", assignor="uniform")
    assert driver.group().assignor == "uniform", "the one most members ask for"
    step = driver.machine.heartbeat(0, Heartbeat("g", "", 0, "c", "/h", None, None, 1, [], "t(", None, None),
                                    TOPICS)
    assert step.reply.error == ErrorCode.INVALID_REGULAR_EXPRESSION


def test_a_group_is_classic_or_consumer_and_empty_ones_convert():
    driver = Driver()
    classic = driver.classic.join(0, JoinRequest("c", "", None, "k", "/h", 10_000, 10_000, "consumer",
                                                 [("range", b"")], False, False))
    assert classic.reply is None or classic.reply.error == ErrorCode.NONE
    assert driver.beat(group="c").error == ErrorCode.GROUP_ID_NOT_FOUND
    driver.classic.leave(0, "c", [(list(driver.classic.groups["c"].members)[0], None)])
    reply = driver.beat(group="c")
    assert reply.error == ErrorCode.NONE and driver.group("c").members
    assert (records.group_key("c"), None) in driver.stored, "the classic record goes with the conversion"
    join = JoinRequest("c", "", None, "k", "/h", 10_000, 10_000, "consumer", [("range", b"")], False, False)
    assert driver.classic.join(0, join).reply.error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    driver.beat(reply.member_id, -1, group="c")
    step = driver.classic.join(0, join)
    assert driver.classic.groups["c"].consumer is None and step.reply is None, "joined (answered by its effects)"
    assert any(isinstance(e, StoreConsumer) and (records.consumer_key("group_epoch", "c"), None) in e.records
               for e in step.effects)


def test_commits_are_checked_against_member_epochs():
    driver = Driver()
    driver.beat()
    check = driver.classic.check_commit
    assert check(0, "g", 1, "m1", None).reply == ErrorCode.NONE
    assert check(0, "g", 0, "m1", None, [("t", T, 0)]).reply == ErrorCode.STALE_MEMBER_EPOCH
    assert check(0, "g", 1, "stranger", None).reply == ErrorCode.UNKNOWN_MEMBER_ID
    assert check(0, "g", -1, "", None).reply == ErrorCode.UNKNOWN_MEMBER_ID, "not while it has members"


def test_an_older_epoch_commits_the_partitions_the_member_held_at_it():
    """Kafka 4.4 (KIP-1251): a commit sent at an epoch the member has since left is checked
    partition by partition against the epoch each was assigned at, so a member that read a
    partition and commits it as its epoch moves on (another member left, it gained more) is
    not refused; a partition it did not hold at that epoch is."""
    driver = Driver()
    driver.beat("a", 0)  # epoch 1: a holds 0-3
    driver.beat("b", 0)  # epoch 2: a must give up 2 and 3
    driver.beat("a", 1, {T: {0, 1, 2, 3}})
    assert driver.beat("a", 1, {T: {0, 1}}).member_epoch == 2
    driver.beat("b", 2, {})
    check = driver.classic.check_commit
    assert driver.group().members["a"].held_epochs() == {(T, 0): 1, (T, 1): 1}
    assert check(0, "g", 1, "a", None, [("t", T, 0), ("t", T, 1)]).reply == ErrorCode.NONE, "held since epoch 1"
    assert check(0, "g", 1, "a", None, [("t", T, 0), ("t", T, 2)]).reply == ErrorCode.STALE_MEMBER_EPOCH, "2 is b's now"
    assert check(0, "g", 3, "a", None, [("t", T, 0)]).reply == ErrorCode.STALE_MEMBER_EPOCH, "an epoch not reached"
    assert check(0, "g", 0, "a", None, [("t", T, 0)]).reply == ErrorCode.STALE_MEMBER_EPOCH, "before it held 0"
    driver.beat("b", -1)  # b leaves: a gains 2 and 3 at the next epoch
    a = driver.beat("a", 2, {T: {0, 1}})
    assert (a.member_epoch, a.assignment) == (3, {T: {0, 1, 2, 3}})
    assert check(0, "g", 2, "a", None, [("t", T, 0), ("t", T, 1)]).reply == ErrorCode.NONE
    assert check(0, "g", 2, "a", None, [("t", T, 2)]).reply == ErrorCode.STALE_MEMBER_EPOCH, "gained at epoch 3"
    assert check(0, "g", 3, "a", None, [("t", T, 0), ("t", T, 3)]).reply == ErrorCode.NONE


def test_the_records_rebuild_the_group():
    driver = Driver()
    driver.beat()
    driver.beat(member_id="b")
    driver.beat("m1", 1, {T: {0, 1, 2, 3}})
    latest = dict(driver.stored)
    replayed = ConsumerGroup("g")
    for key, value in reversed(list(latest.items())):  # replay order across keys does not matter
        (_, kind, _, member_id), decoded = records.decode(key, value)
        replayed.load(kind, member_id, decoded)
    group = driver.group()
    assert (replayed.epoch, replayed.assignment_epoch, replayed.target) == (group.epoch, group.assignment_epoch,
                                                                          group.target)
    for member_id, member in group.members.items():
        again = replayed.members[member_id]
        assert (again.epoch, again.previous_epoch, again.state, again.assigned, again.pending_revocation,
                again.subscribed, again.held_epochs()) == (member.epoch, member.previous_epoch, member.state,
                                                           member.assigned, member.pending_revocation,
                                                           member.subscribed, member.held_epochs())
    assert dict(group.snapshot()) == {k: v for k, v in latest.items() if v is not None}


def test_uniform_is_balanced_and_sticky_and_range_is_contiguous():
    subscriptions = {m: {T} for m in ("a", "b")}
    first = uniform(subscriptions, {T: 5}, {})
    assert sorted(len(p[T]) for p in first.values()) == [2, 3]
    third = uniform({**subscriptions, "c": {T}}, {T: 5}, first)
    assert sorted(len(p[T]) for p in third.values()) == [1, 2, 2]
    moved = sum(len(first[m][T] - third[m][T]) for m in first)
    assert moved == 1, "only what balance requires moves"
    assert range_({m: {T} for m in ("a", "b", "c")}, {T: 5}, {}) == {"a": {T: {0, 1}}, "b": {T: {2, 3}}, "c": {T: {4}}}


def test_a_static_member_that_rejoins_gets_its_partitions_back_and_nobody_else_moves():
    driver = Driver()
    driver.beat(member_id="a", instance="one")
    driver.beat(member_id="b", instance="two")
    driver.beat("a", 1, {T: {0, 1, 2, 3}})
    driver.beat("a", 1, {T: {0, 1}})  # gave up half
    b = driver.beat("b", 2, {})
    assert b.assignment == {T: {2, 3}}
    group = driver.group()
    epoch, b_epoch = group.epoch, group.members["b"].epoch
    assert driver.beat("a", -2, instance="one").error == ErrorCode.NONE
    assert group.members["a"].epoch == -2 and group.members["a"].assigned == {T: {0, 1}}, "held while away"
    assert driver.beat(member_id="c", instance="two").error == ErrorCode.UNRELEASED_INSTANCE_ID
    back = driver.beat(member_id="a2", instance="one")
    assert (back.error, back.member_id, back.member_epoch, back.assignment) == (ErrorCode.NONE, "a2", 2,
                                                                               {T: {0, 1}})
    assert (group.epoch, group.members["b"].epoch, set(group.members)) == (epoch, b_epoch, {"a2", "b"})
    assert driver.beat("a", 2, {T: {0, 1}}, instance="one").error == ErrorCode.FENCED_INSTANCE_ID
    driver.assert_no_partition_has_two_owners()


def test_a_static_member_away_past_its_session_is_removed_and_its_partitions_move():
    driver = Driver()
    driver.beat(member_id="a", instance="one")
    driver.beat(member_id="b", instance="two")
    driver.beat("a", 1, {T: {0, 1, 2, 3}})
    driver.beat("a", 1, {T: {0, 1}})
    driver.beat("b", 2, {})
    driver.beat("a", -2, instance="one")
    assert driver.beat("b", 2, {T: {2, 3}}).assignment is None, "b keeps its own, no more"
    driver.advance(SESSION_MS - 1000)
    driver.beat("b", 2, {T: {2, 3}})
    driver.advance(2000)
    assert set(driver.group().members) == {"b"}
    assert driver.beat("b", 2, {T: {2, 3}}).assignment == {T: {0, 1, 2, 3}}
    assert driver.beat(member_id="x", epoch=-2).error == ErrorCode.UNKNOWN_MEMBER_ID


def test_a_regular_expression_subscription_takes_matching_topics_as_they_appear():
    driver = Driver()
    u, v = uuid.UUID(int=2), uuid.UUID(int=3)
    cluster = {"t": (T, 4), "news-a": (u, 2), "other": (v, 2), "__consumer_offsets": (uuid.UUID(int=4), 2)}
    driver.machine.internal = lambda name: name.startswith("__")
    reply = driver.beat(topics=(), regex="(^news-.*)|(^__.*)", cluster=cluster)
    assert reply.assignment == {u: {0, 1}}, "internal topics never match"
    assert driver.group().members[reply.member_id].regex == "(^news-.*)|(^__.*)"
    w = uuid.UUID(int=5)
    grown = dict(cluster, **{"news-b": (w, 1)})
    epoch = driver.group().epoch
    again = driver.beat(reply.member_id, reply.member_epoch, {u: {0, 1}}, cluster=grown)
    assert driver.group().epoch == epoch + 1 and again.assignment == {u: {0, 1}, w: {0}}
    cleared = driver.beat(reply.member_id, again.member_epoch, again.assignment, cluster=grown, regex="")
    assert cleared.assignment is None or cleared.assignment == {}, "no names, no regex: nothing"


def test_subscription_regexes_are_re2_as_kafka_matches_them():
    driver = Driver()
    lookbehind = driver.beat(topics=(), regex="(?<=news-)a", cluster=TOPICS)
    assert lookbehind.error == ErrorCode.INVALID_REGULAR_EXPRESSION, "RE2 (Kafka's RE2/J) has no lookbehind"
    assert "invalid perl operator" in lookbehind.message
    # Exponential for a backtracking engine (2^40 paths), linear for RE2: it resolves, matching nothing.
    trap = "a" * 40 + "c"
    cluster = dict(TOPICS, **{trap: (uuid.UUID(int=9), 1)})
    reply = driver.beat(member_id="m", topics=(), regex="(a+)+b", cluster=cluster)
    assert reply.error == ErrorCode.NONE and not reply.assignment
