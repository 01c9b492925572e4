"""The scenarios, written once and run against each broker.

A scenario is a function of a ``Session``: it sends requests (each exchange recorded under
a label) and may read earlier answers to build later requests, as a client would (a member
id from JoinGroup, a producer id from InitProducerId). ``ci`` marks the subset the default
test suite runs; ``scripts/conformance`` runs them all.
"""
import base64
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from kafka.protocol.api_key import ApiKey
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from kgate.protocol.messages import REQUESTS
from tests.unit.record_batches import build_batch

from .session import Session
from .share_member import ShareMember

R = {key: REQUESTS[key] for key in ApiKey if key in REQUESTS}
EARLIEST, LATEST, MAX_TIMESTAMP = -2, -1, -3
TOPIC, BROKER, GROUP = 2, 4, 32  # DescribeConfigs resource types
SET, DELETE = 0, 1  # IncrementalAlterConfigs operations


@dataclass(frozen=True)
class Scenario:
    name: str
    family: str
    run: Callable[[Session], None]
    ci: bool
    secured: bool  # against the SASL listeners of brokers with an ACL authorizer (conformance/brokers.py)
    # Settings both brokers start with (a pair of its own), for what a broker cannot change at run time.
    settings: tuple[tuple[str, str], ...] = ()

    @property
    def pair(self) -> tuple[bool, tuple[tuple[str, str], ...]]:
        """The brokers it runs against: scenarios with the same pair share one."""
        return self.secured, self.settings


SCENARIOS: list[Scenario] = []


def scenario(family: str, ci: bool = True, secured: bool = False, settings: dict[str, str] | None = None):
    def register(function):
        SCENARIOS.append(Scenario(function.__name__, family, function, ci, secured,
                                  tuple(sorted((settings or {}).items()))))
        return function
    return register


# -- request builders ----------------------------------------------------------------------

def create_topics(s: Session, label: str, topics, version: int = 7, validate_only: bool = False, record=True):
    """``topics``: (name, partitions, replication factor, {config: value})."""
    CT = R[ApiKey.CreateTopics].CreatableTopic
    request = R[ApiKey.CreateTopics](topics=[
        CT(name=name, num_partitions=partitions, replication_factor=rf,
           configs=[CT.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()])
        for name, partitions, rf, configs in topics], timeout_ms=30_000, validate_only=validate_only)
    return s.call(label, request, version, record)


def topic(s: Session, base: str, partitions: int = 1, configs=None) -> str:
    """A topic of this scenario, created as setup (its answer not compared), once every
    partition has a leader in the broker's metadata: Kafka answers CreateTopics before its
    broker has the topic, and clients retry until it does."""
    name = s.name(base)
    response = create_topics(s, "setup", [(name, partitions, 1, configs)], record=False)
    assert response.topics[0].error_code == 0, response

    def led():
        M = R[ApiKey.Metadata]
        found = s.call("setup", M(topics=[M.MetadataRequestTopic(name=name)], allow_auto_topic_creation=False), 12,
                       record=False).topics[0]
        return found.error_code == 0 and len(found.partitions) == partitions and all(
            p.leader_id >= 0 for p in found.partitions)
    eventually(led, f"topic {name} led")
    def served(partition: int) -> bool:
        return not list_offsets(s, "setup", name, LATEST, partition, record=False).topics[0].partitions[0].error_code
    for partition in range(partitions):  # and its log is open on the leader
        eventually(lambda: served(partition), f"{name}-{partition} served")  # noqa: B023 - called at once
    return name


def eventually(condition, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout} s")
        time.sleep(0.05)


def metadata(s: Session, label: str, names, version: int = 12, auto_create: bool = False):
    M = R[ApiKey.Metadata]
    topics = None if names is None else [M.MetadataRequestTopic(name=n) for n in names]
    return s.call(label, M(topics=topics, allow_auto_topic_creation=auto_create), version)


def produce(s: Session, label: str, name: str, values, partition: int = 0, acks: int = -1, version: int = 11,
            transactional_id=None, **batch):
    P = R[ApiKey.Produce]
    request = P(transactional_id=transactional_id, acks=acks, timeout_ms=10_000, topic_data=[
        P.TopicProduceData(name=name, partition_data=[
            P.TopicProduceData.PartitionProduceData(index=partition, records=build_batch(values, **batch))])])
    return s.call(label, request, version)


def fetch(s: Session, label: str, name: str, offset: int, partition: int = 0, version: int = 12,
          max_bytes: int = 1 << 20, partition_max_bytes: int = 1 << 20, isolation_level: int = 0, record=True):
    F = R[ApiKey.Fetch]
    FP = F.FetchTopic.FetchPartition
    request = F(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=max_bytes, isolation_level=isolation_level,
                session_id=0, session_epoch=-1, topics=[F.FetchTopic(topic=name, partitions=[FP(
                    partition=partition, current_leader_epoch=-1, fetch_offset=offset, log_start_offset=-1,
                    partition_max_bytes=partition_max_bytes)])], forgotten_topics_data=[], rack_id="")
    return s.call(label, request, version, record)


def list_offsets(s: Session, label: str, name: str, timestamp: int, partition: int = 0, version: int = 9,
                 record=True):
    LO = R[ApiKey.ListOffsets].ListOffsetsTopic
    request = R[ApiKey.ListOffsets](replica_id=-1, isolation_level=0, topics=[LO(name=name, partitions=[
        LO.ListOffsetsPartition(partition_index=partition, current_leader_epoch=-1, timestamp=timestamp)])])
    return s.call(label, request, version, record)


def describe_configs(s: Session, label: str, resource_type: int, name: str, keys=None, version: int = 4,
                     record=True):
    D = R[ApiKey.DescribeConfigs]
    request = D(resources=[D.DescribeConfigsResource(resource_type=resource_type, resource_name=name,
                                                     configuration_keys=keys)],
                include_synonyms=True, include_documentation=True)
    return s.call(label, request, version, record)


def incremental_alter(s: Session, label: str, resource_type: int, name: str, ops, validate_only=False,
                      record=True):
    """``ops``: (config, operation, value)."""
    IAC = R[ApiKey.IncrementalAlterConfigs]
    A = IAC.AlterConfigsResource
    request = IAC(resources=[A(resource_type=resource_type, resource_name=name, configs=[
        A.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in ops])], validate_only=validate_only)
    return s.call(label, request, 1, record)


def await_config(s: Session, entity: str, name: str, value, resource_type: int = BROKER) -> None:
    """Ask until the broker describes ``name`` of ``entity`` (a broker's "": the cluster
    default) as ``value`` (None: not set there): Kafka applies a dynamic config once its
    controller's record reaches the broker, after answering the change."""
    def applied():
        configs = describe_configs(s, "setup", resource_type, entity, [name], record=False).results[0].configs
        return (configs[0].value if configs else None) == value
    eventually(applied, f"config {name}={value} of {entity or 'the cluster default'}")


def find_coordinator(s: Session, label: str, key: str, key_type: int = 0, version: int = 4, record=True):
    return s.call(label, R[ApiKey.FindCoordinator](key_type=key_type, coordinator_keys=[key]), version, record)


NOT_READY = {14, 15, 16}  # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR
SHARE_KEY = 2  # FindCoordinator's key type for a share-partition (group:topicId:partition), from v6


def await_coordinator(s: Session, key: str, key_type: int = 0) -> None:
    """Ask until the coordinator of ``key`` answers, as clients do: Kafka creates its internal
    topic on the first FindCoordinator and its coordinator loads the partition after that.
    The asks are setup, not compared."""
    eventually(lambda: not find_coordinator(s, "setup", key, key_type, record=False).coordinators[0].error_code,
               f"coordinator of {key}")
    if key_type == 0:
        OF = R[ApiKey.OffsetFetch]
        ask = OF(groups=[OF.OffsetFetchRequestGroup(group_id=key, topics=None)], require_stable=False)
        eventually(lambda: s.call("setup", ask, 9, record=False).groups[0].error_code not in NOT_READY,
                   f"group coordinator of {key} loaded")
    else:
        ask = R[ApiKey.DescribeTransactions](transactional_ids=[key])
        eventually(lambda: s.call("setup", ask, 0, record=False).transaction_states[0].error_code not in NOT_READY,
                   f"transaction coordinator of {key} loaded")


