"""``kgate groups list|describe|delete|reset-offsets``: consumer groups, as kafka-consumer-groups.sh;
``list`` names each group's type (classic, consumer, share, streams) and ``describe`` shows
KIP-848 consumer groups, share groups and streams groups too (cli/modern_groups.py).

Lag is the partition's log end offset (ListOffsets LATEST, the high watermark a
consumer reads up to) minus the group's committed offset (OffsetFetch): exactly the
records a consumer resuming from the commit has left to read.

``reset-offsets`` only plans unless ``--execute``, and only on a group without members
(Empty or Dead): a live member would overwrite the reset with its next commit, so
Kafka's tool refuses too.
"""
from datetime import datetime

from kafka.protocol.consumer import OffsetSpec, OffsetTimestamp
from kafka.structs import OffsetAndMetadata, TopicPartition

from . import client_options as options
from . import modern_groups, output
from .client_options import Failed, UsageError
from .group_offsets import assigned as _assigned
from .group_offsets import committed as _committed
from .group_offsets import offsets as _offsets

INACTIVE_STATES = ("Empty", "Dead")
COMMIT_CHUNK = 500  # partitions per OffsetCommit, so a large reset shows progress


def add_parser(commands) -> None:
    actions = options.family(commands, "groups", help="list, describe, delete consumer groups and reset their offsets",
                             description="Manage consumer groups over the Kafka protocol "
                                         "(works against any Kafka cluster).")
    options.subcommand(actions, "list", "list consumer groups and their states", listing=True)
    describe = options.subcommand(actions, "describe", "state, members, committed offsets and lag",
                                  description="Describe a group: its state and members, and per partition the "
                                              "committed offset, the log end offset and the lag between them.",
                                  listing=True)
    describe.add_argument("group")
    delete = options.subcommand(actions, "delete", "delete a group without members (and its offsets)")
    delete.add_argument("group")
    reset = options.subcommand(actions, "reset-offsets", "plan or apply new committed offsets",
                               description="Compute new committed offsets for a group's partitions of the given "
                                           "topics and print the plan; --execute commits them. The group must be "
                                           "Empty or Dead. New offsets are kept between each partition's earliest "
                                           "and latest offsets.", listing=True)
    reset.add_argument("group")
    reset.add_argument("--topic", action="append", required=True, metavar="TOPIC",
                       help="a topic whose partitions to reset (repeatable)")
    target = reset.add_mutually_exclusive_group(required=True)
    target.add_argument("--to-earliest", action="store_true", help="the first offset still stored")
    target.add_argument("--to-latest", action="store_true", help="the log end offset (skip everything)")
    target.add_argument("--to-datetime", metavar="ISO8601",
                        help="the first record at or after this time (ListOffsets by timestamp), e.g. "
                             "2024-05-01T12:00:00+00:00; local time when no zone is given")
    target.add_argument("--shift-by", type=int, metavar="N", help="the committed offset plus N (may be negative)")
    target.add_argument("--to-offset", type=int, metavar="N", help="offset N on every partition")
    reset.add_argument("--execute", action="store_true", help="commit the new offsets (default: only print the plan)")


def run(args) -> int:
    return options.run(ACTIONS[args.action], args, f"kgate groups {args.action}")


def _list(args) -> None:
    with options.admin(args) as admin:
        groups = sorted(admin.list_groups(), key=lambda g: g["group_id"])
    output.listing(args, ("GROUP", "TYPE", "STATE", "PROTOCOL-TYPE"),
                   [(g["group_id"], _type(g), g.get("group_state"), g.get("protocol_type") or None) for g in groups],
                   [{"group": g["group_id"], "type": _type(g), "state": g.get("group_state"),
                     "protocol_type": g.get("protocol_type")} for g in groups])


def _type(listed: dict) -> str:
    """ListGroups v5's group type (classic, consumer, share); an older broker has classic groups only."""
    return listed.get("group_type") or "classic"


