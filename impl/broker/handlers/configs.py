"""Dynamic configs: IncrementalAlterConfigs (44) v0-1 and DescribeConfigs (32) v1-4, by resource type.

TOPIC (2): the topic configs this broker serves (`accept.range.fetch`,
impl/broker/metadata.py's TOPIC_CONFIGS); an unknown topic is
UNKNOWN_TOPIC_OR_PARTITION, an APPEND or SUBTRACT (list operations) or a bad
value INVALID_CONFIG. DescribeConfigs gives each served name, its value and
its source (TOPIC_CONFIG when set, DEFAULT_CONFIG otherwise).

GROUP (32): Kafka 4.2 keeps a group's dynamic configs (GroupConfig:
share.record.lock.duration.ms, share.auto.offset.reset, share.isolation.level, ...) under resource
type GROUP; this broker serves the share-group names
impl/share/group_configs.py lists. An unknown name, an operation other than SET
or DELETE, or a value out of range answers INVALID_CONFIG with Kafka's message
and changes nothing for that resource; an empty group name is INVALID_REQUEST.
DescribeConfigs gives every served name, its value (the group's, else the
broker's) and its source (GROUP_CONFIG or DEFAULT_CONFIG, as Kafka's
ConfigHelper reports group configs).

BROKER (4): DescribeConfigs of the broker named by its node id describes its
share-group settings (impl/share/config.py's names, and group.share.max.size),
read-only, with source STATIC_BROKER_CONFIG when set and DEFAULT_CONFIG
otherwise, as Kafka describes a broker's static configs; a client (the
conformance runner) learns from them how the broker runs its share groups.
Another node id is INVALID_REQUEST. The broker has no dynamic broker configs:
IncrementalAlterConfigs of a broker, and any other resource type, answers
INVALID_REQUEST naming the types it serves.
"""

from __future__ import annotations

from kipcheck.impl.broker.config import BrokerConfig
from kipcheck.impl.broker.metadata import TOPIC_CONFIGS, TopicError
from kipcheck.impl.share.group_configs import NAMES
from kipcheck.impl.wire.codec import reply
from kipcheck.model.errors import Error

TOPIC, BROKER, GROUP = 2, 4, 32                           # ConfigResource.Type
SET_OPERATION, DELETE_OPERATION = 0, 1                    # AlterConfigOp.OpType
TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG, GROUP_CONFIG = 1, 4, 5, 8   # DescribeConfigsResponse ConfigSource
MAX_GROUP_SIZE = "group.share.max.size"   # a BrokerConfig setting; the other share settings are ShareConfig's
BOOLEAN, STRING, INT = 1, 2, 3                            # ConfigType
GROUP_CONFIG_TYPES = {"record_lock_duration_ms": INT, "auto_offset_reset": STRING, "isolation_level": STRING}


def handlers(broker) -> dict:
    async def incremental_alter_configs(connection, request):
        responses = []
        for resource in request.body.resources:
            alter = _ALTER.get(resource.resource_type)
            error, message = (alter(broker, resource, request.body.validate_only) if alter
                              else (Error.INVALID_REQUEST, _unserved(resource)))
            responses.append({"error_code": error, "error_message": message,
                              "resource_type": resource.resource_type, "resource_name": resource.resource_name})
        return reply(request, throttle_time=0, responses=responses)

    async def describe_configs(connection, request):
        results = []
        for resource in request.body.resources:
            describe = _DESCRIBE.get(resource.resource_type)
            error, message, configs = (describe(broker, resource) if describe
                                       else (Error.INVALID_REQUEST, _unserved(resource), []))
            results.append({"error_code": error, "error_message": message, "resource_type": resource.resource_type,
                            "resource_name": resource.resource_name, "configs": configs})
        return reply(request, throttle_time=0, results=results)

    return {44: (0, 1, incremental_alter_configs), 32: (1, 4, describe_configs)}


def _unserved(resource) -> str:
    return (f"this broker serves topic ({TOPIC}) and group ({GROUP}) configs, and describes its own ({BROKER}), "
            f"not resource type {resource.resource_type}")


