"""What the proxy asks the cluster itself, on connections of its own: topic names, a group's members, SPSO.

    admin = Admin([("127.0.0.1", 9092)])
    admin.topic_names([topic_id])                 # {topic_id: name} (Metadata by id)
    admin.share_group("g")                        # (group epoch, {member_id: client_id}), or None when it cannot tell
    admin.start_offsets("g", [("orders", 0)])     # {("orders", 0): the start offset the share coordinator stored}
    admin.compacted("orders")                     # its cleanup.policy compacts (False when the cluster does not say)

Each call is one or two blocking round trips: the observer asks only when it opens a trace, confirms a full
view, or polls SPSO. A broker that cannot answer gives None (the caller treats what it cannot tell as not
seen: a view it cannot confirm is partial).
"""

from __future__ import annotations

import logging
import uuid

from kipcheck.impl.consumer.connection import BrokerConnection, ConnectionFailed

log = logging.getLogger("kipcheck.record")

METADATA, FIND_COORDINATOR, DESCRIBE_CONFIGS, SHARE_GROUP_DESCRIBE, DESCRIBE_SHARE_GROUP_OFFSETS = 3, 10, 32, 77, 90
TOPIC_RESOURCE = 2  # ConfigResource.Type
TIMEOUT_MS = 10_000
MAX_RESPONSE_BYTES = 100_000_000


class Admin:
    def __init__(self, brokers: list[tuple[str, int]]):
        self.brokers = brokers
        self._connections: dict[tuple[str, int], BrokerConnection] = {}

    def _request(self, broker: tuple[str, int], api_key: int, version: int, **body):
        connection = self._connections.get(broker)
        try:
            if connection is None:
                connection = self._connections[broker] = BrokerConnection(*broker, "kipcheck-record", TIMEOUT_MS,
                                                                          MAX_RESPONSE_BYTES)
            return connection.request(api_key, version, **body)
        except ConnectionFailed as error:
            self._connections.pop(broker, None)
            log.warning("asking %s:%d (api key %d) failed: %s", *broker, api_key, error)
            return None

    def topic_names(self, topic_ids: list[uuid.UUID]) -> dict[uuid.UUID, str]:
        answer = self._request(self.brokers[0], METADATA, 12, topics=[{"topic_id": topic_id, "name": None}
                                                                      for topic_id in topic_ids],
                               allow_auto_topic_creation=False, include_topic_authorized_operations=False)
        if answer is None:
            return {}
        return {topic.topic_id: topic.name for topic in answer.topics if topic.name is not None}

    def _coordinator(self, group: str) -> tuple[str, int] | None:
        # v2: served by every broker with share groups (the reference broker serves v0 to v2, Kafka 4.2 v1 to v6).
        answer = self._request(self.brokers[0], FIND_COORDINATOR, 2, key=group, key_type=0)
        if answer is None or answer.error_code.name != "none":
            return None
        return answer.host, int(answer.port)

    def share_group(self, group: str) -> tuple[int, dict[str, str]] | None:
        """(group epoch, {member id: client id}) of the share group as its coordinator describes it; None if it
        cannot."""
        coordinator = self._coordinator(group)
        answer = coordinator and self._request(coordinator, SHARE_GROUP_DESCRIBE, 1, group_ids=[group],
                                               include_authorized_operations=False)
        if not answer or answer.groups[0].error_code.name != "none":
            return None
        described = answer.groups[0]
        return described.group_epoch, {member.member_id: member.client_id for member in described.members}

    def start_offsets(self, group: str, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """The start offset the share coordinator stored for each share-partition, as DescribeShareGroupOffsets
        answers it (SP-47; -1 before the first state write), for those it answers."""
        coordinator = self._coordinator(group)
        topics: dict[str, list[int]] = {}
        for topic, partition in partitions:
            topics.setdefault(topic, []).append(partition)
        answer = coordinator and self._request(coordinator, DESCRIBE_SHARE_GROUP_OFFSETS, 0, groups=[
            {"group_id": group, "topics": [{"topic_name": topic, "partitions": numbers}
                                           for topic, numbers in topics.items()]}])
        if not answer:
            return {}
        return {(topic.topic_name, part.partition_index): part.start_offset for topic in answer.groups[0].topics
                for part in topic.partitions if part.error_code.name == "none"}

    def compacted(self, topic: str) -> bool:
        """Whether the topic's `cleanup.policy` includes `compact`, as DescribeConfigs (v1, served by Kafka and the
        reference broker) answers it; False when the cluster does not describe it."""
        answer = self._request(self.brokers[0], DESCRIBE_CONFIGS, 1, include_synonyms=False, resources=[
            {"resource_type": TOPIC_RESOURCE, "resource_name": topic, "configuration_keys": ["cleanup.policy"]}])
        if not answer or answer.results[0].error_code.name != "none":
            return False
        return any(config.name == "cleanup.policy" and "compact" in (config.value or "").split(",")
                   for config in answer.results[0].configs)

    def close(self) -> None:
        for connection in self._connections.values():
            connection.close()
        self._connections.clear()
