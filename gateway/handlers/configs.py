"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs for topics, brokers and groups.

Both alter APIs turn each resource into a change, a function from a resource's current
dynamic configs to its new ones (AlterConfigs: the named configs replace the whole
set, so unnamed ones revert to their defaults; IncrementalAlterConfigs: SET, DELETE,
APPEND, SUBTRACT on the named ones), and share one path that checks and applies it.
A topic's change runs under the broker's topic lock, a broker's (one broker's own
configs, or the cluster default: gateway/broker_configs.py) and a group's
(gateway/group_configs.py) by compare-and-set in the metadata store; each on the configs
current then.

Errors follow Kafka's ConfigAdminManager where kgate has the same case: a resource
or a config named twice, a missing value, an unknown operation and a group resource
without a name are INVALID_REQUEST; for a topic or a group, unknown configs, bad values,
APPEND or SUBTRACT on a config that is not a list are INVALID_CONFIG. For a broker, all
of those and a setting that cannot change at run time are INVALID_REQUEST, as Kafka
answers (Kafka notes, KAFKA-13609, that INVALID_CONFIG would fit better but kept it for
compatibility). Where kgate differs: Kafka lets clients reconfigure
``__consumer_offsets``; kgate refuses with POLICY_VIOLATION, Kafka's answer when broker
policy, not the request, forbids a change, because the group coordinator depends on the
configs it created the topic with. INVALID_CONFIG would wrongly tell the client its
values were bad.
"""
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from kafka.protocol.admin import AlterConfigsResponse, DescribeConfigsResponse, IncrementalAlterConfigsResponse
from kafka.protocol.api_key import ApiKey

from kgate.metadata.acls import CLUSTER_NAME, Operation, ResourceType
from kgate.metadata.cluster import UnknownTopic
from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.errors import KafkaError

from .. import topic_configs
from ..broker_configs import DYNAMIC, BrokerConfigs
from ..config import BROKER_SETTINGS, ConfigError, ConfigSource, ConfigType, config_type, is_sensitive
from ..group_configs import GROUP_CONFIGS
from ..setting_docs import SETTING_DOCS
from ..topic_configs import TOPIC_CONFIGS, TopicConfig
from . import Context, handles
from .broker_view import BrokerView, InternalTopic

R = DescribeConfigsResponse
Result = R.DescribeConfigsResult
Entry = Result.DescribeConfigsResourceResult

TOPIC = 2
BROKER = 4
GROUP = 32


@handles(ApiKey.DescribeConfigs)
async def describe_configs(ctx: Context, request):
    documented = bool(getattr(request, "include_documentation", False))  # v3+
    results = [_describe(ctx, resource, documented) for resource in request.resources]
    return R(throttle_time_ms=0, results=results)


def _refusal(ctx: Context, resource, operation: Operation) -> KafkaError | None:
    """Topic and group configs need the operation on the topic or group, broker configs on the
    cluster (Kafka's rule)."""
    if resource.resource_type == TOPIC and not ctx.allowed(operation, ResourceType.TOPIC, resource.resource_name):
        return KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, None)
    if resource.resource_type == GROUP and not ctx.allowed(operation, ResourceType.GROUP, resource.resource_name):
        return KafkaError(ErrorCode.GROUP_AUTHORIZATION_FAILED, None)
    if resource.resource_type == BROKER and not ctx.allowed(operation, ResourceType.CLUSTER, CLUSTER_NAME):
        return KafkaError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
    return None


