"""Rules the modern group kinds apply alike, each naming itself in the log: the group epoch's
bump (consumer, share and streams groups), a heartbeat restating the client's fields and a
static member's take-over of the one that left for now (KIP-848 consumer groups and KIP-1071
streams groups)."""
import logging

from .effects import CancelTimer, Effect, Log, StoreConsumer, TimerKey
from .modern_group import ModernGroup


def restate_client(member, request) -> None:
    """What every heartbeat may restate of its client; absent fields leave the member's."""
    member.client_id, member.client_host = request.client_id, request.client_host
    if request.instance_id is not None:
        member.instance_id = request.instance_id
    if request.rack_id is not None:
        member.rack_id = request.rack_id
    if request.rebalance_timeout_ms >= 0:
        member.rebalance_timeout_ms = request.rebalance_timeout_ms


def bump_epoch(group: ModernGroup, reason: str, stored: list, out: list[Effect]) -> None:
    group.epoch += 1
    stored.append(group.epoch_record())
    out.append(Log(logging.INFO, f"{group.FAMILY} group %s epoch %d: %s", (group.group_id, group.epoch, reason)))


def take_over(group: ModernGroup, old, member, timers: list[TimerKey], out: list[Effect]) -> None:
    """``member``, a static member rejoining under a new id, takes the place of ``old`` (which
    left with epoch -2): its target moves with it, ``old``'s records and ``timers`` go."""
    del group.members[old.member_id]
    group.members[member.member_id] = member
    target = group.target.pop(old.member_id, None)
    stored: list[tuple[bytes, bytes | None]] = list(group.member_tombstones(old.member_id))
    if target is not None:
        group.target[member.member_id] = target
        stored.append(group.target_record(member.member_id))
    out += [CancelTimer(key) for key in timers]
    out.append(StoreConsumer(group.group_id, stored))
    out.append(Log(logging.INFO, f"{group.FAMILY} group %s: static member %s rejoined as %s, replacing %s",
                   (group.group_id, old.instance_id, member.member_id, old.member_id)))
