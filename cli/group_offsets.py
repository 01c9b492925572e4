"""A consumer group's offsets as the client commands and the console read them:
committed (OffsetFetch), log ends (ListOffsets), and a member's assigned partitions."""
from kafka.structs import TopicPartition


def offsets(admin, partitions, spec) -> dict:
    """``{partition: offset}`` by ListOffsets ``spec`` (earliest, latest, a timestamp)."""
    if not partitions:
        return {}
    return {tp: found.offset for tp, found in admin.list_partition_offsets({tp: spec for tp in partitions}).items()}


def committed(admin, group_id: str) -> dict:
    """The group's committed offsets; partitions without one (offset -1) left out."""
    found = admin.list_group_offsets(group_id).get(group_id, {})
    return {tp: meta.offset for tp, meta in found.items() if meta.offset >= 0}


def assigned(member: dict) -> list:
    """A member's partitions from its decoded consumer-protocol assignment (none for other protocols)."""
    assignment = member.get("member_assignment")
    if not isinstance(assignment, dict):
        return []
    return [TopicPartition(a["topic"], p) for a in assignment.get("assigned_partitions", ()) for p in a["partitions"]]