def raw_frame(api_key: int, version: int, body: bytes = b"", flexible: bool = False) -> bytes:
    """A request frame, for keys and versions no request class encodes: header v1, or v2
    (an empty tag section after the client id) when ``flexible``."""
    header = api_key.to_bytes(2, "big", signed=True) + version.to_bytes(2, "big") + (9).to_bytes(4, "big")
    header += (11).to_bytes(2, "big") + b"conformance" + (b"\x00" if flexible else b"")
    return (len(header) + len(body)).to_bytes(4, "big") + header + body


# -- ApiVersions and features ----------------------------------------------------------------

@scenario("api-versions")
def api_versions(s: Session):
    AV = R[ApiKey.ApiVersions]
    s.call("v3 with client software", AV(client_software_name="conformance", client_software_version="1.0"), 3)
    s.call("v4", AV(client_software_name="conformance", client_software_version="1.0"), 4)
    s.call("v0", AV(), 0)


@scenario("api-versions")
def api_versions_unsupported_version(s: Session):
    """A version beyond the broker's: error 35 in v0 format with the broker's own ranges."""
    s.call_raw("ApiVersions v127", ApiKey.ApiVersions, 127, raw_frame(ApiKey.ApiVersions, 127, flexible=True),
               answer_version=0)


# -- Metadata and cluster ----------------------------------------------------------------------

@scenario("metadata")
def metadata_topics(s: Session):
    name = topic(s, "meta", partitions=3)
    metadata(s, "v12 one topic", [name])
    metadata(s, "v1 one topic", [name], version=1)
    metadata(s, "v12 unknown topic", [s.name("absent")])
    metadata(s, "v12 invalid topic name", ["bad/name"])
    metadata(s, "v12 no topics", [])


@scenario("metadata")
def metadata_auto_create(s: Session):
    metadata(s, "v12 unknown topic, auto-create", [s.name("auto")], auto_create=True)


@scenario("metadata")
def describe_cluster(s: Session):
    DC = R[ApiKey.DescribeCluster]
    s.call("v0", DC(include_cluster_authorized_operations=False), 0)
    s.call("v1 brokers", DC(include_cluster_authorized_operations=False, endpoint_type=1), 1)
    s.call("v1 controllers", DC(include_cluster_authorized_operations=False, endpoint_type=2), 1)


# -- CreateTopics, DeleteTopics, CreatePartitions ------------------------------------------------

@scenario("topics")
def create_topics_valid(s: Session):
    create_topics(s, "two topics", [(s.name("a"), 3, 1, None), (s.name("b"), 1, 1, {"cleanup.policy": "compact"})])
    create_topics(s, "defaults (-1 partitions, -1 replication)", [(s.name("c"), -1, -1, None)])
    create_topics(s, "validate only", [(s.name("d"), 2, 1, None)], validate_only=True)
    metadata(s, "validate-only topic absent", [s.name("d")])
    create_topics(s, "v4", [(s.name("e"), 1, 1, None)], version=4)


@scenario("topics")
def create_topics_invalid(s: Session):
    existing = topic(s, "exists")
    create_topics(s, "already exists", [(existing, 1, 1, None)])
    create_topics(s, "bad name", [("bad/name", 1, 1, None)])
    create_topics(s, "dot name", [(".", 1, 1, None)])
    create_topics(s, "name too long", [("x" * 250, 1, 1, None)])
    create_topics(s, "zero partitions", [(s.name("zero"), 0, 1, None)])
    create_topics(s, "replication factor 3", [(s.name("rf3"), 1, 3, None)])
    create_topics(s, "unknown config", [(s.name("badcfg"), 1, 1, {"no.such.config": "1"})])
    create_topics(s, "bad config value", [(s.name("badval"), 1, 1, {"cleanup.policy": "bogus"})])
    create_topics(s, "duplicate in one request", [(s.name("dup"), 1, 1, None), (s.name("dup"), 1, 1, None)])


@scenario("topics")
def delete_topics(s: Session):
    name = topic(s, "doomed")
    D = R[ApiKey.DeleteTopics]
    s.call("v4 existing", D(topic_names=[name], timeout_ms=30_000), 4)
    s.call("v4 unknown", D(topic_names=[s.name("never")], timeout_ms=30_000), 4)
    metadata(s, "deleted topic", [name])


# Settings only a restart changes: the retention and roll times in Kafka's other units, and
# topic deletion turned off. The scenarios that need them share a pair of brokers.
_STATIC_SETTINGS = {"log.retention.minutes": "60", "log.roll.hours": "24", "delete.topic.enable": "false"}


@scenario("topics", ci=False, settings=_STATIC_SETTINGS)
def delete_topics_disabled(s: Session):
    name = topic(s, "kept")
    D = R[ApiKey.DeleteTopics]
    s.call("v2, before TOPIC_DELETION_DISABLED", D(topic_names=[name], timeout_ms=30_000), 2)
    s.call("v4", D(topic_names=[name, s.name("never")], timeout_ms=30_000), 4)
    metadata(s, "the topic stays", [name])


@scenario("topics")
def create_partitions(s: Session):
    name = topic(s, "grow", partitions=2)
    CP = R[ApiKey.CreatePartitions]

    def grow(label, target, count, validate_only=False):
        s.call(label, CP(topics=[CP.CreatePartitionsTopic(name=target, count=count, assignments=None)],
                         timeout_ms=30_000, validate_only=validate_only), 3)
    grow("grow to 4, validate only", name, 4, validate_only=True)
    grow("grow to 4", name, 4)
    grow("same count", name, 4)
    grow("shrink", name, 1)
    grow("unknown topic", s.name("nowhere"), 2)
    metadata(s, "after", [name])


@scenario("topics")
def partition_reassignments(s: Session):
    """At replication factor 1, the only kind kgate has: a move to the partition's own broker,
    and each refusal of Kafka's controller."""
    name = topic(s, "moved", partitions=2)
    M = R[ApiKey.Metadata]
    node = s.call("setup", M(topics=[], allow_auto_topic_creation=False), 12, record=False).brokers[0].node_id
    APR, LPR = R[ApiKey.AlterPartitionReassignments], R[ApiKey.ListPartitionReassignments]

    def alter(label, target, partition, replicas, version=0, **fields):
        s.call(label, APR(timeout_ms=30_000, topics=[APR.ReassignableTopic(name=target, partitions=[
            APR.ReassignableTopic.ReassignablePartition(partition_index=partition, replicas=replicas)])], **fields),
            version)
    alter("to its own broker", name, 0, [node])
    alter("to its own broker, v1", name, 1, [node], 1, allow_replication_factor_change=False)
    alter("empty replica list", name, 0, [])
    alter("a broker twice", name, 0, [node, node])
    alter("an unknown broker", name, 0, [node + 100])
    alter("an unknown partition", name, 5, [node])
    alter("an unknown topic", s.name("nowhere"), 0, [node])
    alter("cancel with none in progress", name, 1, None)
    alter("more replicas, replication factor change refused", name, 0, [node, node + 100], 1,
          allow_replication_factor_change=False)
    s.call("list the topic's", LPR(timeout_ms=30_000, topics=[LPR.ListPartitionReassignmentsTopics(
        name=name, partition_indexes=[0, 1])]), 0)
    s.call("list an unknown topic's", LPR(timeout_ms=30_000, topics=[LPR.ListPartitionReassignmentsTopics(
        name=s.name("nowhere"), partition_indexes=[0])]), 0)


# -- configs -------------------------------------------------------------------------------------

@scenario("configs")
def describe_topic_configs(s: Session):
    name = topic(s, "cfg", configs={"retention.ms": "86400000", "cleanup.policy": "compact"})
    describe_configs(s, "chosen keys", TOPIC, name,
                     ["retention.ms", "cleanup.policy", "segment.bytes", "max.message.bytes", "min.insync.replicas",
                      "message.timestamp.type", "compression.type"])
    describe_configs(s, "unknown topic", TOPIC, s.name("nocfg"), ["retention.ms"])


@scenario("configs", ci=False)
def describe_all_topic_configs(s: Session):
    describe_configs(s, "every key", TOPIC, topic(s, "allcfg"))


