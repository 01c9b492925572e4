"""What the console shows, read from the cluster through one kafka-python admin client.

The admin client is not made for concurrent use, and the web server answers requests
in threads, so calls go through one lock; connecting is lazy and retried on the next
page after a failure, so the console starts (and says why) while the cluster is down.
"""
import threading
from dataclasses import dataclass, field

from kafka import KafkaAdminClient, KafkaConsumer
from kafka.admin import (
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    ConfigResource,
    ResourcePatternFilter,
    ResourceType,
)
from kafka.errors import SecurityDisabledError
from kafka.protocol.consumer import OffsetSpec
from kafka.structs import OffsetAndMetadata, TopicPartition

from kgate.cli import client_options as options
from kgate.cli import group_offsets
from kgate.cli.client_options import Failed

INACTIVE_STATES = ("Empty", "Dead")
# Settings that only a kgate broker describes: their presence says the cluster is kgate.
KGATE_SETTINGS = ("kgate.storage", "kgate.metadata", "kgate.wal", "entry.format", "broker.rack")


@dataclass
class PartitionLag:
    topic: str
    partition: int
    committed: int | None
    end: int
    member: str | None = None

    @property
    def lag(self) -> int | None:
        return None if self.committed is None else max(0, self.end - self.committed)


@dataclass
class GroupView:
    group_id: str
    state: str
    protocol_type: str
    members: list[dict] = field(default_factory=list)
    partitions: list[PartitionLag] = field(default_factory=list)
    note: str | None = None  # what the page cannot show of this group, and why

    @property
    def total_lag(self) -> int:
        return sum(p.lag or 0 for p in self.partitions)


