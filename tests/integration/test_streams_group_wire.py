"""Streams groups (KIP-1071) on the wire: what a heartbeat tells a member about its tasks'
changelog offsets, and what describing the group shows of them, on kgate and on Kafka 4.4
as the control.

A member is told how often to report its tasks' changelog offsets and the lag under which it
counts as caught up (the brokers' ``group.streams.task.offset.interval.ms`` and
``group.streams.acceptable.recovery.lag``); it reports them, and StreamsGroupDescribe shows
the last report. Neither broker gives a warm-up task for them (Kafka 4.4's assignment
refinement keeps the target assignment).
"""
import time
import uuid

import pytest
from kafka.protocol.metadata import FindCoordinatorRequest

from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.messages import StreamsGroupDescribeRequest, StreamsGroupHeartbeatRequest
from tests.support.clients import create_topic
from tests.support.kafka_reference import broker_under_test
from tests.support.wire import Wire

pytestmark = pytest.mark.xdist_group("streams_wire")

H = StreamsGroupHeartbeatRequest
COORDINATOR_AWAY = (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
SETTINGS = {"group.streams.task.offset.interval.ms": 20_000, "group.streams.acceptable.recovery.lag": 500}


@pytest.fixture(scope="module", params=["kgate", "kafka"])
def broker(request, tmp_path_factory):
    """kgate, and Kafka 4.4 as the control: the same answers from both."""
    yield from broker_under_test(request.param, tmp_path_factory, "streams-wire", SETTINGS, SETTINGS)


def _join(wire: Wire, group: str, topic: str):
    """The join's answer, once the group's coordinator is there (a fresh broker loads it first)."""
    topology = H.Topology(epoch=0, subtopologies=[H.Topology.Subtopology(
        subtopology_id="0", source_topics=[topic], source_topic_regex=[], state_changelog_topics=[],
        repartition_sink_topics=[], repartition_source_topics=[], copartition_groups=[])])
    deadline = time.monotonic() + 60
    while True:
        # FindCoordinator makes Kafka create __consumer_offsets; a heartbeat alone does not.
        wire.call(FindCoordinatorRequest(key=group, key_type=0), 1)
        joined = wire.call(H(group_id=group, member_id=f"member-{uuid.uuid4()}", member_epoch=0,
                             endpoint_information_epoch=0, rebalance_timeout_ms=30_000, topology=topology,
                             active_tasks=[], standby_tasks=[], warmup_tasks=[], process_id=str(uuid.uuid4())), 1)
        if joined.error_code not in COORDINATOR_AWAY or time.monotonic() > deadline:
            return joined
        time.sleep(0.2)


def test_a_member_is_told_the_offset_interval_and_recovery_lag_and_its_reports_are_described(broker):
    topic, group = f"clicks-{uuid.uuid4().hex[:8]}", f"app-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, 2)
    T = H.TaskOffset
    with Wire(broker.bootstrap) as wire:
        joined = _join(wire, group, topic)
        assert joined.error_code == ErrorCode.NONE, joined
        assert (joined.task_offset_interval_ms, joined.acceptable_recovery_lag) == (20_000, 500)
        member, epoch, beat = joined.member_id, joined.member_epoch, joined
        deadline = time.monotonic() + 30
        while not beat.active_tasks:  # until the member has its tasks (Kafka's first come after a delay)
            assert time.monotonic() < deadline, "no tasks within 30 s"
            time.sleep(0.2)
            beat = wire.call(H(group_id=group, member_id=member, member_epoch=epoch, endpoint_information_epoch=0), 1)
            assert beat.error_code == ErrorCode.NONE, beat
            epoch = beat.member_epoch
        assert not beat.warmup_tasks
        reported = wire.call(H(group_id=group, member_id=member, member_epoch=epoch, endpoint_information_epoch=0,
                               active_tasks=beat.active_tasks, standby_tasks=[], warmup_tasks=[],
                               task_offsets=[T(subtopology_id="0", partition=0, offset=5)],
                               task_end_offsets=[T(subtopology_id="0", partition=0, offset=9),
                                                 T(subtopology_id="0", partition=1, offset=3)]), 1)
        assert reported.error_code == ErrorCode.NONE, reported
        [described] = wire.call(StreamsGroupDescribeRequest(group_ids=[group], include_authorized_operations=False),
                                0).groups
    [described_member] = described.members
    assert [(t.subtopology_id, t.partition, t.offset) for t in described_member.task_offsets] == [("0", 0, 5)]
    assert sorted((t.subtopology_id, t.partition, t.offset) for t in described_member.task_end_offsets) == [
        ("0", 0, 9), ("0", 1, 3)]
    assert not described_member.assignment.warmup_tasks