@scenario("configs", ci=False, settings=_STATIC_SETTINGS)
def time_unit_settings(s: Session):
    """log.retention.minutes and log.roll.hours in the server's configuration: the values they
    give retention.ms and segment.ms, and the synonyms of each form."""
    name = topic(s, "units", configs={"segment.ms": "600000"})
    describe_configs(s, "topic", TOPIC, name, ["retention.ms", "segment.ms"])
    describe_configs(s, "broker", BROKER, "0", ["log.retention.ms", "log.retention.minutes", "log.retention.hours",
                                                "log.roll.ms", "log.roll.hours", "delete.topic.enable"])


@scenario("configs")
def describe_broker_configs(s: Session):
    describe_configs(s, "chosen keys", BROKER, "0",
                     ["num.partitions", "auto.create.topics.enable", "message.max.bytes", "log.retention.hours",
                      "offsets.topic.num.partitions", "default.replication.factor", "delete.topic.enable"])
    describe_configs(s, "another broker id", BROKER, "7", ["num.partitions"])


@scenario("configs")
def alter_topic_configs(s: Session):
    name = topic(s, "alter")
    incremental_alter(s, "set retention.ms", TOPIC, name, [("retention.ms", SET, "3600000")])
    incremental_alter(s, "unknown config", TOPIC, name, [("no.such.config", SET, "1")])
    incremental_alter(s, "bad value", TOPIC, name, [("retention.ms", SET, "soon")])
    incremental_alter(s, "validate only", TOPIC, name, [("segment.ms", SET, "60000")], validate_only=True)
    incremental_alter(s, "delete retention.ms", TOPIC, name, [("retention.ms", DELETE, None)])
    incremental_alter(s, "unknown topic", TOPIC, s.name("noalter"), [("retention.ms", SET, "1")])
    describe_configs(s, "after", TOPIC, name, ["retention.ms", "segment.ms"])
    AC = R[ApiKey.AlterConfigs]
    A = AC.AlterConfigsResource
    s.call("AlterConfigs v2 set", AC(resources=[A(resource_type=TOPIC, resource_name=name, configs=[
        A.AlterableConfig(name="retention.bytes", value="1048576")])], validate_only=False), 2)


@scenario("configs")
def alter_broker_configs(s: Session):
    """Dynamic broker configs, per broker and the cluster default; every change is undone at
    the end (the brokers serve other scenarios), with settings no other scenario depends on."""
    incremental_alter(s, "dynamic log.cleaner.threads", BROKER, "0", [("log.cleaner.threads", SET, "1")],
                      validate_only=True)
    incremental_alter(s, "static broker config", BROKER, "0", [("num.network.threads", SET, "4")],
                      validate_only=True)
    incremental_alter(s, "read-only config", BROKER, "0", [("num.partitions", SET, "4")])
    incremental_alter(s, "read-only config, cluster default", BROKER, "", [("num.partitions", SET, "4")])
    incremental_alter(s, "another broker's id", BROKER, "7", [("log.cleaner.delete.retention.ms", SET, "1000")])
    incremental_alter(s, "bad value", BROKER, "0", [("log.cleaner.delete.retention.ms", SET, "soon")])
    incremental_alter(s, "validate only", BROKER, "0", [("message.max.bytes", SET, "2000000")], validate_only=True)
    incremental_alter(s, "per broker", BROKER, "0", [("log.cleaner.delete.retention.ms", SET, "3600000")])
    incremental_alter(s, "cluster default", BROKER, "", [("log.cleaner.delete.retention.ms", SET, "7200000"),
                                                         ("max.connections", SET, "100000")])
    await_config(s, "0", "log.cleaner.delete.retention.ms", "3600000")
    await_config(s, "0", "max.connections", "100000")
    keys = ["log.cleaner.delete.retention.ms", "max.connections", "num.partitions", "message.max.bytes"]
    describe_configs(s, "broker 0 after", BROKER, "0", keys)
    describe_configs(s, "cluster default after", BROKER, "", keys)
    name = topic(s, "dyn")
    describe_configs(s, "a topic after", TOPIC, name, ["delete.retention.ms", "max.message.bytes"])
    incremental_alter(s, "delete per broker", BROKER, "0", [("log.cleaner.delete.retention.ms", DELETE, None)])
    await_config(s, "0", "log.cleaner.delete.retention.ms", "7200000")
    describe_configs(s, "broker 0, per broker deleted", BROKER, "0", keys)
    AC = R[ApiKey.AlterConfigs]
    A = AC.AlterConfigsResource

    def replace(label, entity, configs):
        s.call(label, AC(resources=[A(resource_type=BROKER, resource_name=entity, configs=[
            A.AlterableConfig(name=k, value=v) for k, v in configs.items()])], validate_only=False), 2)
    # AlterConfigs replaces an entity's whole set. Not the cluster default's: Kafka's KRaft
    # controller keeps min.insync.replicas there for ELR and refuses a set without it.
    replace("AlterConfigs, broker 0's whole set", "0", {"max.connections": "90000"})
    await_config(s, "0", "max.connections", "90000")
    describe_configs(s, "broker 0, replaced", BROKER, "0", keys)
    replace("AlterConfigs, broker 0's set emptied", "0", {})
    await_config(s, "0", "max.connections", "100000")
    replace("AlterConfigs, read-only config", "0", {"num.partitions": "3"})
    incremental_alter(s, "undo", BROKER, "", [("max.connections", DELETE, None),
                                              ("log.cleaner.delete.retention.ms", DELETE, None)])
    await_config(s, "", "max.connections", None)
    await_config(s, "", "log.cleaner.delete.retention.ms", None)
    describe_configs(s, "broker 0, undone", BROKER, "0", keys)


@scenario("configs")
def cluster_default_timestamp_type(s: Session):
    """The cluster default of log.message.timestamp.type dates the records of every topic
    without a config of its own (undone at the end: the brokers serve other scenarios)."""
    name = topic(s, "defaulttime")
    incremental_alter(s, "LogAppendTime by default", BROKER, "", [("log.message.timestamp.type", SET, "LogAppendTime")])
    await_config(s, "0", "log.message.timestamp.type", "LogAppendTime")
    describe_configs(s, "the topic's type", TOPIC, name, ["message.timestamp.type"])
    produce(s, "records", name, [b"a"], timestamps=[1_700_000_000_000])
    incremental_alter(s, "undo", BROKER, "", [("log.message.timestamp.type", DELETE, None)])
    await_config(s, "0", "log.message.timestamp.type", "CreateTime")
    fetch(s, "fetch", name, 0)


# -- Produce, Fetch, ListOffsets -------------------------------------------------------------

@scenario("produce-fetch")
def produce_acks(s: Session):
    name = topic(s, "acks")
    produce(s, "acks -1", name, [b"a", b"b"])
    produce(s, "acks 1", name, [b"c"], acks=1)
    produce(s, "acks 0", name, [b"d"], acks=0)
    produce(s, "v3 acks 1", name, [b"e"], acks=1, version=3)
    produce(s, "unknown topic", s.name("noproduce"), [b"x"])
    produce(s, "unknown partition", name, [b"x"], partition=5)
    produce(s, "bad acks 2", name, [b"x"], acks=2)
    fetch(s, "from 0", name, 0)


@scenario("produce-fetch")
def fetch_edges(s: Session):
    name = topic(s, "edges")
    produce(s, "ten records", name, [b"v%d" % i * 20 for i in range(10)])
    produce(s, "ten more", name, [b"w%d" % i * 20 for i in range(10)])
    fetch(s, "from 0", name, 0)
    fetch(s, "from the middle of a batch", name, 5)
    fetch(s, "at the end", name, 20)
    fetch(s, "past the end", name, 25)
    fetch(s, "negative offset", name, -5)
    fetch(s, "partition max bytes 1", name, 0, partition_max_bytes=1)
    fetch(s, "max bytes 1", name, 0, max_bytes=1)
    fetch(s, "unknown partition", name, 0, partition=3)
    fetch(s, "unknown topic", s.name("nofetch"), 0)
    fetch(s, "v4", name, 10, version=4)