def _describe(ctx: Context, resource, documented: bool = False):
    broker = ctx.broker
    wanted = set(resource.configuration_keys) if resource.configuration_keys is not None else None
    refused = _refusal(ctx, resource, Operation.DESCRIBE_CONFIGS)
    if refused:
        return _error(resource, refused.code, refused.message)
    if resource.resource_type == TOPIC:
        topic = broker.topics.get(resource.resource_name)
        if topic is None:
            return _error(resource, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {resource.resource_name!r}")
        entries = [_entry(broker, topic.configs, TOPIC_CONFIGS[name], name, broker.topic_config(topic, name),
                          ConfigSource.DYNAMIC_TOPIC_CONFIG) for name in sorted(broker.topic_config_names())]
    elif resource.resource_type == GROUP:
        if not resource.resource_name:
            return _error(resource, ErrorCode.INVALID_REQUEST, "Default group resources are not allowed.")
        groups = broker.group_configs
        own = groups.by_group.get(resource.resource_name, {})
        entries = [_entry(broker, own, config, name, groups.value(resource.resource_name, name),
                          ConfigSource.GROUP_CONFIG) for name, config in sorted(GROUP_CONFIGS.items())]
    elif resource.resource_type == BROKER:
        if resource.resource_name not in ("", str(broker.node_id)):
            return _error(resource, ErrorCode.INVALID_REQUEST, f"this is broker {broker.node_id}")
        entries = _broker_entries(broker.broker_configs, resource.resource_name == "")
        if resource.resource_name:
            entries += [(name, value, True, ConfigSource.UNKNOWN, [], ConfigType.STRING)
                        for name, value in broker.load_described().items()]
    else:
        return _error(resource, ErrorCode.INVALID_REQUEST, f"resource type {resource.resource_type} is not supported")
    # Secrets are described as Kafka describes them: sensitive, with no value.
    configs = [Entry(name=name, value=None if is_sensitive(name) else value, read_only=read_only,
                     config_source=source, is_default=source == ConfigSource.DEFAULT_CONFIG,
                     is_sensitive=is_sensitive(name), synonyms=[
                         Entry.DescribeConfigsSynonym(name=synonym, value=None if is_sensitive(synonym) else text,
                                                      source=layer_source)
                         for synonym, text, layer_source in layers],
                     config_type=kind, documentation=_documentation(resource.resource_type, name) if documented
                     else None)
               for name, value, read_only, source, layers, kind in entries if wanted is None or name in wanted]
    return Result(error_code=ErrorCode.NONE, error_message=None, resource_type=resource.resource_type,
                  resource_name=resource.resource_name, configs=configs)


def _entry(broker: BrokerView, own: dict[str, str], config: TopicConfig, name: str, value: str,
           own_source: ConfigSource):
    """A topic's or group's config: its value, source, synonyms and type. The synonyms are
    Kafka's: the resource's own value, then the layers of the broker setting it defaults to
    (none for a setting Kafka defines without a default, such as ``log.retention.ms``). A
    topic config whose broker setting kgate lacks lists that setting's default under Kafka's
    name (``log.cleanup.policy``), and one Kafka gives no broker setting lists nothing more; a
    group config's own default stands last, as Kafka lists it."""
    layers = [(name, own[name], own_source)] if name in own else []
    if config.setting:
        layers += broker.broker_configs.layers(config.setting)
    elif config.synonym or own_source is ConfigSource.GROUP_CONFIG:
        layers.append((config.synonym or name, config.default, ConfigSource.DEFAULT_CONFIG))
    return name, value, False, layers[0][2] if layers else ConfigSource.DEFAULT_CONFIG, layers, config.type


def _broker_entries(configs: BrokerConfigs, cluster_default: bool):
    """The cluster default's dynamic configs, or every one of this broker's settings, with
    their layers: custom configs (names kgate does not know) are read-only, as in Kafka."""
    entries = []
    for name in configs.names(cluster_default):
        layers = configs.layers(name)
        if cluster_default:
            layers = [layer for layer in layers if layer[2] == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG]
        value, source = layers[0][1:] if layers else (None, ConfigSource.DEFAULT_CONFIG)
        entries.append((name, value, name not in DYNAMIC, source, layers, config_type(name)))
    return entries


def _documentation(resource_type: int, name: str) -> str | None:
    """What DescribeConfigs v3+ answers when asked for documentation: what the documentation
    site's reference says of the setting (nothing of a custom config), or what kgate does
    with the topic config."""
    if resource_type == BROKER:
        return SETTING_DOCS[name].text if name in SETTING_DOCS else None
    config = GROUP_CONFIGS[name] if resource_type == GROUP else TOPIC_CONFIGS[name]
    return f"kgate: {config.use.value}" + (f" ({config.why})" if config.why else "")


def _error(resource, error, message):
    return Result(error_code=error, error_message=message, resource_type=resource.resource_type,
                  resource_name=resource.resource_name, configs=[])


# IncrementalAlterConfigs operations.
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


@handles(ApiKey.AlterConfigs)
async def alter_configs(ctx: Context, request):
    return await _alter_resources(ctx, request, AlterConfigsResponse, _replacement)


@handles(ApiKey.IncrementalAlterConfigs)
async def incremental_alter_configs(ctx: Context, request):
    return await _alter_resources(ctx, request, IncrementalAlterConfigsResponse, _increments)


async def _alter_resources(ctx: Context, request, response, change_for):
    """Each resource on its own: one refused never holds back another."""
    named = Counter((resource.resource_type, resource.resource_name) for resource in request.resources)
    results = []
    for resource in request.resources:
        error, message = ErrorCode.NONE, None
        try:
            if named[(resource.resource_type, resource.resource_name)] > 1:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "each resource must appear at most once")
            refused = _refusal(ctx, resource, Operation.ALTER_CONFIGS)
            if refused:
                raise refused
            await _alter(ctx.broker, resource, change_for(ctx.broker, resource), request.validate_only)
        except KafkaError as refused:
            error, message = refused.code, refused.message
        results.append(response.AlterConfigsResourceResponse(
            error_code=error, error_message=message, resource_type=resource.resource_type,
            resource_name=resource.resource_name))
    return response(throttle_time_ms=0, responses=results)


