"""Group liveness: a member killed (kill -9, no LeaveGroup) at any step of a rebalance
never stalls the group. The survivors, real librdkafka consumers whose rebalance timeout
is librdkafka's default 300 s, get every partition within the dead member's session
timeout plus the initial rebalance delay; the deadline below is generous but far under
the rebalance timeout, which is what the group waited for before."""
import subprocess
import sys

import pytest
from confluent_kafka import ConsumerGroupState
from confluent_kafka.admin import AdminClient

from tests.support.clients import create_topic
from tests.support.member_process import wait_for

PARTITIONS = 4
SESSION_MS = 2000
DELAY_MS = 2000
SETTINGS = {"group.initial.rebalance.delay.ms": DELAY_MS, "group.min.session.timeout.ms": 1000}
# Session plus delay plus a rejoin is a few seconds; the rebalance timeout would be 300 s.
DEADLINE = 40


@pytest.fixture
def members(members):
    """librdkafka members of the group under test, with a short session."""
    def start(bootstrap, group):
        return members("confluent-kafka", bootstrap, "work", group, session_ms=SESSION_MS)
    return start


@pytest.fixture
def raw_members():
    started: list[subprocess.Popen] = []

    def start(bootstrap, group, step):
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.support.raw_member", bootstrap, group, "work", step,
             "--partitions", str(PARTITIONS), "--session-ms", str(SESSION_MS)],
            stdout=subprocess.PIPE, text=True)
        started.append(process)
        return process

    yield start
    for process in started:
        if process.poll() is None:
            process.kill()
        process.wait()


def _group(bootstrap, group):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return admin.describe_consumer_groups([group])[group].result(timeout=30)


def _joining(bootstrap, group, count):
    """Whether ``count`` members wait in the group's PreparingRebalance."""
    description = _group(bootstrap, group)
    return description.state == ConsumerGroupState.PREPARING_REBALANCING and len(description.members) == count


def _owns_everything(member):
    assignments = member.assignments()
    return bool(assignments) and assignments[-1] == tuple(range(PARTITIONS))


def test_a_consumer_killed_while_its_join_waits_in_the_initial_delay(broker_factory, members):
    """The issue's case: librdkafka's JoinGroup parks in the initial delay, the process is
    killed; the next consumer used to wait for the dead one's rebalance timeout."""
    broker = broker_factory(**SETTINGS)
    create_topic(broker.bootstrap, "work", PARTITIONS)
    victim = members(broker.bootstrap, "crew")
    wait_for(lambda: _joining(broker.bootstrap, "crew", 1), 30, "the victim's join parked in the delay")
    victim.kill()
    survivor = members(broker.bootstrap, "crew")
    wait_for(lambda: _owns_everything(survivor), DEADLINE, "the survivor's assignment of every partition")


@pytest.mark.parametrize("step, victim_first", [
    ("joined", True),  # the leader got its JoinGroup answer and never sends SyncGroup
    ("joined", False),  # a follower that never sends SyncGroup
    ("synced", False),  # the generation is Stable, then a member dies
], ids=["leader-before-sync", "follower-before-sync", "after-sync"])
def test_a_member_killed_at_a_step_of_the_rebalance(broker_factory, members, raw_members, step, victim_first):
    broker = broker_factory(**SETTINGS)
    create_topic(broker.bootstrap, "work", PARTITIONS)
    if victim_first:
        victim = raw_members(broker.bootstrap, "crew", step)
        wait_for(lambda: _joining(broker.bootstrap, "crew", 1), 30, "the victim's join")
        survivor = members(broker.bootstrap, "crew")
    else:
        survivor = members(broker.bootstrap, "crew")
        wait_for(lambda: _joining(broker.bootstrap, "crew", 1), 30, "the survivor's join")
        victim = raw_members(broker.bootstrap, "crew", step)
    reached = victim.stdout.readline().split()
    assert reached[:2] == ["at", step], f"the victim stopped before {step}: {reached}"
    assert reached[2] == ("leader" if victim_first else "follower")
    victim.kill()
    wait_for(lambda: _owns_everything(survivor), DEADLINE, "the survivor's assignment of every partition")