@scenario("produce-fetch")
def list_offsets_specs(s: Session):
    name = topic(s, "offsets")
    list_offsets(s, "empty latest", name, LATEST)
    list_offsets(s, "empty max timestamp", name, MAX_TIMESTAMP)
    produce(s, "records", name, [b"a", b"b", b"c"], timestamps=[1_700_000_000_000, 1_700_000_000_500,
                                                              1_700_000_000_200])
    list_offsets(s, "earliest", name, EARLIEST)
    list_offsets(s, "latest", name, LATEST)
    list_offsets(s, "max timestamp", name, MAX_TIMESTAMP)
    list_offsets(s, "by time, between", name, 1_700_000_000_100)
    list_offsets(s, "by time, after all", name, 1_800_000_000_000)
    list_offsets(s, "v0 latest", name, LATEST, version=0)
    list_offsets(s, "unknown partition", name, LATEST, partition=4)
    OE = R[ApiKey.OffsetForLeaderEpoch]
    T = OE.OffsetForLeaderTopic
    s.call("OffsetForLeaderEpoch epoch 0", OE(replica_id=-1, topics=[T(topic=name, partitions=[
        T.OffsetForLeaderPartition(partition=0, current_leader_epoch=-1, leader_epoch=0)])]), 4)


@scenario("produce-fetch")
def log_append_time(s: Session):
    """A LogAppendTime topic: the broker's clock dates each batch (the normalizer names each
    clock reading by first appearance, so the records must carry the produce answer's time)."""
    name = topic(s, "appendtime", configs={"message.timestamp.type": "LogAppendTime"})
    describe_configs(s, "the topic's timestamp type", TOPIC, name, ["message.timestamp.type"])
    producer_times = [1_700_000_000_000, 1_700_000_000_500, 1_700_000_000_200]
    produced = produce(s, "records", name, [b"a", b"b", b"c"], timestamps=producer_times)
    fetch(s, "fetch", name, 0)
    list_offsets(s, "max timestamp", name, MAX_TIMESTAMP)
    list_offsets(s, "by the producer's time", name, 1_700_000_000_100)
    if produced is not None:
        appended = produced.responses[0].partition_responses[0].log_append_time_ms
        list_offsets(s, "by the append time", name, appended)
        list_offsets(s, "after the append time", name, appended + 1)
    plain = topic(s, "createtime")
    produce(s, "CreateTime records", plain, [b"a"], timestamps=producer_times[:1])
    incremental_alter(s, "set LogAppendTime", TOPIC, plain, [("message.timestamp.type", SET, "LogAppendTime")])
    await_config(s, plain, "message.timestamp.type", "LogAppendTime", TOPIC)
    produce(s, "after the change", plain, [b"b"], timestamps=producer_times[1:2])
    # From offset 1: Kafka rolls a segment before the broker-dated batch (its first batch's
    # producer time is older than segment.ms before it), and a fetch reads one segment.
    fetch(s, "the batch after the change", plain, 1)
    incremental_alter(s, "bad timestamp type", TOPIC, plain, [("message.timestamp.type", SET, "WallClock")])


def legacy_message_set(values, magic: int) -> bytes:
    """A magic 0 or 1 message set, as 0.9- and 0.10-era producers send (Produce v0-2)."""
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=0, batch_size=1 << 20)
    for i, value in enumerate(values):
        builder.append(i, timestamp=1_700_000_000_000 + i if magic else None, key=b"k%d" % i, value=value)
    return bytes(builder.build())


@scenario("produce-fetch")
def old_generations(s: Session):
    """What Kafka 4 dropped (Produce v0-2, Fetch v0-3) and kgate keeps for old clients."""
    name = topic(s, "old")
    P = R[ApiKey.Produce]
    s.call("Produce v2, magic 1", P(transactional_id=None, acks=-1, timeout_ms=10_000, topic_data=[
        P.TopicProduceData(name=name, partition_data=[P.TopicProduceData.PartitionProduceData(
            index=0, records=legacy_message_set([b"a", b"b"], 1))])]), 2)
    produce(s, "Produce v3, magic 2", name, [b"c", b"d"], version=3)
    fetch(s, "Fetch v3 (magic 1 and down-converted)", name, 0, version=3)
    fetch(s, "Fetch v1 (magic 0)", name, 0, version=1)
    fetch(s, "Fetch v12", name, 0)


@scenario("produce-fetch")
def delete_records(s: Session):
    name = topic(s, "trim")
    produce(s, "records", name, [b"r%d" % i for i in range(6)])
    DR = R[ApiKey.DeleteRecords]
    T = DR.DeleteRecordsTopic

    def delete(label, offset, partition=0):
        s.call(label, DR(topics=[T(name=name, partitions=[T.DeleteRecordsPartition(
            partition_index=partition, offset=offset)])], timeout_ms=10_000), 2)
    delete("to 3", 3)
    delete("below the start", 1)
    delete("past the end", 99)
    delete("to the end (-1)", -1)
    list_offsets(s, "earliest after", name, EARLIEST)
    fetch(s, "fetch below the start", name, 0)


# -- groups -----------------------------------------------------------------------------------

def join(s: Session, label: str, group: str, member_id: str = "", version: int = 9, instance=None):
    J = R[ApiKey.JoinGroup]
    return s.call(label, J(group_id=group, session_timeout_ms=30_000, rebalance_timeout_ms=10_000,
                           member_id=member_id, group_instance_id=instance, protocol_type="consumer",
                           protocols=[J.JoinGroupRequestProtocol(name="range", metadata=b"\x00\x03meta")]), version)


def sync(s: Session, label: str, group: str, generation: int, member_id: str, assignments=None):
    SG = R[ApiKey.SyncGroup]
    return s.call(label, SG(group_id=group, generation_id=generation, member_id=member_id, protocol_type="consumer",
                            protocol_name="range", assignments=[
                                SG.SyncGroupRequestAssignment(member_id=m, assignment=a)
                                for m, a in (assignments or [])]), 5)


def heartbeat(s: Session, label: str, group: str, generation: int, member_id: str):
    return s.call(label, R[ApiKey.Heartbeat](group_id=group, generation_id=generation, member_id=member_id), 4)


def commit(s: Session, label: str, group: str, name: str, offset: int, generation=-1, member_id="", version=9):
    OC = R[ApiKey.OffsetCommit]
    T = OC.OffsetCommitRequestTopic
    return s.call(label, OC(group_id=group, generation_id_or_member_epoch=generation, member_id=member_id,
                            topics=[T(name=name, partitions=[T.OffsetCommitRequestPartition(
                                partition_index=0, committed_offset=offset, committed_metadata="m")])]), version)


def offset_fetch(s: Session, label: str, group: str, name: str | None, version: int = 9):
    OF = R[ApiKey.OffsetFetch]
    G = OF.OffsetFetchRequestGroup
    if version < 8:  # one group, before the grouped shape
        single = None if name is None else [OF.OffsetFetchRequestTopic(name=name, partition_indexes=[0])]
        return s.call(label, OF(group_id=group, topics=single, require_stable=False), version)
    topics = None if name is None else [G.OffsetFetchRequestTopics(name=name, partition_indexes=[0])]
    return s.call(label, OF(groups=[G(group_id=group, topics=topics)], require_stable=False), version)


@scenario("groups")
def classic_group_flow(s: Session):
    name, group = topic(s, "grp"), s.name("group")
    await_coordinator(s, group)
    find_coordinator(s, "FindCoordinator v4", group)
    first = join(s, "join without member id", group)
    member = first.member_id
    joined = join(s, "join with member id", group, member)
    generation = joined.generation_id
    sync(s, "sync as leader", group, generation, member, [(member, b"\x00\x03assignment")])
    heartbeat(s, "heartbeat", group, generation, member)
    heartbeat(s, "heartbeat, unknown member", group, generation, "unknown-member")
    heartbeat(s, "heartbeat, illegal generation", group, generation + 5, member)
    commit(s, "commit", group, name, 3, generation, member)
    commit(s, "commit, illegal generation", group, name, 4, generation + 5, member)
    offset_fetch(s, "fetch committed", group, name)
    offset_fetch(s, "fetch all", group, None)
    DG = R[ApiKey.DescribeGroups]
    s.call("DescribeGroups", DG(groups=[group], include_authorized_operations=False), 5)
    LG = R[ApiKey.LeaveGroup]
    s.call("leave", LG(group_id=group, members=[LG.MemberIdentity(member_id=member)]), 5)
    s.call("leave again", LG(group_id=group, members=[LG.MemberIdentity(member_id=member)]), 5)
    s.call("DescribeGroups after leave", DG(groups=[group], include_authorized_operations=False), 5)
    OD = R[ApiKey.OffsetDelete]
    s.call("OffsetDelete", OD(group_id=group, topics=[OD.OffsetDeleteRequestTopic(
        name=name, partitions=[OD.OffsetDeleteRequestTopic.OffsetDeleteRequestPartition(partition_index=0)])]), 0)
    s.call("DeleteGroups", R[ApiKey.DeleteGroups](groups_names=[group, s.name("nogroup")]), 2)


