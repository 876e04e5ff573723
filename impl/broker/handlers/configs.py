"""Group configs: IncrementalAlterConfigs (44) v0-1 and DescribeConfigs (32) v1-4 on GROUP resources.

Kafka 4.2 keeps a group's dynamic configs (GroupConfig: share.record.lock.duration.ms,
share.auto.offset.reset, ...) under resource type GROUP (32); this broker serves the
share-group names impl/share/group_configs.py lists. An unknown name, an operation
other than SET or DELETE, or a value out of range answers INVALID_CONFIG with
Kafka's message and changes nothing for that resource; an empty group name is
INVALID_REQUEST. The broker has no dynamic topic or broker configs: any other
resource type answers INVALID_REQUEST naming the one it serves. DescribeConfigs
gives every served name, its value (the group's, else the broker's) and its source
(GROUP_CONFIG or DEFAULT_CONFIG, as Kafka's ConfigHelper reports group configs).
"""

from __future__ import annotations

from kipcheck.impl.broker.codec import reply
from kipcheck.impl.share.group_configs import NAMES

GROUP = 32                                  # ConfigResource.Type.GROUP
GROUP_CONFIG, DEFAULT_CONFIG = 8, 5         # DescribeConfigsResponse ConfigSource
CONFIG_TYPES = {"record_lock_duration_ms": 3, "auto_offset_reset": 2}   # ConfigType INT, STRING


def handlers(broker) -> dict:
    group_configs = broker.engine.group_configs

    async def incremental_alter_configs(connection, request):
        responses = []
        for resource in request.body.resources:
            refused = _refused(resource.resource_type, resource.resource_name)
            if refused is None:
                changes = [(config.name, config.config_operation, config.value) for config in resource.configs]
                try:
                    refused = group_configs.alter(resource.resource_name, changes, request.body.validate_only)
                except OSError as error:   # the config could not be written: nothing changed
                    refused = ("KAFKA_STORAGE_ERROR", f"group configs not written: {error}")
            error, message = refused or ("NONE", None)
            responses.append({"error_code": error, "error_message": message,
                              "resource_type": resource.resource_type, "resource_name": resource.resource_name})
        return reply(request, throttle_time=0, responses=responses)

    async def describe_configs(connection, request):
        results = []
        for resource in request.body.resources:
            refused = _refused(resource.resource_type, resource.resource_name)
            keys = set(resource.configuration_keys or NAMES)
            configs = [] if refused else [
                {"name": name, "value": value, "read_only": False, "is_sensitive": False, "synonyms": [],
                 "config_source": GROUP_CONFIG if from_group else DEFAULT_CONFIG,
                 "config_type": CONFIG_TYPES[NAMES[name]], "documentation": None}
                for name, value, from_group in group_configs.describe(resource.resource_name) if name in keys]
            error, message = refused or ("NONE", None)
            results.append({"error_code": error, "error_message": message, "resource_type": resource.resource_type,
                            "resource_name": resource.resource_name, "configs": configs})
        return reply(request, throttle_time=0, results=results)

    return {44: (0, 1, incremental_alter_configs), 32: (1, 4, describe_configs)}


def _refused(resource_type: int, name: str) -> tuple[str, str] | None:
    if resource_type != GROUP:
        return "INVALID_REQUEST", f"this broker serves group configs only (resource type {GROUP}), not type {resource_type}"
    if not name:
        return "INVALID_REQUEST", "a group config needs a group id"
    return None
