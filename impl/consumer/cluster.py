"""Cluster: what the consumer knows of the brokers, the topics and its group's coordinator.

    cluster = Cluster(config)
    connection = cluster.connect()                 # a bootstrap server, its API versions checked
    cluster.refresh(connection, names=["orders"])  # Metadata by name (or ids=[...] by topic id)
    cluster.partitions("orders"), cluster.topic_id("orders"), cluster.name_of(topic_id)
    cluster.connect(cluster.leader("orders", 0)), cluster.connect_coordinator("g")

The cache is shared by the consumer's threads (a lock guards it); connections
are not: each thread opens its own. The consumer speaks one version of each
API (VERSIONS); a broker that does not serve it is refused at connect with
UNSUPPORTED_VERSION, naming the API, rather than sent requests it cannot read.
"""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass

from kipcheck.impl.consumer.config import ConsumerConfig
from kipcheck.impl.consumer.connection import BrokerConnection, ConnectionFailed
from kipcheck.impl.consumer.errors import KafkaError
from kipcheck.model.errors import Error

API_VERSIONS, METADATA, FIND_COORDINATOR = 18, 3, 10
# The version of each API the consumer sends: Kafka 4.2's KIP-848 consumer needs ConsumerGroupHeartbeat v1
# and OffsetCommit/OffsetFetch v9+ (member epochs); Fetch v12 and Metadata v12 still name topics by name.
VERSIONS = {API_VERSIONS: 3, METADATA: 12, FIND_COORDINATOR: 2, 68: 1, 1: 12, 2: 7, 8: 9, 9: 9}
NAMES = {API_VERSIONS: "ApiVersions", METADATA: "Metadata", FIND_COORDINATOR: "FindCoordinator",
         68: "ConsumerGroupHeartbeat", 1: "Fetch", 2: "ListOffsets", 8: "OffsetCommit", 9: "OffsetFetch"}
GROUP_KEY_TYPE = 0


@dataclass(frozen=True)
class Topic:
    name: str
    topic_id: uuid.UUID
    leaders: tuple[int, ...]  # leader node id of each partition


class Cluster:
    def __init__(self, config: ConsumerConfig):
        self.config = config
        self._lock = threading.Lock()
        self._brokers: dict[int, tuple[str, int]] = {}
        self._topics: dict[str, Topic] = {}
        self._names: dict[uuid.UUID, str] = {}

    def connect(self, node_id: int | None = None) -> BrokerConnection:
        """A connection to broker `node_id`, or to the first bootstrap server that answers."""
        with self._lock:
            addresses = [self._brokers[node_id]] if node_id in self._brokers else self.config.bootstrap_addresses()
        failures = []
        for host, port in addresses:
            try:
                return self._open(host, port)
            except KafkaError as error:
                failures.append(str(error))
        raise KafkaError(Error.NETWORK_EXCEPTION, "; ".join(failures))

    def connect_coordinator(self, group_id: str) -> BrokerConnection:
        connection = self.connect()
        try:
            answer = connection.request(FIND_COORDINATOR, VERSIONS[FIND_COORDINATOR], key=group_id,
                                        key_type=GROUP_KEY_TYPE)
        finally:
            connection.close()
        if answer.error_code.name != "none":
            raise KafkaError(answer.error_code.name.upper(), answer.error_message or "FindCoordinator failed")
        return self._open(answer.host, answer.port)

    def _open(self, host: str, port: int) -> BrokerConnection:
        try:
            connection = BrokerConnection(host, port, self.config.client_id, self.config.request_timeout_ms,
                                          self.config.receive_message_max_bytes)
            answer = connection.request(API_VERSIONS, VERSIONS[API_VERSIONS], client_software_name="kipcheck",
                                        client_software_version="0.1.0")
        except ConnectionFailed as error:
            raise KafkaError(Error.NETWORK_EXCEPTION, str(error)) from None
        served = {entry.api_key: (entry.min_version, entry.max_version) for entry in answer.api_keys}
        for api_key, version in VERSIONS.items():
            low, high = served.get(api_key, (1, 0))
            if not low <= version <= high:
                connection.close()
                raise KafkaError(Error.UNSUPPORTED_VERSION, f"{host}:{port} does not serve {NAMES[api_key]} v{version}")
        return connection

    def refresh(self, connection: BrokerConnection, names=(), ids=()) -> None:
        """Metadata for topics by name and by id; unknown ones are simply not known afterwards."""
        topics = [{"topic_id": None, "name": name} for name in names] + \
                 [{"topic_id": topic_id, "name": None} for topic_id in ids]
        answer = connection.request(METADATA, VERSIONS[METADATA], topics=topics, allow_auto_topic_creation=False,
                                    include_topic_authorized_operations=False)
        with self._lock:
            self._brokers.update({broker.node_id: (broker.host, broker.port) for broker in answer.brokers})
            for entry in answer.topics:
                if entry.error_code.name == "none" and entry.name:
                    ordered = sorted(entry.partitions, key=lambda partition: partition.partition_index)
                    topic = Topic(entry.name, entry.topic_id, tuple(partition.leader_id for partition in ordered))
                    self._topics[entry.name], self._names[entry.topic_id] = topic, entry.name

    def partitions(self, name: str) -> int:
        with self._lock:
            topic = self._topics.get(name)
        return len(topic.leaders) if topic else 0

    def topic_id(self, name: str) -> uuid.UUID | None:
        with self._lock:
            topic = self._topics.get(name)
        return topic.topic_id if topic else None

    def name_of(self, topic_id: uuid.UUID) -> str | None:
        with self._lock:
            return self._names.get(topic_id)

    def leader(self, name: str, partition: int) -> int | None:
        with self._lock:
            topic = self._topics.get(name)
        return topic.leaders[partition] if topic and 0 <= partition < len(topic.leaders) else None
