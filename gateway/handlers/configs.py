"""DescribeConfigs for topics and brokers (read side; altering configs comes with the admin API)."""
from kafka.protocol.admin import DescribeConfigsResponse
from kafka.protocol.api_key import ApiKey

from protocol.error_codes import ErrorCode

from ..config import BROKER_SETTINGS, ConfigSource, config_type
from . import handles

R = DescribeConfigsResponse
Result = R.DescribeConfigsResult
Entry = Result.DescribeConfigsResourceResult

TOPIC = 2
BROKER = 4


@handles(ApiKey.DescribeConfigs)
async def describe_configs(ctx, request):
    results = [_describe(ctx, resource) for resource in request.resources]
    return R(throttle_time_ms=0, results=results)


def _describe(ctx, resource):
    broker = ctx.broker
    wanted = set(resource.configuration_keys) if resource.configuration_keys is not None else None
    if resource.resource_type == TOPIC:
        topic = broker.cluster.topics.get(resource.resource_name)
        if topic is None:
            return _error(resource, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {resource.resource_name!r}")
        entries = [(name, broker.topic_config(topic, name), False,
                    ConfigSource.DYNAMIC_TOPIC_CONFIG if name in topic.configs else ConfigSource.DEFAULT_CONFIG)
                   for name in sorted(broker.topic_config_names())]
    elif resource.resource_type == BROKER:
        if resource.resource_name not in ("", str(broker.node_id)):
            return _error(resource, ErrorCode.INVALID_REQUEST, f"this is broker {broker.node_id}")
        entries = [(name, str(broker.settings[name]).lower() if isinstance(broker.settings[name], bool)
                    else str(broker.settings[name]), True, ConfigSource.STATIC_BROKER_CONFIG)
                   for name in sorted(BROKER_SETTINGS)]
    else:
        return _error(resource, ErrorCode.INVALID_REQUEST, f"resource type {resource.resource_type} is not supported")
    configs = [Entry(name=name, value=value, read_only=read_only, config_source=source,
                     is_default=source == ConfigSource.DEFAULT_CONFIG, is_sensitive=False, synonyms=[],
                     config_type=config_type(name), documentation=None)
               for name, value, read_only, source in entries if wanted is None or name in wanted]
    return Result(error_code=ErrorCode.NONE, error_message=None, resource_type=resource.resource_type,
                  resource_name=resource.resource_name, configs=configs)


def _error(resource, error, message):
    return Result(error_code=error, error_message=message, resource_type=resource.resource_type,
                  resource_name=resource.resource_name, configs=[])
