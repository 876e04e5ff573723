"""Cluster APIs: ApiVersions, Metadata, CreateTopics, FindCoordinator, InitProducerId (configs: configs.py; the
admin tools' DescribeLogDirs and UpdateFeatures, and the features ApiVersions tells: cluster_admin.py).

The broker is a one-node cluster: it leads every partition and coordinates
every group. Metadata serves lookups by name and, from v10, by topic id with
no name (share consumers resolve their assignment that way); an unknown name
is auto-created when the request allows it and `auto.create.topics.enable`
is true (and answers UNKNOWN_TOPIC_OR_PARTITION if it cannot be, as Kafka's
metadata does while a creation fails). CreateTopics answers as Kafka's
controller: POLICY_VIOLATION for every topic of a request asking for more than
10,000 partitions in all, INVALID_REQUEST for a name given twice,
INVALID_PARTITIONS for a count that is neither positive nor -1 (the default),
and POLICY_VIOLATION for a topic that would take the broker past
`max.broker.partitions`. InitProducerId with a transactional id is answered by
the transaction coordinator (impl/broker/transactions.py); idempotent
producers get a producer id from the same sequence, unique across restarts
(it starts from the wall clock and past every transactional producer id).
"""

from __future__ import annotations

from collections import Counter

from kipcheck.impl.broker.handlers.cluster_admin import FEATURES_EPOCH, finalized_features, supported_features
from kipcheck.impl.broker.handlers.configs import DEFAULT_CONFIG, TOPIC_CONFIG
from kipcheck.impl.broker.metadata import TOPIC_CONFIGS, TopicError
from kipcheck.impl.broker.server import api_version_list
from kipcheck.impl.wire.codec import reply
from kipcheck.model.errors import Error

CLUSTER_ID = "kipcheck-reference-broker"
MAX_PARTITIONS_PER_REQUEST = 10_000  # Kafka's ReplicationControlManager.MAX_PARTITIONS_PER_BATCH (not a setting)


def handlers(broker) -> dict:
    async def api_versions(connection, request):
        return reply(request, error_code=Error.NONE, api_keys=api_version_list(broker.server.supported), throttle_time=0,
                     supported_features=supported_features(), finalized_features_epoch=FEATURES_EPOCH,
                     finalized_features=finalized_features())

    async def metadata(connection, request):
        return reply(request, throttle_time=0, brokers=[_node(broker)], cluster_id=CLUSTER_ID,
                     controller_id=broker.config.node_id, topics=_metadata_topics(broker, request.body))

    async def create_topics(connection, request):
        wanted_topics = request.body.topics
        names = Counter(wanted.name for wanted in wanted_topics)
        too_many = _requested_partitions(broker, wanted_topics) > MAX_PARTITIONS_PER_REQUEST
        results = []
        for wanted in wanted_topics:
            partitions = broker.config.default_partitions if wanted.num_partitions == -1 else wanted.num_partitions
            error, message, topic = Error.NONE, None, None
            try:
                if too_many:
                    raise TopicError(Error.POLICY_VIOLATION, "Excessively large number of partitions per request.")
                if names[wanted.name] > 1:
                    raise TopicError(Error.INVALID_REQUEST, "Duplicate topic name.")
                topic = _create_topic(broker, wanted, partitions, request.body.validate_only)
            except TopicError as failure:
                error, message = failure.error, str(failure)
            results.append({"name": wanted.name, "topic_id": topic.topic_id if topic else None, "error_code": error,
                            "error_message": message, "num_partitions": partitions, "replication_factor": 1,
                            "configs": _created_configs(topic)})
        return reply(request, throttle_time=0, topics=results)

    async def find_coordinator(connection, request):
        node = _node(broker)
        return reply(request, throttle_time=0, error_code=Error.NONE, error_message=None, **node)

    async def init_producer_id(connection, request):
        if request.body.transactional_id is not None:
            error, producer_id, epoch = broker.transactions.init_producer_id(request.body.transactional_id)
            return reply(request, throttle_time=0, error_code=error, producer_id=producer_id, producer_epoch=epoch)
        return reply(request, throttle_time=0, error_code=Error.NONE, producer_id=broker.transactions.new_producer_id(),
                     producer_epoch=0)

    return {
        18: (0, 4, api_versions),
        3: (1, 12, metadata),
        19: (2, 7, create_topics),
        10: (0, 2, find_coordinator),
        22: (0, 4, init_producer_id),
    }


def _requested_partitions(broker, wanted_topics) -> int:
    """Partitions a CreateTopics request asks for, counted as Kafka's validateTotalNumberOfPartitions does."""
    total = 0
    for wanted in wanted_topics:
        if wanted.assignments:
            total += len(wanted.assignments)
        elif wanted.num_partitions == -1:
            total += broker.config.default_partitions
        elif wanted.num_partitions > 0:
            total += wanted.num_partitions
    return total


def _create_topic(broker, wanted, partitions: int, validate_only: bool):
    """The new topic (None when only validating); TopicError as Kafka's controller would answer."""
    if wanted.assignments:
        raise TopicError(Error.INVALID_REQUEST, "manual replica assignment is not supported")
    if partitions <= 0:
        raise TopicError(Error.INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value.")
    if validate_only:
        broker.check_partition_budget(partitions)
        return None
    # Only the topic configs this broker serves are kept (accept.range.fetch); the others are ignored, as before.
    served = {config.name: config.value for config in wanted.configs if config.name in TOPIC_CONFIGS}
    return broker.create_topic(wanted.name, partitions, served)


def _created_configs(topic) -> list[dict]:
    """The new topic's configs, as CreateTopics v5+ answers them (Java's Admin reads them; none when validating)."""
    if topic is None:
        return []
    return [{"name": name, "value": topic.config(name), "read_only": False, "is_sensitive": False,
             "config_source": TOPIC_CONFIG if name in topic.configs else DEFAULT_CONFIG} for name in TOPIC_CONFIGS]


def _node(broker) -> dict:
    host, port = broker.advertised
    return {"node_id": broker.config.node_id, "host": host, "port": port}


def _metadata_topics(broker, body) -> list[dict]:
    if body.topics is None:
        return [_topic_entry(broker, topic) for topic in broker.topics]
    allow_create = getattr(body, "allow_auto_topic_creation", True)
    entries = []
    for wanted in body.topics:
        name = getattr(wanted, "name", None)
        if name is None:
            topic = broker.topics.get_by_id(getattr(wanted, "topic_id", None))
            if topic is None:
                entries.append({"error_code": Error.UNKNOWN_TOPIC_ID, "name": None, "topic_id": wanted.topic_id,
                                "partitions": []})
                continue
        else:
            topic = broker.topic(name, create=allow_create)
            if topic is None:
                entries.append({"error_code": Error.UNKNOWN_TOPIC_OR_PARTITION, "name": name, "topic_id": None,
                                "partitions": []})
                continue
        entries.append(_topic_entry(broker, topic))
    return entries


def _topic_entry(broker, topic) -> dict:
    node = broker.config.node_id
    return {"error_code": Error.NONE, "name": topic.name, "topic_id": topic.topic_id, "is_internal": False,
            "partitions": [{"error_code": Error.NONE, "partition_index": partition, "leader_id": node, "leader_epoch": 0,
                            "replica_nodes": [node], "isr_nodes": [node], "offline_replicas": []}
                           for partition in range(topic.partitions)]}