def _entry(name: str, value, source: int, config_type: int, read_only: bool = False) -> dict:
    return {"name": name, "value": value, "read_only": read_only, "is_default": source == DEFAULT_CONFIG,
            "config_source": source, "is_sensitive": False, "synonyms": [], "config_type": config_type,
            "documentation": None}


# -- BROKER -----------------------------------------------------------------------------------------

def _describe_broker(broker, resource):
    if resource.resource_name != str(broker.config.node_id):
        return Error.INVALID_REQUEST, f"this is broker {broker.config.node_id}, not {resource.resource_name!r}", []
    settings = [*broker.share_config.described(),
                (MAX_GROUP_SIZE, str(broker.config.max_group_size),
                 broker.config.max_group_size == BrokerConfig().max_group_size)]
    keys = None if resource.configuration_keys is None else set(resource.configuration_keys)
    return Error.NONE, None, [
        _entry(name, value, DEFAULT_CONFIG if is_default else STATIC_BROKER_CONFIG,
               INT if value.lstrip("-").isdigit() else STRING, read_only=True)
        for name, value, is_default in settings if keys is None or name in keys]


# -- TOPIC ------------------------------------------------------------------------------------------

def _topic(broker, resource):
    """(topic, error, message) of a TOPIC resource."""
    topic = broker.topics.get(resource.resource_name)
    if topic is None:
        return None, Error.UNKNOWN_TOPIC_OR_PARTITION, f"topic {resource.resource_name!r} does not exist"
    return topic, Error.NONE, None


def _describe_topic(broker, resource):
    topic, error, message = _topic(broker, resource)
    if topic is None:
        return error, message, []
    names = TOPIC_CONFIGS if resource.configuration_keys is None else \
        [name for name in resource.configuration_keys if name in TOPIC_CONFIGS]
    return error, message, [_entry(name, topic.config(name), TOPIC_CONFIG if name in topic.configs else DEFAULT_CONFIG,
                                   BOOLEAN) for name in names]


def _alter_topic(broker, resource, validate_only: bool):
    """SET (0) or DELETE (1) a topic's configs; APPEND and SUBTRACT are for lists."""
    topic, error, message = _topic(broker, resource)
    if topic is not None:
        try:
            changes = {}
            for config in resource.configs:
                if config.config_operation not in (SET_OPERATION, DELETE_OPERATION):
                    raise TopicError(Error.INVALID_CONFIG, f"{config.name} is not a list: only SET and DELETE apply")
                changes[config.name] = config.value if config.config_operation == SET_OPERATION else None
            if not validate_only:
                broker.topics.alter(topic.name, changes)
        except TopicError as failure:
            error, message = failure.error, str(failure)
    return error, message


# -- GROUP ------------------------------------------------------------------------------------------

def _describe_group(broker, resource):
    if not resource.resource_name:
        return Error.INVALID_REQUEST, "a group config needs a group id", []
    keys = set(resource.configuration_keys or NAMES)
    return Error.NONE, None, [
        _entry(name, value, GROUP_CONFIG if from_group else DEFAULT_CONFIG, GROUP_CONFIG_TYPES[NAMES[name]])
        for name, value, from_group in broker.engine.group_configs.describe(resource.resource_name) if name in keys]


def _alter_group(broker, resource, validate_only: bool):
    if not resource.resource_name:
        return Error.INVALID_REQUEST, "a group config needs a group id"
    changes = [(config.name, config.config_operation, config.value) for config in resource.configs]
    try:
        refused = broker.engine.group_configs.alter(resource.resource_name, changes, validate_only)
    except OSError as error:   # the config could not be written: nothing changed
        refused = (Error.KAFKA_STORAGE_ERROR, f"group configs not written: {error}")
    return refused or (Error.NONE, None)


_DESCRIBE = {TOPIC: _describe_topic, BROKER: _describe_broker, GROUP: _describe_group}
_ALTER = {TOPIC: _alter_topic, GROUP: _alter_group}
