"""A classic-protocol group member that stops at a chosen step of a rebalance, as its own
process, so a test can kill -9 it exactly there.

    python -m tests.support.raw_member BOOTSTRAP GROUP TOPIC STEP [--session-ms N]

STEP is ``joined`` (JoinGroup answered, no SyncGroup sent) or ``synced`` (SyncGroup
answered). When it gets there it prints ``at STEP leader|follower`` and waits, sending
nothing more (no heartbeat, no LeaveGroup), until it is killed or ``--max-seconds``
pass. A leader assigns every partition of the topic to itself: what a range assignor
would give a member that sorts first is irrelevant here, only liveness is tested.
"""
import argparse
import sys
import time

from kafka.protocol.consumer import JoinGroupRequest, SyncGroupRequest
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription

from tests.support.wire import Wire

JOIN_VERSION = 3  # before KIP-394: the first JoinGroup is the one that waits
SYNC_VERSION = 3


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("bootstrap")
    parser.add_argument("group")
    parser.add_argument("topic")
    parser.add_argument("step", choices=["joined", "synced"])
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--session-ms", type=int, default=2000)
    parser.add_argument("--max-seconds", type=float, default=120)
    args = parser.parse_args()
    subscription = bytes(ConsumerProtocolSubscription(version=0, topics=[args.topic], user_data=None).encode())
    with Wire(args.bootstrap, client_id="raw-member") as wire:
        joined = wire.call(JoinGroupRequest(
            group_id=args.group, session_timeout_ms=args.session_ms, rebalance_timeout_ms=300_000, member_id="",
            protocol_type="consumer", protocols=[JoinGroupRequest.JoinGroupRequestProtocol(
                name="range", metadata=subscription)]), JOIN_VERSION)
        if joined.error_code != 0:
            sys.exit(f"JoinGroup failed with error {joined.error_code}")
        role = "leader" if joined.leader == joined.member_id else "follower"
        if args.step == "synced":
            mine = ConsumerProtocolAssignment(version=0, assigned_partitions=[
                ConsumerProtocolAssignment.TopicPartition(topic=args.topic, partitions=list(range(args.partitions)))],
                user_data=None)
            assignments = [SyncGroupRequest.SyncGroupRequestAssignment(
                member_id=member.member_id, assignment=bytes(mine.encode()) if member.member_id == joined.member_id
                else b"") for member in joined.members]
            synced = wire.call(SyncGroupRequest(group_id=args.group, generation_id=joined.generation_id,
                                                member_id=joined.member_id, group_instance_id=None,
                                                assignments=assignments), SYNC_VERSION)
            if synced.error_code != 0:
                sys.exit(f"SyncGroup failed with error {synced.error_code}")
        print(f"at {args.step} {role}", flush=True)
        time.sleep(args.max_seconds)


if __name__ == "__main__":
    main()
