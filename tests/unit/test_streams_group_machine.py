"""Streams groups' rules (KIP-1071), driven without an event loop on a fake clock: topology
configuration and the internal topics it asks for, the sticky task assignor with standby
tasks, epochs and revocation before reassignment, leaving, session and revocation expiry,
static members, Kafka's answers to bad heartbeats and to a group id of another kind, the
records that rebuild a group after a coordinator move, and the group on the coordinator
(replay, commits by member epoch, deletion)."""
import uuid

from kgate.gateway.groups import records
from kgate.gateway.groups.effects import Timer, TimerKey
from kgate.gateway.groups.group import Group
from kgate.gateway.groups.records import StreamsGroupTopologyValue as V
from kgate.gateway.groups.streams_assignor import MemberSpec, assign
from kgate.gateway.groups.streams_group import Assignment, StreamsGroup
from kgate.gateway.groups.streams_machine import StreamsGroupMachine, StreamsHeartbeat
from kgate.gateway.groups.streams_topology import (
    INCORRECTLY_PARTITIONED_TOPICS,
    MISSING_INTERNAL_TOPICS,
    MISSING_SOURCE_TOPICS,
    SHUTDOWN_APPLICATION,
    STALE_TOPOLOGY,
    configure,
)
from kgate.protocol.error_codes import ErrorCode
from tests.unit.effect_ledger import EffectLedger
from tests.unit.test_group_shard import assert_replays_to_the_same_state, coordinator

SESSION_MS = 45_000
S = V.Subtopology


def info(name, partitions=0, **configs):
    return S.TopicInfo(name=name, partitions=partitions, replication_factor=0,
                       topic_configs=[S.TopicInfo.KeyValue(key=k, value=v) for k, v in configs.items()])


def topology(epoch=1):
    """Views regrouped by page through a repartition topic into a counting subtopology with a store."""
    return V(epoch=epoch, subtopologies=[
        S(subtopology_id="0", source_topics=["views"], source_topic_regex=[], state_changelog_topics=[],
          repartition_sink_topics=["app-by-page-repartition"], repartition_source_topics=[], copartition_groups=[]),
        S(subtopology_id="1", source_topics=[], source_topic_regex=[],
          state_changelog_topics=[info("app-counts-changelog", **{"cleanup.policy": "compact"})],
          repartition_sink_topics=[], repartition_source_topics=[info("app-by-page-repartition")],
          copartition_groups=[])])


def cluster(*internal, views=3):
    names = {"views": views, **{name: views for name in internal}}
    return {name: (uuid.uuid5(uuid.NAMESPACE_DNS, name), count) for name, count in names.items()}


READY = cluster("app-by-page-repartition", "app-counts-changelog")


class Driver(EffectLedger):
    def __init__(self, standby=0):
        super().__init__()
        self.groups: dict[str, Group] = {}
        self.machine = StreamsGroupMachine(self.groups, session_ms=SESSION_MS, max_size=10, standby_replicas=standby)

    def beat(self, member_id, epoch=0, owned=None, cluster=READY, process=None, instance=None, top=None, **fields):
        joining = epoch == 0
        request = StreamsHeartbeat(
            "g", member_id, epoch, "client", "/10.0.0.1", instance_id=instance,
            rebalance_timeout_ms=30_000 if joining else -1, topology=(top or topology()) if joining else None,
            owned=Assignment() if joining and owned is None else owned,
            process_id=(process or f"process-{member_id}") if joining else None, **fields)
        step = self.machine.heartbeat(self.now, request, cluster)
        self.carry_out(step.effects)
        return step.reply

    def fire(self, key):
        self.carry_out(self.machine.timer_fired(self.now, key, READY))

    @property
    def streams(self) -> StreamsGroup:
        return self.groups["g"].streams


def count(tasks):
    return sum(len(parts) for parts in tasks.values())