@scenario("groups")
def group_errors(s: Session):
    name, group = topic(s, "grperr"), s.name("errors")
    await_coordinator(s, group)
    await_coordinator(s, group + "-static")
    join(s, "join, unknown member id", group, "no-such-member")
    heartbeat(s, "heartbeat, unknown group", group, 1, "m")
    sync(s, "sync, unknown group", group, 1, "m")
    join(s, "join, empty group id", "", version=9)
    commit(s, "simple commit (generation -1)", group, name, 7)
    commit(s, "commit, unknown topic", group, s.name("nowhere"), 1)
    offset_fetch(s, "fetch, unknown group", s.name("nobody"), name)
    DG = R[ApiKey.DescribeGroups]
    s.call("describe, unknown group", DG(groups=[s.name("nobody")], include_authorized_operations=False), 5)
    first = join(s, "static member join", group + "-static", instance="instance-1")
    join(s, "static member rejoin, fenced id", group + "-static", "stale-member", instance="instance-1")
    del first


@scenario("groups")
def consumer_group_heartbeat(s: Session):
    name, group = topic(s, "cg848"), s.name("consumer")
    await_coordinator(s, group)
    CH = R[ApiKey.ConsumerGroupHeartbeat]
    first = s.call("join", CH(group_id=group, member_id="cgmember0000000000000", member_epoch=0,
                              rebalance_timeout_ms=30_000, subscribed_topic_names=[name],
                              server_assignor="uniform", topic_partitions=[]), 0)
    epoch = first.member_epoch if first is not None else 0
    s.call("heartbeat, fenced epoch", CH(group_id=group, member_id="cgmember0000000000000", member_epoch=epoch + 7), 0)
    s.call("heartbeat, unknown member", CH(group_id=group, member_id="cgmember1111111111111", member_epoch=3), 0)
    s.call("leave", CH(group_id=group, member_id="cgmember0000000000000", member_epoch=-1), 0)


@scenario("groups")
def consumer_group_commit_epochs(s: Session):
    """OffsetCommit at a member epoch the member has since left (Kafka 4.4, KIP-1251's assignment
    epochs): accepted for a partition it was assigned at or before that epoch and still holds,
    refused (STALE_MEMBER_EPOCH) for one it was assigned later; its current epoch commits both."""
    first, second = topic(s, "cgc-first"), topic(s, "cgc-second")
    group, member = s.name("commit-epochs"), "cgcmember000000000000"
    await_coordinator(s, group)
    M, CH = R[ApiKey.Metadata], R[ApiKey.ConsumerGroupHeartbeat]
    asked = M(topics=[M.MetadataRequestTopic(name=n) for n in (first, second)], allow_auto_topic_creation=False)
    ids = {t.name: t.topic_id for t in s.call("setup", asked, 12, record=False).topics}

    def beat(epoch, subscribed=None, owned=()):
        return s.call("setup", CH(group_id=group, member_id=member, member_epoch=epoch, rebalance_timeout_ms=30_000,
                                  subscribed_topic_names=subscribed, server_assignor="uniform" if epoch == 0 else None,
                                  topic_partitions=[CH.TopicPartitions(topic_id=ids[name], partitions=[0])
                                                    for name in owned]), 0, record=False)
    joined = beat(0, [first])
    assert joined.error_code == 0, joined
    beat(joined.member_epoch, owned=[first])
    moved = beat(joined.member_epoch, [first, second], [first])

    def both_assigned():
        nonlocal moved
        if moved.assignment is not None and len(moved.assignment.topic_partitions) == 2:
            return True
        moved = beat(moved.member_epoch, owned=[first])
        return False
    eventually(both_assigned, "the second topic's partition assigned")
    beat(moved.member_epoch, owned=[first, second])
    left = joined.member_epoch
    commit(s, "at the epoch it left, a partition held since", group, first, 5, left, member)
    commit(s, "at the epoch it left, a partition assigned after", group, second, 5, left, member)
    commit(s, "at its epoch, both", group, second, 6, moved.member_epoch, member)
    beat(-1)


@scenario("groups")
def group_configs(s: Session):
    """A group's own configs (KIP-848): checked, described, and honoured by the coordinator."""
    name, group, other = topic(s, "gcfg"), s.name("configured"), s.name("unconfigured")
    keys = ["consumer.session.timeout.ms", "consumer.heartbeat.interval.ms", "share.auto.offset.reset"]
    describe_configs(s, "a group without configs", GROUP, group, keys)
    incremental_alter(s, "set session and heartbeat", GROUP, group, [("consumer.session.timeout.ms", SET, "50000"),
                                                                    ("consumer.heartbeat.interval.ms", SET, "6000")])
    incremental_alter(s, "session below the broker's least", GROUP, group,
                      [("consumer.session.timeout.ms", SET, "1000")])
    incremental_alter(s, "heartbeat above the broker's most", GROUP, group,
                      [("consumer.heartbeat.interval.ms", SET, "60000")])
    incremental_alter(s, "unknown config", GROUP, group, [("no.such.config", SET, "1")])
    incremental_alter(s, "bad value", GROUP, group, [("consumer.session.timeout.ms", SET, "soon")])
    incremental_alter(s, "no group name", GROUP, "", [("consumer.session.timeout.ms", SET, "50000")])
    incremental_alter(s, "share offset reset", GROUP, group, [("share.auto.offset.reset", SET, "earliest")])
    incremental_alter(s, "bad share offset reset", GROUP, group, [("share.auto.offset.reset", SET, "middle")])
    incremental_alter(s, "validate only", GROUP, other, [("consumer.session.timeout.ms", SET, "50000")],
                      validate_only=True)
    await_config(s, group, "consumer.heartbeat.interval.ms", "6000", GROUP)
    describe_configs(s, "after", GROUP, group, keys)
    describe_configs(s, "the group validated only", GROUP, other, keys)
    await_coordinator(s, group)
    CH = R[ApiKey.ConsumerGroupHeartbeat]
    member = "gcfgmember00000000000"
    s.call("heartbeat: the group's interval", CH(group_id=group, member_id=member, member_epoch=0,
                                                 rebalance_timeout_ms=30_000, subscribed_topic_names=[name],
                                                 server_assignor="uniform", topic_partitions=[]), 0)
    s.call("leave", CH(group_id=group, member_id=member, member_epoch=-1), 0)
    incremental_alter(s, "delete heartbeat", GROUP, group, [("consumer.heartbeat.interval.ms", DELETE, None)])
    await_config(s, group, "consumer.heartbeat.interval.ms", "5000", GROUP)
    describe_configs(s, "after delete", GROUP, group, keys)