def _describe(args) -> None:
    kind = "classic"
    with options.admin(args) as admin:
        group = admin.describe_groups([args.group])[args.group]
        if (group.get("error") or "").startswith(f"[Error {modern_groups.GROUP_ID_NOT_FOUND}]"):
            # Not a classic group: DescribeGroups describes no other kind.
            share = modern_groups.share(admin, args.group)
            if share is not None:
                _describe_share(args, admin, *share)
                return
            for describe in (modern_groups.consumer, modern_groups.streams):
                described = describe(admin, args.group)
                if described is not None:
                    group, kind = described, described["protocol_type"]
                    break
        if group.get("error"):
            raise Failed(options.result_text(group["error"], f"group {args.group!r}"))
        committed = _committed(admin, args.group)
        if group["group_state"] == "Dead" and not committed:
            raise Failed(f"group {args.group!r} does not exist (GROUP_ID_NOT_FOUND)")
        owners = {tp: member for member in group["members"] for tp in _assigned(member)}
        partitions = sorted(set(committed) | set(owners))
        ends = _offsets(admin, partitions, OffsetSpec.LATEST)
    rows = []
    for tp in partitions:
        offset = committed.get(tp)
        member = owners.get(tp, {})
        rows.append({"topic": tp.topic, "partition": tp.partition, "committed_offset": offset,
                     "log_end_offset": ends[tp], "lag": None if offset is None else max(0, ends[tp] - offset),
                     "member_id": member.get("member_id"), "client_id": member.get("client_id"),
                     "host": member.get("client_host")})
    members = [{"member_id": m["member_id"], "client_id": m["client_id"], "host": m["client_host"],
                "group_instance_id": m.get("group_instance_id"),
                "partitions": [f"{tp.topic}-{tp.partition}" for tp in sorted(_assigned(m))]} for m in group["members"]]
    total = sum(r["lag"] for r in rows if r["lag"] is not None)
    if args.output == "json":
        output.document({"group": args.group, "type": kind, "state": group["group_state"],
                         "protocol_type": group["protocol_type"], "protocol": group.get("protocol_data"),
                         "members": members, "partitions": rows, "total_lag": total})
        return
    print(f"group {args.group}  type {kind}  state {group['group_state']}  "
          f"protocol {group.get('protocol_data') or '-'}  members {len(members)}  total lag {total}")
    if members:
        print()
        output.table(("MEMBER-ID", "CLIENT-ID", "HOST", "PARTITIONS"),
                     [(m["member_id"], m["client_id"], m["host"], len(m["partitions"])) for m in members])
    print()
    output.table(("TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID"),
                 [(r["topic"], r["partition"], r["committed_offset"], r["log_end_offset"], r["lag"], r["member_id"])
                  for r in rows])


def _describe_share(args, admin, group: dict, partitions: list) -> None:
    """A share group: its members, and per share-partition the start offset, the log end, the
    lag (records not yet acknowledged or archived) and the records in flight."""
    ends = _offsets(admin, [p.partition for p in partitions], OffsetSpec.LATEST)
    rows = [{"topic": p.partition.topic, "partition": p.partition.partition, "start_offset": p.start_offset,
             "log_end_offset": ends[p.partition], "lag": p.lag, "in_flight": p.in_flight} for p in partitions]
    members = [{"member_id": m["member_id"], "client_id": m["client_id"], "host": m["client_host"],
                "member_epoch": m["member_epoch"],
                "partitions": [f"{tp.topic}-{tp.partition}" for tp in modern_groups.assigned(m)]}
               for m in group["members"]]
    total = sum(r["lag"] for r in rows if r["lag"] is not None)
    if args.output == "json":
        output.document({"group": args.group, "type": "share", "state": group["group_state"],
                         "group_epoch": group["group_epoch"], "assignment_epoch": group["assignment_epoch"],
                         "members": members, "partitions": rows, "total_lag": total})
        return
    print(f"group {args.group}  type share  state {group['group_state']}  members {len(members)}  total lag {total}")
    if members:
        print()
        output.table(("MEMBER-ID", "CLIENT-ID", "HOST", "EPOCH", "PARTITIONS"),
                     [(m["member_id"], m["client_id"], m["host"], m["member_epoch"], len(m["partitions"]))
                      for m in members])
    print()
    output.table(("TOPIC", "PARTITION", "START-OFFSET", "LOG-END-OFFSET", "LAG", "IN-FLIGHT"),
                 [(r["topic"], r["partition"], r["start_offset"], r["log_end_offset"], r["lag"], r["in_flight"])
                  for r in rows])