def test_the_topology_gives_a_task_per_partition_and_sizes_its_internal_topics():
    configured = configure(topology(), cluster())
    assert configured.status[0][0] == MISSING_INTERNAL_TOPICS and not configured.tasks
    assert configured.missing == {"app-by-page-repartition": (3, {}),
                                  "app-counts-changelog": (3, {"cleanup.policy": "compact"})}
    assert configured.status[0][1] == ("Internal topics are missing: app-by-page-repartition, "
                                       "app-counts-changelog"), "Kafka 4.4's words, no brackets"
    assert configured.partitions == {"app-by-page-repartition": 3, "app-counts-changelog": 3}, \
        "what StreamsGroupDescribe shows of the internal topics (the member sent 0)"
    assert configure(topology(), READY).tasks == {"0": 3, "1": 3}


def test_missing_source_topics_and_wrongly_sized_internal_topics_are_statuses():
    assert configure(topology(), {}).status[0] == (MISSING_SOURCE_TOPICS, "Source topics views are missing.")
    wrong = dict(READY, **{"app-counts-changelog": (uuid.uuid4(), 5)})
    assert configure(topology(), wrong).status[0][0] == INCORRECTLY_PARTITIONED_TOPICS


def test_a_first_member_is_told_the_internal_topics_to_create_then_gets_every_task_once_they_exist():
    d = Driver()
    reply = d.beat("a", cluster=cluster())
    assert reply.error == ErrorCode.NONE and reply.member_epoch == 1
    assert set(reply.create) == {"app-by-page-repartition", "app-counts-changelog"}
    assert [code for code, _ in reply.status] == [MISSING_INTERNAL_TOPICS] and not reply.assignment
    assert d.streams.state == "NotReady"
    reply = d.beat("a", 1, owned=Assignment())
    assert reply.member_epoch == 2 and not reply.status and not reply.create
    assert reply.assignment.active == {"0": {0, 1, 2}, "1": {0, 1, 2}}
    assert d.streams.state == "Stable"


def test_a_task_moves_only_after_its_owner_revoked_it():
    d = Driver()
    d.beat("a")
    everything = d.streams.members["a"].assigned.copy()
    joined = d.beat("b")
    assert joined.member_epoch == 2 and not joined.assignment.active  # a still holds them all
    a = d.beat("a", 1, owned=everything)
    assert a.member_epoch == 1 and count(a.assignment.active) == 3  # keeps its share, revokes the rest
    given_up = {s: parts - a.assignment.active.get(s, set()) for s, parts in everything.active.items()}
    assert d.beat("b", 2, owned=Assignment()).assignment is None  # still unreleased
    assert d.beat("a", 1, owned=Assignment(a.assignment.active)).member_epoch == 2
    b = d.beat("b", 2, owned=Assignment())
    assert {s: parts for s, parts in b.assignment.active.items()} == {s: p for s, p in given_up.items() if p}
    assert d.streams.state == "Stable"


def test_standby_tasks_go_to_another_process_than_the_active_one():
    d = Driver(standby=1)
    d.beat("a")
    d.beat("b")
    d.beat("a", 1, owned=d.streams.members["a"].assigned.copy())
    target = d.streams.target
    for member, other in (("a", "b"), ("b", "a")):
        for subtopology, parts in target[member].standby.items():
            assert parts <= target[other].active.get(subtopology, set())
    assert count(target["a"].standby) + count(target["b"].standby) == 6


def test_members_task_offsets_are_kept_as_last_reported():
    """KIP-1071's TaskOffsets and TaskEndOffsets: a report replaces the last, none leaves it."""
    d = Driver()
    d.beat("a", task_offsets={"1": {0: 40, 1: 7}}, task_end_offsets={"1": {0: 50, 1: 7}})
    member = d.streams.members["a"]
    assert (member.task_offsets, member.task_end_offsets) == ({"1": {0: 40, 1: 7}}, {"1": {0: 50, 1: 7}})
    d.advance(1000)
    d.beat("a", 1, task_offsets={"1": {0: 50}})
    assert member.task_offsets == {"1": {0: 50}}, "a new report replaces the last whole"
    assert member.task_end_offsets == {"1": {0: 50, 1: 7}}, "what is not reported stays"
    d.beat("a", 1)
    assert member.task_offsets == {"1": {0: 50}}