@scenario("share groups")
def share_group_offsets(s: Session):
    """DescribeShareGroupOffsets, AlterShareGroupOffsets and DeleteShareGroupOffsets (KIP-932): an
    unknown group (altering makes it), a group with a member, then the group empty: alter,
    describe (v0, and v1's lag), delete, on known and unknown topics and partitions, and a
    classic group's id."""
    name, unread, group = topic(s, "sgo", partitions=2), topic(s, "sgo-unread"), s.name("share-offsets")
    now = int(time.time() * 1000)  # Kafka's retention would delete records stamped long ago
    for partition in (0, 1):
        produce(s, f"produce to {partition}", name, [b"%d" % i for i in range(10)], partition=partition,
                timestamps=[now] * 10)
    D, A, X = R[ApiKey.DescribeShareGroupOffsets], R[ApiKey.AlterShareGroupOffsets], R[ApiKey.DeleteShareGroupOffsets]
    DG, AT = D.DescribeShareGroupOffsetsRequestGroup, A.AlterShareGroupOffsetsRequestTopic

    def describe(label: str, topics, version: int = 1):
        asked = None if topics is None else [DG.DescribeShareGroupOffsetsRequestTopic(topic_name=t, partitions=p)
                                             for t, p in topics]
        s.call(label, D(groups=[DG(group_id=group, topics=asked)]), version)

    def alter(label: str, target: str, offsets):
        s.call(label, A(group_id=target, topics=[AT(topic_name=t, partitions=[
            AT.AlterShareGroupOffsetsRequestPartition(partition_index=p, start_offset=o) for p, o in parts])
            for t, parts in offsets]), 0)

    def delete(label: str, target: str, topics):
        s.call(label, X(group_id=target, topics=[X.DeleteShareGroupOffsetsRequestTopic(topic_name=t) for t in topics]),
               0)

    await_coordinator(s, group)
    delete("delete, unknown group", group, [name])
    describe("describe, unknown group", [(name, [0, 1])])
    describe("describe all, unknown group", None)
    alter("alter, unknown group: made", group, [(name, [(0, 2)])])
    [described] = metadata(s, "topic id", [name]).topics
    member = ShareMember(s, group, name, described.topic_id)
    member.join(partitions=2)
    alter("alter, a member in the group", group, [(name, [(0, 3)])])
    delete("delete, a member in the group", group, [name])
    member.leave()
    # (Kafka 4.4 closes the connection when DescribeShareGroupOffsets names a partition the topic lacks.)
    alter("alter", group, [(name, [(0, 3), (1, 5), (7, 1)]), (s.name("missing"), [(0, 1)])])
    describe("describe", [(name, [0, 1]), (s.name("missing"), [0])])
    describe("describe v0", [(name, [0, 1])], version=0)
    describe("describe all", None)
    alter("alter past the log end", group, [(name, [(1, 20)])])
    describe("describe past the log end", [(name, [1])])
    delete("delete", group, [name, unread, s.name("missing")])
    describe("describe after delete", [(name, [0, 1])])
    describe("describe all after delete", None)
    delete("delete again", group, [name])
    classic = s.name("classic")
    await_coordinator(s, classic)
    commit(s, "commit: a classic group", classic, name, 1)
    alter("alter, a classic group", classic, [(name, [(0, 3)])])
    delete("delete, a classic group", classic, [name])


# -- transactions -------------------------------------------------------------------------------

def init_producer(s: Session, label: str, transactional_id, version: int = 5, record=True):
    return s.call(label, R[ApiKey.InitProducerId](transactional_id=transactional_id, transaction_timeout_ms=60_000,
                                                  producer_id=-1, producer_epoch=-1), version, record)


def await_producer_ids(s: Session) -> None:
    """Kafka's broker answers InitProducerId with COORDINATOR_LOAD_IN_PROGRESS until its
    controller has granted it a block of producer ids; clients retry."""
    eventually(lambda: init_producer(s, "setup", None, record=False).error_code not in NOT_READY, "producer ids")


def add_partitions(s: Session, label: str, txn: str, pid: int, epoch: int, name: str):
    A = R[ApiKey.AddPartitionsToTxn]
    return s.call(label, A(v3_and_below_transactional_id=txn, v3_and_below_producer_id=pid,
                           v3_and_below_producer_epoch=epoch, v3_and_below_topics=[
                               A.AddPartitionsToTxnTopic(name=name, partitions=[0])]), 3)


def end_txn(s: Session, label: str, txn: str, pid: int, epoch: int, committed: bool):
    return s.call(label, R[ApiKey.EndTxn](transactional_id=txn, producer_id=pid, producer_epoch=epoch,
                                         committed=committed), 3)


@scenario("transactions")
def transaction_flow(s: Session):
    name, txn, group = topic(s, "txn"), s.name("txn"), s.name("txn-group")
    await_coordinator(s, txn, key_type=1)
    await_coordinator(s, group)
    await_producer_ids(s)
    init_producer(s, "idempotent InitProducerId", None)
    find_coordinator(s, "FindCoordinator, transaction", txn, key_type=1)
    init = init_producer(s, "InitProducerId", txn)
    pid, epoch = init.producer_id, init.producer_epoch
    add_partitions(s, "AddPartitionsToTxn", txn, pid, epoch, name)
    produce(s, "transactional produce", name, [b"t1", b"t2"], transactional_id=txn, producer_id=pid,
            producer_epoch=epoch, base_sequence=0, transactional=True)
    s.call("AddOffsetsToTxn", R[ApiKey.AddOffsetsToTxn](transactional_id=txn, producer_id=pid,
                                                       producer_epoch=epoch, group_id=group), 3)
    TC = R[ApiKey.TxnOffsetCommit]
    T = TC.TxnOffsetCommitRequestTopic
    s.call("TxnOffsetCommit", TC(transactional_id=txn, group_id=group, producer_id=pid, producer_epoch=epoch,
                                 generation_id=-1, member_id="", topics=[T(name=name, partitions=[
                                     T.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=1)])]), 3)
    s.call("DescribeTransactions, ongoing", R[ApiKey.DescribeTransactions](transactional_ids=[txn]), 0)
    end_txn(s, "EndTxn abort", txn, pid, epoch, False)
    # Kafka writes the abort markers after answering EndTxn (kgate before); compare once they are
    # written and the transaction is complete (until then Kafka answers CONCURRENT_TRANSACTIONS).
    eventually(lambda: list_offsets(s, "setup", name, LATEST, record=False).topics[0].partitions[0].offset == 3,
               "abort marker written")
    described = R[ApiKey.DescribeTransactions](transactional_ids=[txn])
    eventually(lambda: s.call("setup", described, 0, record=False).transaction_states[0].transaction_state
               == "CompleteAbort", "transaction complete")
    # Even then Kafka has answered a fetch from 0 OFFSET_OUT_OF_RANGE, with no offsets, for a
    # moment (seen once, on a loaded machine): compare once it serves the partition.
    eventually(lambda: not fetch(s, "setup", name, 0, isolation_level=1, record=False).responses[0]
               .partitions[0].error_code, "the partition readable")
    fetch(s, "read_committed after abort", name, 0, isolation_level=1)
    fetch(s, "read_uncommitted after abort", name, 0)
    list_offsets(s, "latest after abort", name, LATEST)
    end_txn(s, "EndTxn commit with no transaction", txn, pid, epoch, True)


@scenario("transactions")
def transaction_fencing(s: Session):
    name, txn = topic(s, "fence"), s.name("fence")
    await_coordinator(s, txn, key_type=1)
    await_producer_ids(s)
    old = init_producer(s, "first InitProducerId", txn)
    new = init_producer(s, "second InitProducerId", txn)
    add_partitions(s, "old epoch AddPartitionsToTxn", txn, old.producer_id, old.producer_epoch, name)
    add_partitions(s, "unknown producer id", txn, old.producer_id + 1000, 0, name)
    end_txn(s, "EndTxn with the old epoch", txn, old.producer_id, old.producer_epoch, True)
    add_partitions(s, "new epoch", txn, new.producer_id, new.producer_epoch, name)
    s.call("DescribeTransactions", R[ApiKey.DescribeTransactions](transactional_ids=[txn, s.name("notxn")]), 0)
    s.call("ListTransactions, filtered", R[ApiKey.ListTransactions](state_filters=["Ongoing"],
                                                                    producer_id_filters=[new.producer_id]), 1)
    DP = R[ApiKey.DescribeProducers]
    s.call("DescribeProducers", DP(topics=[DP.TopicRequest(name=name, partition_indexes=[0, 9])]), 0)
    end_txn(s, "EndTxn abort", txn, new.producer_id, new.producer_epoch, False)


# -- ACLs, SASL, malformed requests ------------------------------------------------------------------

@scenario("acls")
def acls_without_authorizer(s: Session):
    DA = R[ApiKey.DescribeAcls]
    s.call("DescribeAcls", DA(resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
                              principal_filter=None, host_filter=None, operation=1, permission_type=1), 3)
    CA = R[ApiKey.CreateAcls]
    s.call("CreateAcls", CA(creations=[CA.AclCreation(resource_type=2, resource_name=s.name("acl"),
                                                      resource_pattern_type=3, principal="User:alice", host="*",
                                                      operation=3, permission_type=3)]), 3)