class ClusterReader:
    def __init__(self, args):
        self._args = args
        self._lock = threading.Lock()
        self._admin: KafkaAdminClient | None = None

    @property
    def bootstrap(self) -> str:
        return self._args.bootstrap_server

    def _client(self) -> KafkaAdminClient:
        if self._admin is None:
            self._admin = options.connect(self._args, KafkaAdminClient, client_id="kgate-console")
        return self._admin

    def call(self, read):
        """``read(admin)`` under the lock; a failed connection is dropped so the next call reconnects."""
        with self._lock:
            admin = self._client()
            try:
                return read(admin)
            except Exception:
                self._admin = None
                admin.close()
                raise

    def close(self) -> None:
        with self._lock:
            if self._admin is not None:
                self._admin.close()
                self._admin = None

    def overview(self) -> dict:
        def read(admin):
            cluster = admin.describe_cluster()
            brokers = sorted(cluster["brokers"], key=lambda b: b["broker_id"])
            described = admin.describe_configs([ConfigResource("BROKER", str(brokers[0]["broker_id"]))],
                                               config_filter="all") if brokers else {}
            settings = next(iter(described.get("broker", {}).values()), {})
            return {"cluster_id": cluster.get("cluster_id"), "controller": cluster.get("controller_id"),
                    "brokers": brokers,
                    "kgate": {name: settings[name]["value"] for name in KGATE_SETTINGS if name in settings}}
        return self.call(read)

    def topics(self) -> list[dict]:
        """Every topic with its partition count and stored bytes (DescribeLogDirs of every broker)."""
        def read(admin):
            topics = admin.describe_topics()
            sizes: dict[str, int] = {}
            for (name, _index), stored in _stored_bytes(admin.describe_log_dirs()).items():
                sizes[name] = sizes.get(name, 0) + stored
            return sorted(({"name": t["name"], "partitions": len(t["partitions"]), "internal": t["is_internal"],
                            "bytes": sizes.get(t["name"])} for t in topics), key=lambda t: t["name"])
        return self.call(read)

    def topic(self, name: str) -> dict:
        def read(admin):
            described = admin.describe_topics([name])[0]
            options.broker_error(described["error_code"], f"topic {name!r}")
            partitions = [TopicPartition(name, p["partition_index"]) for p in described["partitions"]]
            earliest = group_offsets.offsets(admin, partitions, OffsetSpec.EARLIEST)
            latest = group_offsets.offsets(admin, partitions, OffsetSpec.LATEST)
            leaders = {p["partition_index"]: p["leader_id"] for p in described["partitions"]}
            stored = _stored_bytes(admin.describe_log_dirs([name]))
            configs = admin.describe_configs([ConfigResource("TOPIC", name)], config_filter="all")
            entries = configs.get("topic", {}).get(name, {})
            return {"name": name, "internal": described["is_internal"],
                    "partitions": [{"partition": tp.partition, "leader": leaders[tp.partition],
                                    "earliest": earliest[tp], "latest": latest[tp],
                                    "bytes": stored.get((name, tp.partition))} for tp in sorted(partitions)],
                    "configs": sorted((key, entry["value"], not entry.get("is_default", True))
                                      for key, entry in entries.items())}
        return self.call(read)

    def groups(self) -> list[GroupView]:
        """Every group with its state and total lag (one OffsetFetch per group, one ListOffsets for all)."""
        def read(admin):
            listed = admin.list_groups()
            committed = {g["group_id"]: group_offsets.committed(admin, g["group_id"]) for g in listed}
            partitions = sorted({tp for offsets in committed.values() for tp in offsets})
            ends = group_offsets.offsets(admin, partitions, OffsetSpec.LATEST)
            return sorted((GroupView(g["group_id"], g.get("group_state") or "?", g.get("protocol_type") or "",
                                     partitions=[PartitionLag(tp.topic, tp.partition, offset, ends[tp])
                                                 for tp, offset in committed[g["group_id"]].items()])
                           for g in listed), key=lambda g: g.group_id)
        return self.call(read)

    def group(self, group_id: str) -> GroupView:
        def read(admin):
            described = admin.describe_groups([group_id])[group_id]
            if described.get("error"):
                described = _listed_only(admin, group_id, described["error"])
            committed = group_offsets.committed(admin, group_id)
            owners = {tp: m["member_id"] for m in described["members"] for tp in group_offsets.assigned(m)}
            partitions = sorted(set(committed) | set(owners))
            ends = group_offsets.offsets(admin, partitions, OffsetSpec.LATEST)
            members = [{"member_id": m["member_id"], "client_id": m["client_id"], "host": m["client_host"],
                        "partitions": [f"{tp.topic}-{tp.partition}" for tp in sorted(group_offsets.assigned(m))]}
                       for m in described["members"]]
            return GroupView(group_id, described["group_state"], described.get("protocol_type") or "", members,
                             [PartitionLag(tp.topic, tp.partition, committed.get(tp), ends[tp], owners.get(tp))
                              for tp in partitions], described.get("note"))
        return self.call(read)

    def reset_offsets(self, group_id: str, topic: str, to: str, offset: int | None = None) -> dict:
        """Commit new offsets for the group's partitions of ``topic``: ``earliest``, ``latest`` or
        ``offset`` (kept between each partition's earliest and latest). The group must have no members."""
        def write(admin):
            state = admin.describe_groups([group_id])[group_id]
            if state["group_state"] not in INACTIVE_STATES:
                raise Failed(f"group {group_id!r} is {state['group_state']} with {len(state['members'])} "
                             f"member(s): offsets can only be reset when it is Empty (stop its consumers first)")
            described = admin.describe_topics([topic])[0]
            options.broker_error(described["error_code"], f"topic {topic!r}")
            partitions = [TopicPartition(topic, p["partition_index"]) for p in described["partitions"]]
            earliest = group_offsets.offsets(admin, partitions, OffsetSpec.EARLIEST)
            latest = group_offsets.offsets(admin, partitions, OffsetSpec.LATEST)
            wanted = {"earliest": earliest, "latest": latest}.get(to) or {tp: offset for tp in partitions}
            plan = {tp: min(max(wanted[tp], earliest[tp]), latest[tp]) for tp in partitions}
            result = admin.alter_group_offsets(group_id, {tp: OffsetAndMetadata(o, "", None) for tp, o in plan.items()})
            failed = [f"{tp.topic}-{tp.partition}: {error.message}" for tp, error in result.items() if error.errno]
            if failed:
                raise Failed(f"committing offsets for group {group_id!r}: {'; '.join(failed)}")
            return {tp.partition: o for tp, o in plan.items()}
        return self.call(write)

    def acls(self) -> tuple[list, str | None]:
        """Every ACL binding, or a reason there are none to show (no authorizer)."""
        def read(admin):
            try:
                acls, _ = admin.describe_acls(ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                                                        ResourcePatternFilter(ResourceType.ANY, None,
                                                                              ACLResourcePatternType.ANY)))
            except SecurityDisabledError:
                return [], "authorization is not enabled on this cluster (no authorizer): every request is allowed"
            return sorted(acls, key=lambda a: (a.resource_pattern.resource_type.name, a.resource_pattern.resource_name,
                                               a.principal, a.operation.name)), None
        return self.call(read)

    def records(self, topic: str, partition: int, offset: int, limit: int) -> list:
        """Up to ``limit`` records of one partition from ``offset``, read by a consumer of its own
        (assigned, no group), so browsing commits nothing."""
        tp = TopicPartition(topic, partition)
        consumer = options.connect(self._args, KafkaConsumer, client_id="kgate-console", enable_auto_commit=False,
                                   group_id=None, consumer_timeout_ms=1000, max_poll_records=limit)
        try:
            consumer.assign([tp])
            consumer.seek(tp, offset)
            found: list = []
            for _ in range(5):  # bounded: a few polls, each returns what has arrived
                for batch in consumer.poll(timeout_ms=500, max_records=limit - len(found)).values():
                    found.extend(batch)
                if len(found) >= limit or consumer.position(tp) >= consumer.end_offsets([tp])[tp]:
                    break
            return found[:limit]
        finally:
            consumer.close()


def _listed_only(admin, group_id: str, error: str) -> dict:
    """A group DescribeGroups does not describe but ListGroups lists: a KIP-848 consumer group (or a
    share or streams group), which only its own describe API shows, and kafka-python has none of
    those. Its state and type come from the listing; its offsets and lag are read as for any group."""
    listed = next((g for g in admin.list_groups() if g["group_id"] == group_id), None)
    if listed is None:
        raise Failed(options.result_text(error, f"group {group_id!r}"))
    kind = listed.get("group_type") or listed.get("protocol_type") or "?"
    return {"group_state": listed.get("group_state") or "?", "protocol_type": listed.get("protocol_type"),
            "members": [], "note": f"Members of this {kind} group are not shown: DescribeGroups describes only "
                                   f"classic groups, and the console's client has no describe API for the others."}


def _stored_bytes(log_dirs: list[dict]) -> dict[tuple[str, int], int]:
    """``{(topic, partition): bytes}`` from DescribeLogDirs answers of every broker."""
    stored: dict[tuple[str, int], int] = {}
    for broker in log_dirs:
        for log_dir in broker.get("log_dirs", ()):
            for topic in log_dir.get("topics", ()):
                for partition in topic["partitions"]:
                    key = (topic["name"], partition["partition_index"])
                    stored[key] = stored.get(key, 0) + partition["partition_size"]
    return stored