def test_a_task_moving_to_a_member_far_behind_goes_straight_to_it_with_no_warm_up():
    """Kafka 4.4 hands out no warm-up task: its refinement keeps the target assignment, whatever
    the lag the members report and however many warm-up replicas the group allows."""
    d = Driver(standby=1)
    d.beat("a", task_offsets={"1": {0: 1000, 1: 1000, 2: 1000}})
    everything = d.streams.members["a"].assigned.copy()
    d.beat("b", task_offsets={})
    d.advance(1000)
    a = d.beat("a", 1, owned=everything)
    d.beat("a", 1, owned=Assignment(a.assignment.active, a.assignment.standby))
    b = d.beat("b", 2, owned=Assignment())
    assert count(b.assignment.active) == 3, "the lagging member is given its active tasks at once"
    assert not any(m.assigned.warmup for m in d.streams.members.values())
    assert not any(t.warmup for t in d.streams.target.values())


def test_the_sticky_assignor_keeps_tasks_where_they_were_and_balances_by_count():
    previous = Assignment({"0": {0, 1, 2, 3}})
    target = assign({"a": MemberSpec("p1", previous), "b": MemberSpec("p2", Assignment())}, {"0": 4}, 0)
    assert target["a"].active["0"] < {0, 1, 2, 3} and count(target["a"].active) == 2
    assert count(target["b"].active) == 2
    # A task goes to the member that kept its state as a standby.
    had = assign({"a": MemberSpec("p1", Assignment()), "b": MemberSpec("p2", Assignment(standby={"0": {3}}))},
                 {"0": 4}, 0)
    assert 3 in had["b"].active["0"]


def test_leaving_and_session_expiry_move_the_tasks_to_the_others():
    d = Driver()
    d.beat("a")
    d.beat("b")
    d.beat("a", 1, owned=d.streams.members["a"].assigned.copy())
    assert d.beat("b", 2, owned=Assignment()).error == ErrorCode.NONE
    left = d.beat("b", -1)
    assert left.member_epoch == -1 and set(d.streams.members) == {"a"}
    assert count(d.streams.target["a"].active) == 6
    back = d.beat("a", 1, owned=d.streams.members["a"].assigned.copy())
    assert back.member_epoch == 3 and count(back.assignment.active) == 6
    d.advance(SESSION_MS - 1)
    assert "a" in d.streams.members
    d.advance(1)
    assert d.streams.members == {} and d.streams.state == "Empty"


def test_a_member_that_does_not_revoke_in_time_is_fenced():
    d = Driver()
    d.beat("a")
    d.beat("b")
    d.beat("a", 1, owned=d.streams.members["a"].assigned.copy())
    assert TimerKey("g", Timer.STREAMS_REVOCATION, "a") in d.timers
    d.advance(30_000)
    assert set(d.streams.members) == {"b"}
    assert d.beat("a", 1, owned=Assignment()).error == ErrorCode.UNKNOWN_MEMBER_ID


def test_epochs_it_cannot_have_are_fenced_and_the_previous_one_is_forgiven():
    d = Driver()
    d.beat("a", cluster=cluster())
    d.beat("a", 1, owned=Assignment())
    assert d.beat("a", 7, owned=Assignment()).error == ErrorCode.FENCED_MEMBER_EPOCH
    assert d.beat("a", 1, owned=Assignment()).error == ErrorCode.NONE  # the answer that moved it was lost
    assert d.beat("z", 3, owned=Assignment()).error == ErrorCode.UNKNOWN_MEMBER_ID