@scenario("sasl")
def sasl_on_plaintext(s: Session):
    SH = R[ApiKey.SaslHandshake]
    s.call("SaslHandshake PLAIN on a PLAINTEXT listener", SH(mechanism="PLAIN"), 1)
    s.call("SaslAuthenticate without handshake", R[ApiKey.SaslAuthenticate](auth_bytes=b"\x00u\x00p"), 2)


# -- authorization and SASL errors, against the secured pair ---------------------------------------

TOPIC_RESOURCE, GROUP_RESOURCE, CLUSTER_RESOURCE, TXN_RESOURCE = 2, 3, 4, 5
LITERAL, PREFIXED, ANY_PATTERN = 3, 4, 1
ANY_OPERATION, ALL, READ, WRITE, CREATE, DESCRIBE = 1, 2, 3, 4, 5, 8
ANY_PERMISSION, DENY, ALLOW = 1, 2, 3


def login(s: Session, label: str, user: str, password: str, mechanism: str = "PLAIN"):
    """A fresh connection authenticated as ``user`` (SaslHandshake v1, then SaslAuthenticate)."""
    s.close()
    return authenticate(s, label, user, password, mechanism)


def authenticate(s: Session, label: str, user: str, password: str, mechanism: str = "PLAIN"):
    """SaslHandshake v1 and a PLAIN SaslAuthenticate on the connection as it is."""
    s.call(f"{label}: handshake", R[ApiKey.SaslHandshake](mechanism=mechanism), 1)
    return s.call(f"{label}: authenticate",
                  R[ApiKey.SaslAuthenticate](auth_bytes=b"\0" + user.encode() + b"\0" + password.encode()), 2)


def admin_login(s: Session) -> None:
    from .brokers import SUPER_USER, USERS
    s.close()
    s.call("setup", R[ApiKey.SaslHandshake](mechanism="PLAIN"), 1, record=False)
    s.call("setup", R[ApiKey.SaslAuthenticate](
        auth_bytes=b"\0" + SUPER_USER.encode() + b"\0" + USERS[SUPER_USER].encode()), 2, record=False)


def create_acls(s: Session, label: str, acls):
    """``acls``: (resource type, name, pattern, principal, operation, permission)."""
    CA = R[ApiKey.CreateAcls]
    return s.call(label, CA(creations=[CA.AclCreation(resource_type=t, resource_name=n, resource_pattern_type=p,
                                                      principal=who, host="*", operation=op, permission_type=perm)
                                       for t, n, p, who, op, perm in acls]), 3)


@scenario("sasl", secured=True)
def sasl_errors(s: Session):
    metadata(s, "Metadata before authenticating", [])
    s.close()
    s.call("SaslHandshake GSSAPI (not enabled)", R[ApiKey.SaslHandshake](mechanism="GSSAPI"), 1)
    login(s, "wrong password", "alice", "not-her-password")
    metadata(s, "Metadata after a failed login", [])
    login(s, "unknown user", "mallory", "secret")
    login(s, "PLAIN", "alice", "alice-secret")
    s.call("SaslHandshake again, authenticated", R[ApiKey.SaslHandshake](mechanism="PLAIN"), 1)
    s.close()
    s.call("SaslAuthenticate before SaslHandshake", R[ApiKey.SaslAuthenticate](auth_bytes=b"\0alice\0x"), 2)
    s.close()
    s.call("SaslHandshake v0 PLAIN", R[ApiKey.SaslHandshake](mechanism="PLAIN"), 0)


REAUTH_MS = 3000


def wait_until(moment: float, what: str) -> None:
    """Until ``moment`` (time.monotonic()): a session's end is a time, so its condition is one."""
    eventually(lambda: time.monotonic() >= moment, what, timeout=moment - time.monotonic() + 5)


@scenario("sasl", secured=True, settings={"connections.max.reauth.ms": str(REAUTH_MS)})
def sasl_reauthentication(s: Session):
    """KIP-368: a login holds connections.max.reauth.ms, the client renews it on the live
    connection (same mechanism, same principal), and a request past it closes the connection."""
    lifetime = REAUTH_MS / 1000
    login(s, "login", "alice", "alice-secret")
    logged_in = time.monotonic()
    metadata(s, "a request within the session", [])
    wait_until(logged_in + lifetime / 2, "half the session")
    authenticate(s, "re-authentication", "alice", "alice-secret")
    renewed = time.monotonic()
    s.call("a second re-authentication within a second", R[ApiKey.SaslHandshake](mechanism="PLAIN"), 1)
    wait_until(logged_in + lifetime + 0.3, "the first session's end")
    metadata(s, "a request after the first session, within the renewed one", [])
    wait_until(renewed + lifetime + 0.3, "the renewed session's end")
    metadata(s, "a request after the renewed session", [])
    login(s, "login again", "alice", "alice-secret")
    authenticate(s, "re-authentication as another user", "bob", "bob-secret")
    metadata(s, "the connection after", [])
    login(s, "login with PLAIN", "alice", "alice-secret")
    s.call("re-authentication with SCRAM: handshake", R[ApiKey.SaslHandshake](mechanism="SCRAM-SHA-256"), 1)
    s.call("re-authentication with SCRAM: authenticate",
           R[ApiKey.SaslAuthenticate](auth_bytes=b"n,,n=alice,r=fyko+d2lbbFgONRv9qkxdawL"), 2)


@scenario("acls", secured=True)
def acl_apis(s: Session):
    admin_login(s)
    name = s.name("acl")
    create_acls(s, "CreateAcls", [(TOPIC_RESOURCE, name, LITERAL, "User:alice", READ, ALLOW),
                                  (GROUP_RESOURCE, s.name("g"), PREFIXED, "User:alice", ALL, ALLOW),
                                  (TOPIC_RESOURCE, name, LITERAL, "User:bob", WRITE, DENY)])
    create_acls(s, "CreateAcls invalid", [(TOPIC_RESOURCE, "*", PREFIXED, "User:alice", READ, ALLOW),
                                          (TOPIC_RESOURCE, name, LITERAL, "alice", READ, ALLOW),
                                          (CLUSTER_RESOURCE, "not-the-cluster", LITERAL, "User:alice", CREATE, ALLOW)])
    DA = R[ApiKey.DescribeAcls]
    s.call("DescribeAcls, the topic", DA(resource_type_filter=TOPIC_RESOURCE, resource_name_filter=name,
                                         pattern_type_filter=LITERAL, principal_filter=None, host_filter=None,
                                         operation=ANY_OPERATION, permission_type=ANY_PERMISSION), 3)
    s.call("DescribeAcls, alice's, matching", DA(resource_type_filter=GROUP_RESOURCE,
                                                 resource_name_filter=s.name("g") + "-x", pattern_type_filter=2,
                                                 principal_filter="User:alice", host_filter=None,
                                                 operation=ANY_OPERATION, permission_type=ANY_PERMISSION), 3)
    DL = R[ApiKey.DeleteAcls]
    s.call("DeleteAcls bob's", DL(filters=[DL.DeleteAclsFilter(
        resource_type_filter=TOPIC_RESOURCE, resource_name_filter=name, pattern_type_filter=LITERAL,
        principal_filter="User:bob", host_filter=None, operation=ANY_OPERATION, permission_type=ANY_PERMISSION)]), 3)
    login(s, "as alice", "alice", "alice-secret")
    s.call("DescribeAcls as alice", DA(resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
                                       principal_filter=None, host_filter=None, operation=1, permission_type=1), 3)
    create_acls(s, "CreateAcls as alice", [(TOPIC_RESOURCE, name, LITERAL, "User:alice", WRITE, ALLOW)])


