"""A streams group (KIP-1071): its epochs, topology, members and their task assignments.

A Kafka Streams application's instances are the members; what they are given is tasks
(a subtopology and a partition) of three kinds: active (it processes them), standby (it
keeps a copy of their state) and warm-up (it catches up before taking them). This module
holds that state and its ``__consumer_offsets`` record form, Kafka's streams group
records (key versions 17 and 19 to 23); ``streams_machine`` holds the rules.
"""
import enum
from dataclasses import dataclass, field

from . import records
from .modern_group import AssignmentEpochs, ModernGroup

Tasks = dict[str, set[int]]  # subtopology id -> partitions
TaskOffsets = dict[str, dict[int, int]]  # subtopology id -> partition -> changelog offset sum
Endpoint = tuple[str, int]  # host, port


class MemberState(enum.IntEnum):
    """Kafka's streams member states, by the byte its records store."""
    STABLE = 0
    UNREVOKED_TASKS = 1  # must give up tasks before it moves on
    UNRELEASED_TASKS = 2  # waits for active tasks others still hold


@dataclass(slots=True)
class Assignment:
    active: Tasks = field(default_factory=dict)
    standby: Tasks = field(default_factory=dict)
    warmup: Tasks = field(default_factory=dict)

    def copy(self) -> "Assignment":
        return Assignment(copy_tasks(self.active), copy_tasks(self.standby), copy_tasks(self.warmup))

    def kinds(self) -> tuple[Tasks, Tasks, Tasks]:
        return self.active, self.standby, self.warmup

    def __bool__(self) -> bool:
        return any(any(parts for parts in tasks.values()) for tasks in self.kinds())

    def overlaps(self, other: "Assignment") -> bool:
        return any(mine.get(subtopology, set()) & parts
                   for mine, theirs in zip(self.kinds(), other.kinds()) for subtopology, parts in theirs.items())

    def fields(self, cls, suffix: str = "", epoch_of=None) -> dict:
        """The three lists as a record's or message's TaskIds ``cls`` (``suffix`` names the fields);
        with ``epoch_of(subtopology, partition)``, active tasks carry their assignment epochs."""
        lists = {f"{kind}_tasks{suffix}": task_list(cls, tasks)
                 for kind, tasks in zip(("active", "standby", "warmup"), self.kinds())}
        if epoch_of is not None:
            for struct in lists[f"active_tasks{suffix}"]:
                struct.assignment_epochs = [epoch_of(struct.subtopology_id, p) for p in struct.partitions]
        return lists

    @classmethod
    def of(cls, value, suffix: str = "") -> "Assignment":
        return cls(*(tasks_of(getattr(value, f"{kind}_tasks{suffix}")) for kind in ("active", "standby", "warmup")))


@dataclass(eq=False)
class StreamsMember(AssignmentEpochs):
    member_id: str
    client_id: str = ""
    client_host: str = ""
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    topology_epoch: int = 0
    process_id: str = ""
    user_endpoint: Endpoint | None = None
    client_tags: dict[str, str] = field(default_factory=dict)
    epoch: int = 0
    previous_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=Assignment)
    pending_revocation: Assignment = field(default_factory=Assignment)
    # The member epoch each active task it holds (assigned or pending revocation) was assigned at
    # (Kafka 4.4, KIP-1251: a commit at an older epoch may commit those tasks' partitions); one
    # held with none recorded was assigned at ``epoch``.
    assignment_epochs: dict[tuple[str, int], int] = field(default_factory=dict)
    # What the member last reported of its tasks' changelogs (KIP-1071's TaskOffsets and
    # TaskEndOffsets), every streams.task.offset.interval.ms; kept in memory only, as Kafka
    # keeps them, so a coordinator move leaves them empty until the next report.
    task_offsets: TaskOffsets = field(default_factory=dict)
    task_end_offsets: TaskOffsets = field(default_factory=dict)

    def metadata_record(self, group_id: str) -> tuple[bytes, bytes]:
        value = records.StreamsGroupMemberMetadataValue
        host, port = self.user_endpoint or ("", 0)
        return records.family_key("streams", "member", group_id, self.member_id), records.family_value(
            "streams", "member", instance_id=self.instance_id, rack_id=self.rack_id, client_id=self.client_id,
            client_host=self.client_host, rebalance_timeout_ms=self.rebalance_timeout_ms,
            topology_epoch=self.topology_epoch, process_id=self.process_id,
            user_endpoint=value.Endpoint(host=host, port=port),
            client_tags=[value.KeyValue(key=k, value=v) for k, v in sorted(self.client_tags.items())])

    def assignment_record(self, group_id: str) -> tuple[bytes, bytes]:
        value = records.StreamsGroupCurrentMemberAssignmentValue
        return records.family_key("streams", "current", group_id, self.member_id), records.family_value(
            "streams", "current", member_epoch=self.epoch, previous_member_epoch=self.previous_epoch,
            state=int(self.state), **self.assigned.fields(value.TaskIds, epoch_of=self._epoch_of),
            **self.pending_revocation.fields(value.TaskIds, "_pending_revocation", self._epoch_of))

    def _holding(self) -> tuple[Tasks, ...]:
        return self.assigned.active, self.pending_revocation.active  # only active tasks commit offsets

    def load_metadata(self, value) -> None:
        self.instance_id, self.rack_id = value.instance_id, value.rack_id
        self.client_id, self.client_host = value.client_id, value.client_host
        self.rebalance_timeout_ms, self.topology_epoch = value.rebalance_timeout_ms, value.topology_epoch
        self.process_id = value.process_id
        endpoint = value.user_endpoint
        self.user_endpoint = (endpoint.host, endpoint.port) if endpoint is not None and endpoint.host else None
        self.client_tags = {tag.key: tag.value for tag in value.client_tags}

    def load_assignment(self, value) -> None:
        self.epoch, self.previous_epoch = value.member_epoch, value.previous_member_epoch
        self.state = MemberState(value.state) if value.state in MemberState._value2member_map_ else MemberState.STABLE
        self.assigned = Assignment.of(value)
        self.pending_revocation = Assignment.of(value, "_pending_revocation")
        self.assignment_epochs = {
            (struct.subtopology_id, p): epoch
            for struct in (*value.active_tasks, *value.active_tasks_pending_revocation)
            for p, epoch in zip(struct.partitions, struct.assignment_epochs or ())}