def test_a_static_member_comes_back_under_a_new_member_id_to_its_tasks():
    d = Driver()
    d.beat("a", instance="i-1")
    held = d.streams.members["a"].assigned.copy()
    epoch = d.streams.epoch
    assert d.beat("a", -2, instance="i-1").member_epoch == -2
    assert d.beat("x", instance="i-1").error == ErrorCode.NONE
    assert d.streams.members["x"].assigned == held and d.streams.epoch == epoch and "a" not in d.streams.members
    assert d.beat("y", instance="i-1").error == ErrorCode.UNRELEASED_INSTANCE_ID
    assert d.beat("a", 1, owned=Assignment(), instance="i-1").error == ErrorCode.FENCED_INSTANCE_ID


def test_bad_heartbeats_and_a_group_id_of_another_kind_get_kafkas_answers():
    d = Driver()
    assert d.beat("").error == ErrorCode.INVALID_REQUEST
    assert d.beat("a", -3).error == ErrorCode.INVALID_REQUEST
    request = StreamsHeartbeat("g", "a", 0, rebalance_timeout_ms=1000, process_id="p")
    assert d.machine.heartbeat(0, request, READY).reply.message == "Topology must be non-null when joining the group."
    d.groups["c"] = Group("c", members={"m": object()})  # a classic group with a member
    reply = d.machine.heartbeat(0, StreamsHeartbeat("c", "a", 0, rebalance_timeout_ms=1, topology=topology(),
                                                    process_id="p", owned=Assignment()), READY).reply
    assert reply.error == ErrorCode.GROUP_ID_NOT_FOUND


def test_an_older_topology_epoch_is_told_it_is_stale():
    d = Driver()
    d.beat("a", top=topology(2))
    reply = d.beat("b", top=topology(1))
    assert STALE_TOPOLOGY in [code for code, _ in reply.status]


def test_an_older_epoch_commits_the_partitions_of_the_active_tasks_the_member_held_at_it():
    """Kafka 4.4 (KIP-1251) for streams groups: a commit at an epoch the member has since left
    is checked partition by partition: the subtopology reading the topic gives the task, whose
    assignment epoch must be at or before the commit's; a task the member does not hold, or a
    topic no subtopology reads, is refused STALE_MEMBER_EPOCH."""
    d = Driver()
    d.beat("a")  # epoch 1: a is given every task
    d.beat("b")  # epoch 2
    a = d.beat("a", 1, owned=d.streams.members["a"].assigned.copy())
    assert d.beat("a", 1, owned=Assignment(a.assignment.active)).member_epoch == 2
    b = d.beat("b", 2, owned=Assignment())
    member = d.streams.members["a"]
    held = member.held_epochs()
    assert set(held.values()) == {1}, "kept since epoch 1"
    topic_of = {"0": "views", "1": "app-by-page-repartition"}

    def check(epoch, *tasks):
        partitions = [(topic_of[s], READY[topic_of[s]][0], p) for s, p in tasks]
        return StreamsGroupMachine.check_commit(d.streams, epoch, "a", partitions)

    kept, given = sorted(held)[0], next((s, p) for s, parts in b.assignment.active.items() for p in parts)
    assert check(1, kept) == ErrorCode.NONE
    assert check(2, kept, given) == ErrorCode.NONE, "the current epoch commits anything"
    assert check(1, kept, given) == ErrorCode.STALE_MEMBER_EPOCH, "that task is b's"
    assert check(0, kept) == ErrorCode.STALE_MEMBER_EPOCH, "before a held it"
    assert check(3, kept) == ErrorCode.STALE_MEMBER_EPOCH, "an epoch not reached"
    unread = [("elsewhere", uuid.uuid4(), kept[1])]
    assert StreamsGroupMachine.check_commit(d.streams, 1, "a", unread) == ErrorCode.STALE_MEMBER_EPOCH


