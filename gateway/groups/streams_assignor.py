"""The sticky task assignor of streams groups (Kafka's ``StickyTaskAssignor``, KIP-1071).

Tasks move as little as possible, since a task that moves must rebuild its state:

- an active task stays with the member that has it, as long as that member holds no more
  than its share (the task count over the member count, rounded up);
- the others go to the member that kept a copy of their state (a standby), else to the
  least loaded member;
- each active task gets up to ``standby_replicas`` standby copies on members of other
  processes than its active one's (a process is one Streams instance, which may run
  several members), preferring members that had the task before, else the least loaded.

No warm-up tasks, as Kafka 4.4 gives none: a task goes straight to its new owner, which
restores its state before processing it (streams_machine.py says why).
"""
import math
from dataclasses import dataclass

from .streams_group import Assignment

Task = tuple[str, int]


@dataclass(frozen=True, slots=True)
class MemberSpec:
    process_id: str
    previous: Assignment


def assign(members: dict[str, MemberSpec], tasks: dict[str, int], standby_replicas: int) -> dict[str, Assignment]:
    """``tasks``: each subtopology's task count. Every member gets an entry."""
    result = {member_id: Assignment() for member_id in members}
    if not members:
        return result
    every = [(subtopology, p) for subtopology in sorted(tasks) for p in range(tasks[subtopology])]
    exists = set(every)
    load = dict.fromkeys(members, 0)
    cap = math.ceil(len(every) / len(members))
    owner: dict[Task, str] = {}

    def give(member_id: str, task: Task, kind: str) -> None:
        getattr(result[member_id], kind).setdefault(task[0], set()).add(task[1])
        load[member_id] += 1

    for member_id in sorted(members):
        for task in _tasks(members[member_id].previous.active):
            if task in exists and task not in owner and load[member_id] < cap:
                owner[task] = member_id
                give(member_id, task, "active")
    for task in every:
        if task in owner:
            continue
        had = [m for m in sorted(members) if task in _tasks(members[m].previous.standby) and load[m] < cap]
        chosen = had[0] if had else min(sorted(members), key=lambda m: load[m])
        owner[task] = chosen
        give(chosen, task, "active")
    for task in every:
        processes = {members[owner[task]].process_id}
        for _ in range(standby_replicas):
            eligible = [m for m in sorted(members) if members[m].process_id not in processes]
            if not eligible:
                break
            previous = [m for m in eligible if task in _tasks(members[m].previous.standby)
                        or task in _tasks(members[m].previous.active)]
            chosen = min(previous or eligible, key=lambda m: load[m])
            processes.add(members[chosen].process_id)
            give(chosen, task, "standby")
    return result


def _tasks(tasks) -> set[Task]:
    return {(subtopology, p) for subtopology, parts in tasks.items() for p in parts}