@dataclass(eq=False)
class StreamsGroup(ModernGroup):
    FAMILY = "streams"
    MEMBER = StreamsMember
    group_id: str
    epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, StreamsMember] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)  # type: ignore[assignment]
    # The topology the group runs (a StreamsGroupTopologyValue), once a member gave one.
    topology: object | None = None
    # Not stored: the partition counts of the topics the topology uses, as the group epoch was
    # last set for (the first heartbeat after a coordinator move sets it, bumping the epoch).
    topic_partitions: dict[str, int] = field(default_factory=dict)
    # Not stored: the status of the topology's topics at the last heartbeat ((code, detail) pairs).
    status: list[tuple[int, str]] = field(default_factory=list)
    # Not stored: the partition count each internal topic is to have, as the last heartbeat
    # configured the topology (a member sends 0); what StreamsGroupDescribe shows, as Kafka does.
    internal_partitions: dict[str, int] = field(default_factory=dict)
    # Not stored: moves when any member's current tasks change, telling clients to refresh
    # the partitions each endpoint serves (interactive queries).
    endpoint_epoch: int = 0
    # Not stored: a member asked every instance of the application to shut down (until the group empties).
    shutdown_requested: bool = False

    @property
    def state(self) -> str:
        """Kafka's names for a streams group's states (ListGroups, StreamsGroupDescribe)."""
        if not self.members:
            return "Empty"
        if self.topology is None or self.status:
            return "NotReady"
        if self.assignment_epoch < self.epoch:
            return "Assigning"
        if any(m.epoch != self.assignment_epoch or m.state is not MemberState.STABLE for m in self.members.values()):
            return "Reconciling"
        return "Stable"

    def active_owners(self) -> dict[tuple[str, int], str]:
        """Who holds each active task now: assigned to it, or owed back by it."""
        return {(subtopology, p): member.member_id for member in self.members.values()
                for tasks in (member.assigned.active, member.pending_revocation.active)
                for subtopology, parts in tasks.items() for p in parts}

    def static_member(self, instance_id: str) -> StreamsMember | None:
        return next((m for m in self.members.values() if m.instance_id == instance_id), None)

    # -- record form ------------------------------------------------------------------------

    def epoch_record(self) -> tuple[bytes, bytes]:
        # The metadata hash only spares Kafka recomputing an assignment: 0 asks it to recompute.
        return self.key("group_epoch"), self.value("group_epoch", epoch=self.epoch, metadata_hash=0)

    def target_record(self, member_id: str) -> tuple[bytes, bytes]:
        value = records.StreamsGroupTargetAssignmentMemberValue
        return self.key("target", member_id), self.value(
            "target", **self.target.get(member_id, Assignment()).fields(value.TaskIds))

    def topology_record(self) -> tuple[bytes, bytes]:
        assert self.topology is not None
        return self.key("topology"), self.topology.encode(version=0)  # type: ignore[attr-defined]

    def tombstones(self) -> list[tuple[bytes, None]]:
        return [(self.key("topology"), None), *super().tombstones()]

    def snapshot(self) -> list[tuple[bytes, bytes]]:
        return super().snapshot() + ([self.topology_record()] if self.topology is not None else [])

    def load(self, kind: str, member_id: str | None, value) -> None:
        if kind == "topology":
            self.topology = value
        elif kind == "target" and value is not None:
            assert member_id is not None
            self.target[member_id] = Assignment.of(value)
        else:
            super().load(kind, member_id, value)



def task_list(cls, tasks: Tasks) -> list:
    """Tasks as TaskIds structs, in a stable order."""
    return [cls(subtopology_id=subtopology, partitions=sorted(parts)) for subtopology, parts in sorted(tasks.items())
            if parts]


def tasks_of(task_ids) -> Tasks:
    return {t.subtopology_id: set(t.partitions) for t in task_ids or () if t.partitions}


def copy_tasks(tasks: Tasks) -> Tasks:
    return {subtopology: set(parts) for subtopology, parts in tasks.items() if parts}