@scenario("acls", secured=True)
def authorization_failures(s: Session):
    admin_login(s)
    readable, hidden = topic(s, "readable"), topic(s, "hidden")
    group, txn = s.name("g") + "-member", s.name("txn")
    await_coordinator(s, group)
    await_coordinator(s, txn, key_type=1)
    await_producer_ids(s)
    create_acls(s, "setup", [(TOPIC_RESOURCE, readable, LITERAL, "User:alice", READ, ALLOW),
                             (GROUP_RESOURCE, s.name("g"), PREFIXED, "User:alice", READ, ALLOW)])
    login(s, "as alice", "alice", "alice-secret")
    M = R[ApiKey.Metadata]
    s.call("Metadata with authorized operations", M(topics=[M.MetadataRequestTopic(name=n) for n in (readable, hidden)],
                                                    allow_auto_topic_creation=False,
                                                    include_topic_authorized_operations=True), 12)
    metadata(s, "Metadata, auto-create an unauthorized topic", [s.name("new")], auto_create=True)
    produce(s, "Produce without WRITE", readable, [b"x"])
    fetch(s, "Fetch with READ", readable, 0)
    fetch(s, "Fetch without READ", hidden, 0)
    list_offsets(s, "ListOffsets without DESCRIBE", hidden, LATEST)
    create_topics(s, "CreateTopics without CREATE", [(s.name("mine"), 1, 1, None)])
    s.call("DeleteTopics without DELETE", R[ApiKey.DeleteTopics](topic_names=[readable], timeout_ms=10_000), 4)
    describe_configs(s, "DescribeConfigs without DESCRIBE_CONFIGS", TOPIC, readable, ["retention.ms"])
    incremental_alter(s, "IncrementalAlterConfigs without ALTER_CONFIGS", TOPIC, readable,
                      [("retention.ms", SET, "1000")])
    find_coordinator(s, "FindCoordinator, allowed group", group)
    find_coordinator(s, "FindCoordinator, other group", s.name("other"))
    commit(s, "OffsetCommit, allowed group, readable topic", group, readable, 1)
    commit(s, "OffsetCommit, other group", s.name("other"), readable, 1)
    offset_fetch(s, "OffsetFetch, hidden topic", group, hidden)
    offset_fetch(s, "OffsetFetch, other group", s.name("other"), readable)
    offset_fetch(s, "OffsetFetch v7, other group", s.name("other"), readable, version=7)
    init_producer(s, "InitProducerId without the transactional id", txn)
    init_producer(s, "InitProducerId, idempotent without IDEMPOTENT_WRITE", None)
    DC = R[ApiKey.DescribeCluster]
    s.call("DescribeCluster with authorized operations", DC(include_cluster_authorized_operations=True), 0)
    s.call("DescribeGroups, other group", R[ApiKey.DescribeGroups](groups=[s.name("other")],
                                                                   include_authorized_operations=True), 5)
    s.call("ListGroups", R[ApiKey.ListGroups](states_filter=[]), 4)
    s.call("DeleteRecords without DELETE", R[ApiKey.DeleteRecords](topics=[
        R[ApiKey.DeleteRecords].DeleteRecordsTopic(name=readable, partitions=[
            R[ApiKey.DeleteRecords].DeleteRecordsTopic.DeleteRecordsPartition(partition_index=0, offset=0)])],
        timeout_ms=10_000), 2)


@scenario("share groups", secured=True)
def share_state_apis(s: Session):
    """The share-state APIs (83-87) as a share-partition's leader and the group coordinator send
    them to the share coordinator: ClusterAction required (alice is refused), then as the super
    user: a read before any state, initialize, writes merged over what is stored, older state and
    leader epochs fenced, the summary at v0 and v1, unknown topics and partitions, delete."""
    admin_login(s)
    name = topic(s, "state", partitions=2)
    [described] = metadata(s, "topic id", [name]).topics
    topic_id, group = described.topic_id, s.name("state-group")
    IN, RD, W = R[ApiKey.InitializeShareGroupState], R[ApiKey.ReadShareGroupState], R[ApiKey.WriteShareGroupState]
    X, SM = R[ApiKey.DeleteShareGroupState], R[ApiKey.ReadShareGroupStateSummary]
    WP = W.WriteStateData.PartitionData

    def read(label: str, partition: int = 0, leader_epoch: int = 0, topic=None, target=None):
        s.call(label, RD(group_id=group if target is None else target, topics=[RD.ReadStateData(
            topic_id=topic or topic_id, partitions=[RD.ReadStateData.PartitionData(
                partition=partition, leader_epoch=leader_epoch)])]), 0)

    def write(label: str, state_epoch: int, leader_epoch: int, start: int, batches, version: int = 0,
              partition: int = 0):
        s.call(label, W(group_id=group, topics=[W.WriteStateData(topic_id=topic_id, partitions=[WP(
            partition=partition, state_epoch=state_epoch, leader_epoch=leader_epoch, start_offset=start,
            delivery_complete_count=-1, state_batches=[WP.StateBatch(first_offset=f, last_offset=last,
                                                                    delivery_state=d, delivery_count=c)
                                                       for f, last, d, c in batches])])]), version)

    def initialize(label: str, state_epoch: int, start: int, partition: int = 0):
        s.call(label, IN(group_id=group, topics=[IN.InitializeStateData(topic_id=topic_id, partitions=[
            IN.InitializeStateData.PartitionData(partition=partition, state_epoch=state_epoch,
                                                start_offset=start)])]), 0)

    def summary(label: str, version: int, leader_epoch: int = 0):
        s.call(label, SM(group_id=group, topics=[SM.ReadStateSummaryData(topic_id=topic_id, partitions=[
            SM.ReadStateSummaryData.PartitionData(partition=p, leader_epoch=leader_epoch) for p in (0, 1)])]),
            version)

    def delete(label: str, partitions):
        s.call(label, X(group_id=group, topics=[X.DeleteStateData(topic_id=topic_id, partitions=[
            X.DeleteStateData.PartitionData(partition=p) for p in partitions])]), 0)

    encoded = base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")
    for partition in (0, 1):  # Kafka makes __share_group_state on the first FindCoordinator of a share key
        find_coordinator(s, "setup", f"{group}:{encoded}:{partition}", SHARE_KEY, version=6, record=False)
        ask = RD(group_id=group, topics=[RD.ReadStateData(topic_id=topic_id, partitions=[
            RD.ReadStateData.PartitionData(partition=partition, leader_epoch=0)])])
        eventually(lambda ask=ask: s.call("setup", ask, 0, record=False).results[0].partitions[0].error_code
                   not in NOT_READY, f"share coordinator of partition {partition} loaded", timeout=120)
    read("read, nothing stored")
    summary("summary, nothing stored", 1)
    write("write, nothing stored", 1, 0, 3, [(3, 4, 0, 1)], partition=1)
    read("read after a write with nothing stored", partition=1)
    initialize("initialize", 1, 5)
    read("read after initialize", leader_epoch=1)
    write("write", 1, 1, 5, [(5, 9, 0, 1), (10, 12, 2, 1)])
    write("write over part of it", 1, 1, -1, [(7, 8, 4, 3), (13, 13, 0, 2)], version=1)
    read("read after the writes", leader_epoch=1)
    write("write, an older state epoch", 0, 1, -1, [])
    write("write, an older leader epoch", 1, 0, -1, [])
    read("read, an older leader epoch", leader_epoch=0)
    write("write moving the start", 1, 2, 9, [(9, 9, 2, 1)])
    read("read after the start moved", leader_epoch=2)
    summary("summary v0", 0, leader_epoch=2)
    summary("summary v1", 1, leader_epoch=2)
    initialize("initialize, an older state epoch", 0, 3)
    initialize("initialize again, a newer state epoch", 2, 20)
    read("read after the second initialize", leader_epoch=2)
    read("read, a partition the topic lacks", partition=7)
    read("read, a negative partition", partition=-1)
    read("read, an unknown topic", topic=uuid.UUID(int=12345))
    read("read, an empty group id", target="")
    write("write, a partition the topic lacks", 1, 0, 0, [], partition=7)
    initialize("initialize, a partition the topic lacks", 1, 0, partition=7)
    initialize("initialize, a negative partition", 1, 0, partition=-1)
    write("write, a batch in no delivery state", 2, 2, -1, [(20, 20, 1, 1)])
    delete("delete", [0, 1])
    read("read after delete", leader_epoch=2)
    login(s, "as alice", "alice", "alice-secret")
    read("read without ClusterAction")
    write("write without ClusterAction", 3, 3, 0, [])
    summary("summary without ClusterAction", 1)


@scenario("malformed")
def malformed_requests(s: Session):
    s.call_raw("unknown API key 999", 999, 0, raw_frame(999, 0))
    s.call_raw("Metadata v99", ApiKey.Metadata, 99, raw_frame(ApiKey.Metadata, 99))
    truncated = raw_frame(ApiKey.Metadata, 1, b"\x00\x00\x00\x05\x00")
    s.call_raw("Metadata v1, truncated body", ApiKey.Metadata, 1, truncated)
    metadata(s, "the connection after", [])
