"""CreateTopics and DeleteTopics.

Replication factors are accepted and recorded as 1: durability comes from the ledger
store, not from broker replicas, so any positive factor is honoured by construction.
"""
from collections import Counter

from kafka.protocol.admin import CreateTopicsResponse, DeleteTopicsResponse
from kafka.protocol.api_key import ApiKey

from kgate.metadata.acls import CLUSTER_NAME, Operation, ResourceType
from kgate.metadata.cluster import TopicExists, UnknownTopic, invalid_topic_name
from kgate.metadata.store import StoreUnavailable
from kgate.protocol.error_codes import ErrorCode

from .. import topic_configs
from ..config import ConfigError, ConfigSource
from . import Context, handles
from .broker_view import InternalTopic

C = CreateTopicsResponse
D = DeleteTopicsResponse
# A creation or deletion the metadata store could not be asked to make, or whose answer was
# lost with the connection: it may have been made. Kafka's answer when its controller does not
# answer in time, which admin clients retry.
UNREACHABLE = "the metadata store cannot be reached; the change may or may not have been made"


@handles(ApiKey.CreateTopics)
async def create_topics(ctx: Context, request):
    # A topic named twice is not created at all and answered once, as Kafka does.
    counts = Counter(creatable.name for creatable in request.topics)
    results = [C.CreatableTopicResult(name=name, error_code=ErrorCode.INVALID_REQUEST, configs=[],
                                      error_message=f"topic {name!r} is named {count} times in one request")
               for name, count in counts.items() if count > 1]
    for creatable in request.topics:
        if counts[creatable.name] == 1:
            results.append(await _create(ctx, creatable, request.validate_only))
    return C(throttle_time_ms=0, topics=results)


async def _create(ctx: Context, creatable, validate_only):
    broker = ctx.broker
    name = creatable.name

    def failed(error, message):
        return C.CreatableTopicResult(name=name, error_code=error, error_message=message,
                                      num_partitions=-1, replication_factor=-1, configs=[])

    if not (ctx.allowed(Operation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME, quietly=True)
            or ctx.allowed(Operation.CREATE, ResourceType.TOPIC, name)):
        return failed(ErrorCode.TOPIC_AUTHORIZATION_FAILED, None)
    problem = invalid_topic_name(name)
    if problem:
        return failed(ErrorCode.INVALID_TOPIC, problem)
    partitions = creatable.num_partitions
    if creatable.assignments:
        if partitions != -1:
            return failed(ErrorCode.INVALID_REQUEST, "give either num_partitions or assignments, not both")
        partitions = len(creatable.assignments)
    elif partitions == -1:
        partitions = broker.settings["num.partitions"]
    if partitions <= 0:
        return failed(ErrorCode.INVALID_PARTITIONS, f"number of partitions must be positive, not {partitions}")
    if creatable.replication_factor == 0 or creatable.replication_factor < -1:
        return failed(ErrorCode.INVALID_REPLICATION_FACTOR, "replication factor must be positive or -1")
    configs = {}
    try:
        for config in creatable.configs:
            configs[config.name] = topic_configs.check(config.name, config.value, broker.settings)
        topic_configs.check_together(configs, broker.settings)
    except ConfigError as exc:
        return failed(ErrorCode.INVALID_CONFIG, str(exc))
    if name in broker.topics:
        return failed(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
    topic_id = None
    if not validate_only:
        try:
            topic_id = (await broker.create_topic(name, partitions, configs)).topic_id
        except TopicExists:
            return failed(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        except StoreUnavailable:
            return failed(ErrorCode.REQUEST_TIMED_OUT, UNREACHABLE)
    described = [C.CreatableTopicResult.CreatableTopicConfigs(
        name=key, value=configs.get(key, broker.topic_config_default(key)), read_only=False,
        config_source=ConfigSource.DYNAMIC_TOPIC_CONFIG if key in configs else ConfigSource.DEFAULT_CONFIG,
        is_sensitive=False)
        for key in sorted(broker.topic_config_names())]
    return C.CreatableTopicResult(name=name, topic_id=topic_id, error_code=ErrorCode.NONE, error_message=None,
                                  num_partitions=partitions, replication_factor=1, configs=described)


@handles(ApiKey.DeleteTopics)
async def delete_topics(ctx: Context, request):
    broker = ctx.broker
    if ctx.version >= 6:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    else:
        wanted = [(name, None) for name in request.topic_names]
    if not broker.settings["delete.topic.enable"]:
        return D(throttle_time_ms=0, responses=_deletion_disabled(ctx.version, wanted))
    results = []
    for name, topic_id in wanted:
        by_id = name is None and topic_id is not None
        if by_id:
            topic = broker.topic_by_id(topic_id)
            name = topic.name if topic else None
        try:
            if name is None:
                raise UnknownTopic(str(topic_id))
            if not ctx.allowed(Operation.DELETE, ResourceType.TOPIC, name):
                # Asked by id, the name is told only to a principal that may describe the topic (Kafka's rule).
                hidden = by_id and not ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, name)
                results.append(D.DeletableTopicResult(name=None if hidden else name, topic_id=topic_id,
                                                      error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            topic = await broker.delete_topic(name)
            results.append(D.DeletableTopicResult(name=name, topic_id=topic.topic_id, error_code=ErrorCode.NONE))
        except InternalTopic:
            results.append(D.DeletableTopicResult(name=name, topic_id=None, error_code=ErrorCode.INVALID_TOPIC,
                                                  error_message=f"{name} is an internal topic"))
        except UnknownTopic:
            error = ErrorCode.UNKNOWN_TOPIC_ID if name is None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            results.append(D.DeletableTopicResult(name=name, topic_id=topic_id, error_code=error,
                                                  error_message=f"no topic {name or topic_id}"))
        except StoreUnavailable:
            results.append(D.DeletableTopicResult(name=name, topic_id=topic_id, error_code=ErrorCode.REQUEST_TIMED_OUT,
                                                  error_message=UNREACHABLE))
    return D(throttle_time_ms=0, responses=results)


def _deletion_disabled(version: int, wanted):
    """Kafka's answer, before any authorization, when delete.topic.enable is false: every
    topic refused, with INVALID_REQUEST to clients older than the error (DeleteTopics v3)."""
    if version < 3:
        error, message = ErrorCode.INVALID_REQUEST, "Topic deletion is disabled."
    else:
        error, message = ErrorCode.TOPIC_DELETION_DISABLED, None
    return [D.DeletableTopicResult(name=name, topic_id=topic_id, error_code=error, error_message=message)
            for name, topic_id in wanted]