def test_the_stored_records_rebuild_the_group():
    d = Driver(standby=1)
    d.beat("a", instance="i-1")
    d.beat("b", user_endpoint=("localhost", 8080), client_tags={"zone": "z1"})
    d.beat("a", 1, owned=d.streams.members["a"].assigned.copy())
    latest: dict[bytes, bytes | None] = {}
    for key, value in d.stored:
        latest.pop(key, None)
        latest[key] = value
    rebuilt = StreamsGroup("g")
    for key, value in latest.items():
        (_, kind, _, member_id), decoded = records.decode(key, value)
        if decoded is not None:
            rebuilt.load(kind, member_id, decoded)
    live = d.streams
    assert (rebuilt.epoch, rebuilt.assignment_epoch) == (live.epoch, live.assignment_epoch)
    assert rebuilt.target == live.target and rebuilt.topology_record() == live.topology_record()
    for member_id, member in live.members.items():
        copy = rebuilt.members[member_id]
        assert (copy.epoch, copy.previous_epoch, copy.state, copy.assigned, copy.pending_revocation) == (
            member.epoch, member.previous_epoch, member.state, member.assigned, member.pending_revocation)
        assert copy.held_epochs() == member.held_epochs()
        assert (copy.instance_id, copy.process_id, copy.user_endpoint, copy.client_tags) == (
            member.instance_id, member.process_id, member.user_endpoint, member.client_tags)


def test_a_shutdown_asked_by_one_member_reaches_every_member_until_the_group_is_empty():
    d = Driver()
    d.beat("a")
    d.beat("b")
    assert SHUTDOWN_APPLICATION not in [code for code, _ in d.beat("b", 2, owned=Assignment()).status]
    asked = d.beat("b", 2, owned=Assignment(), shutdown_application=True)
    assert SHUTDOWN_APPLICATION in [code for code, _ in asked.status]
    told = d.beat("a", 1, owned=d.streams.members["a"].assigned.copy())
    assert (SHUTDOWN_APPLICATION, "Streams group g requested shutdown.") in told.status
    d.beat("a", -1)
    d.beat("b", -1)
    assert SHUTDOWN_APPLICATION not in [code for code, _ in d.beat("c").status]


def source_only(topic="t"):
    return V(epoch=0, subtopologies=[S(subtopology_id="0", source_topics=[topic], source_topic_regex=[],
                                       state_changelog_topics=[], repartition_sink_topics=[],
                                       repartition_source_topics=[], copartition_groups=[])])


async def test_a_streams_group_on_the_coordinator_replays_commits_by_member_epoch_and_is_deleted_when_empty():
    groups = await coordinator(**{"group.streams.session.timeout.ms": SESSION_MS})
    for member in ("m1", "m2"):
        reply = await groups.streams_heartbeat(StreamsHeartbeat(
            "sg", member, 0, "c", "/h", rebalance_timeout_ms=1000, topology=source_only(), owned=Assignment(),
            process_id=f"p-{member}"))
        assert reply.error == ErrorCode.NONE
    await assert_replays_to_the_same_state(groups)
    m1 = groups.describe("sg").streams.members["m1"]
    assert groups.check_commit("sg", m1.epoch, "m1", None) == ErrorCode.NONE
    assert groups.check_commit("sg", m1.epoch + 5, "m1", None) == ErrorCode.STALE_MEMBER_EPOCH
    assert groups.check_commit("sg", 1, "nobody", None) == ErrorCode.UNKNOWN_MEMBER_ID
    assert await groups.delete_group("sg") == ErrorCode.NON_EMPTY_GROUP
    for member in ("m1", "m2"):
        await groups.streams_heartbeat(StreamsHeartbeat("sg", member, -1))
    assert groups.describe("sg").streams.state == "Empty"
    await assert_replays_to_the_same_state(groups)
    assert await groups.delete_group("sg") == ErrorCode.NONE
    await assert_replays_to_the_same_state(groups)
    assert groups.describe("sg") is None
    await groups.close()