def _delete(args) -> None:
    with options.admin(args) as admin:
        result = admin.delete_groups([args.group])
    outcome = result.get(args.group, "no answer for the group")
    if outcome != "OK":
        raise Failed(f"group {args.group!r}: {options.error_named(outcome)}")
    print(f"deleted group {args.group!r}")


def _reset_offsets(args) -> None:
    since = _timestamp_ms(args.to_datetime) if args.to_datetime else None
    with options.admin(args) as admin:
        group = _group(admin, args.group)
        if group["group_state"] not in INACTIVE_STATES:
            raise Failed(f"group {args.group!r} is {group['group_state']} with {len(group['members'])} member(s); "
                         f"offsets can only be reset when it is Empty or Dead (stop its consumers first)")
        partitions = _partitions(admin, args.topic)
        committed = _committed(admin, args.group)
        earliest = _offsets(admin, partitions, OffsetSpec.EARLIEST)
        latest = _offsets(admin, partitions, OffsetSpec.LATEST)
        wanted = _offsets(admin, partitions, OffsetTimestamp(since)) if since is not None else {}
        plan = {}
        for tp in partitions:
            target = _target(args, tp, committed.get(tp), earliest[tp], latest[tp], wanted.get(tp))
            plan[tp] = min(max(target, earliest[tp]), latest[tp])
        if args.execute:
            _commit(admin, args.group, plan)
    rows = [(args.group, tp.topic, tp.partition, committed.get(tp), plan[tp]) for tp in partitions]
    output.listing(args, ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"), rows,
                   [{"group": g, "topic": t, "partition": p, "current_offset": c, "new_offset": n}
                    for g, t, p, c, n in rows])
    if not args.execute:
        output.note("dry run: nothing committed; add --execute to commit these offsets")


def _target(args, tp, current, earliest, latest, at_time) -> int:
    """The unclamped new offset of one partition for the chosen --to-*/--shift-by option."""
    if args.to_earliest:
        return earliest
    if args.to_latest:
        return latest
    if args.to_offset is not None:
        return args.to_offset
    if args.shift_by is not None:
        if current is None:
            raise Failed(f"cannot shift {tp.topic}-{tp.partition}: the group has no committed offset there")
        return current + args.shift_by
    # --to-datetime: no record at or after the time means the end of the log, as in Kafka.
    return latest if at_time is None or at_time < 0 else at_time


def _commit(admin, group: str, plan: dict) -> None:
    items = list(plan.items())
    with output.Progress("committing offsets", total=len(items)) as progress:
        for start in range(0, len(items), COMMIT_CHUNK):
            chunk = dict((tp, OffsetAndMetadata(offset, "", None)) for tp, offset in items[start:start + COMMIT_CHUNK])
            result = admin.alter_group_offsets(group, chunk)
            failed = {tp: error for tp, error in result.items() if error.errno}
            if failed:
                tp, error = next(iter(failed.items()))
                raise Failed(f"committing {tp.topic}-{tp.partition} for group {group!r}: {error.message}"
                             + (f" (and {len(failed) - 1} more partitions)" if len(failed) > 1 else ""))
            progress.advance(len(chunk))


def _group(admin, group_id: str) -> dict:
    group = admin.describe_groups([group_id])[group_id]
    if group.get("error"):
        raise Failed(options.result_text(group["error"], f"group {group_id!r}"))
    return group






def _partitions(admin, topics) -> list:
    partitions = []
    for topic in admin.describe_topics(sorted(set(topics))):
        options.broker_error(topic["error_code"], f"topic {topic['name']!r}")
        partitions += [TopicPartition(topic["name"], p["partition_index"]) for p in topic["partitions"]]
    return sorted(partitions)




def _timestamp_ms(text: str) -> int:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(f"--to-datetime expects an ISO 8601 time such as 2024-05-01T12:00:00Z, got {text!r}") from None
    if moment.tzinfo is None:
        moment = moment.astimezone()  # local time, as kafka-consumer-groups.sh reads a zoneless time
    return int(moment.timestamp() * 1000)


ACTIONS = {"list": _list, "describe": _describe, "delete": _delete, "reset-offsets": _reset_offsets}