async def _alter(broker: BrokerView, resource, change, validate_only):
    name = resource.resource_name
    if resource.resource_type == BROKER:
        if name not in ("", str(broker.node_id)):
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             f"Unexpected broker id, expected {broker.node_id}, but received {name}")
        try:
            await broker.broker_configs.alter(name, change, validate_only)
        except ConfigError as exc:  # Kafka's answer to a broker config it cannot take
            raise KafkaError(ErrorCode.INVALID_REQUEST, str(exc)) from None
        return
    if resource.resource_type == GROUP:
        if not name:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Default group resources are not allowed.")
        try:
            await broker.group_configs.alter(name, change, validate_only)
        except ConfigError as exc:
            raise KafkaError(ErrorCode.INVALID_CONFIG, str(exc)) from None
        return
    if resource.resource_type != TOPIC:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"resource type {resource.resource_type} is not supported")
    try:
        await broker.alter_topic_configs(name, change, validate_only)
    except UnknownTopic:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {name!r}") from None
    except InternalTopic:
        raise KafkaError(ErrorCode.POLICY_VIOLATION,
                         f"{name} is an internal topic; kgate manages its configs") from None
    except ConfigError as exc:
        raise KafkaError(ErrorCode.INVALID_CONFIG, str(exc)) from None


def _check_well_formed(resource, needs_value):
    """What Kafka refuses as a malformed request before looking at any config."""
    names = [config.name for config in resource.configs]
    if len(set(names)) < len(names):
        raise KafkaError(ErrorCode.INVALID_REQUEST, "a config is named more than once")
    missing = [config.name for config in resource.configs if config.value is None and needs_value(config)]
    if missing:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"null value not supported for {', '.join(missing)}")


@dataclass(frozen=True)
class _Rules:
    """What a resource type's configs may be set to."""

    check_name: Callable[[str], None]  # raises ConfigError for a config that may not change
    check: Callable[[str, str], str]  # the value to store, or ConfigError
    kind: Callable[[str], ConfigType]
    default: Callable[[str], str]
    together: Callable[[dict[str, str]], None]


def _rules(broker: BrokerView, resource) -> _Rules:
    if resource.resource_type == BROKER:
        configs = broker.broker_configs
        return _Rules(configs.check_name, configs.check, config_type,
                      lambda name: (configs.value(name, False) or "") if name in BROKER_SETTINGS else "",
                      lambda _configs: None)
    if resource.resource_type == GROUP:
        groups = broker.group_configs
        return _Rules(groups.check_name, groups.check, lambda name: GROUP_CONFIGS[name].type, groups.default,
                      lambda _configs: None)

    def known(name):
        if name not in TOPIC_CONFIGS:
            raise ConfigError(f"Unknown topic config name: {name}")
    return _Rules(known, lambda name, value: topic_configs.check(name, value, broker.settings),
                  lambda name: TOPIC_CONFIGS[name].type, broker.topic_config_default,
                  lambda configs: topic_configs.check_together(configs, broker.settings))


def _replacement(broker: BrokerView, resource):
    """AlterConfigs: the named configs become the resource's whole set of dynamic configs."""
    _check_well_formed(resource, lambda config: True)
    wanted = {config.name: config.value for config in resource.configs}
    rules = _rules(broker, resource)

    def change(_current):
        configs = {name: rules.check(name, value) for name, value in wanted.items()}
        rules.together(configs)
        return configs
    return change


def _increments(broker: BrokerView, resource):
    """IncrementalAlterConfigs: each operation applied in turn to the current configs."""
    _check_well_formed(resource, lambda config: config.config_operation != DELETE)
    for config in resource.configs:
        if config.config_operation not in (SET, DELETE, APPEND, SUBTRACT):
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                           f"unknown operation {config.config_operation} for {config.name}")
    rules = _rules(broker, resource)

    def change(configs):
        for config in resource.configs:
            name, op = config.name, config.config_operation
            rules.check_name(name)
            if op == DELETE:
                configs.pop(name, None)
                continue
            value = config.value
            if op in (APPEND, SUBTRACT):
                if rules.kind(name) is not ConfigType.LIST:
                    raise ConfigError(f"{'APPEND' if op == APPEND else 'SUBTRACT'} is not allowed for {name}, "
                                      "which is not a list")
                value = _list_operation(op, configs.get(name) or rules.default(name), value)
            configs[name] = rules.check(name, value)
        rules.together(configs)
        return configs
    return change


def _list_operation(op, current, operand):
    """Kafka's APPEND adds the items not there yet; SUBTRACT removes every one named."""
    items = [item for item in current.split(",") if item]
    given = [item for item in operand.split(",") if item]
    if op == APPEND:
        return ",".join(items + [item for item in dict.fromkeys(given) if item not in items])
    return ",".join(item for item in items if item not in given)
