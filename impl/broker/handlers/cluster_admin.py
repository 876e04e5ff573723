"""Cluster APIs for admin tools: DescribeLogDirs (35) v1-4, UpdateFeatures (57) v0-2, DescribeTopicPartitions
(75) v0, and the feature levels ApiVersions (cluster.py) tells (Admin.describeFeatures, kafka-features.sh describe).

DescribeTopicPartitions is what Admin.describeTopics (kafka-topics.sh --describe) asks first: the partitions of
the topics named (none named: every topic), in name order, from the cursor on, at most response_partition_limit
of them (then a next cursor); an unknown name is UNKNOWN_TOPIC_OR_PARTITION. One broker leads every partition:
it is each one's replica and in-sync replica, with no eligible leader replicas (KIP-966), as a one-broker Kafka
answers.

DescribeLogDirs: the broker has one log dir, `<data dir>/logs`; each partition's size is the bytes of its files
there, its offset lag 0 (no replica moves between dirs, so never a future replica). The request's topics name
what to describe (null: every topic); a topic or partition the broker does not host is left out, as Kafka
leaves out the replicas it does not have.

Features: the reference broker implements what group.version 1 (KIP-848 consumer groups) and share.version 1
(KIP-932 share groups) turn on in Kafka 4.2, and no more: it names those two, supported 0 to 1 and finalized at
1, and no others (a client then takes transaction.version and the rest as 0, so Java's transactional producer
speaks the protocol this broker serves). They are fixed: UpdateFeatures answers NONE for a feature asked to
stay at its level, and INVALID_UPDATE_VERSION for any other change, with Kafka's message for a feature it does
not know; from v2 one error answers the whole request (the first failure's), as Kafka's controller answers.
"""

from __future__ import annotations

import os
from pathlib import Path

from kipcheck.impl.wire.codec import reply
from kipcheck.model.errors import Error

FEATURES = {"group.version": 1, "share.version": 1}   # name -> the level finalized, the highest supported
FEATURES_EPOCH = 0   # the finalized features never change
UNREQUESTED_OPERATIONS = -(2**31)   # Kafka's "authorized operations not asked for"


def supported_features() -> list[dict]:
    return [{"name": name, "min_version": 0, "max_version": level} for name, level in sorted(FEATURES.items())]


def finalized_features() -> list[dict]:
    return [{"name": name, "max_version_level": level, "min_version_level": level}
            for name, level in sorted(FEATURES.items())]


def handlers(broker) -> dict:
    async def describe_log_dirs(connection, request):
        log_dir = broker.data_dir / "logs"
        usage = os.statvfs(broker.data_dir)
        return reply(request, throttle_time=0, error_code=Error.NONE, results=[{
            "error_code": Error.NONE, "log_dir": str(log_dir.resolve()), "topics": _log_dir_topics(broker, request.body.topics),
            "total_bytes": usage.f_blocks * usage.f_frsize, "usable_bytes": usage.f_bavail * usage.f_frsize}])

    async def update_features(connection, request):
        results = [{"feature": update.feature, **_feature_update(broker, update.feature, update.max_version_level)}
                   for update in request.body.feature_updates]
        failed = [result for result in results if result["error_code"] != Error.NONE]
        if request.api_version >= 2:   # one answer for the whole request, as Kafka's controller gives from v2
            message = failed and ("The update failed for all features since the following feature had an error: "
                                  + failed[0]["error_message"])
            return reply(request, throttle_time=0, error_code=failed[0]["error_code"] if failed else Error.NONE,
                         error_message=message or None, results=[])
        return reply(request, throttle_time=0, error_code=Error.NONE, error_message=None, results=results)

    async def describe_topic_partitions(connection, request):
        topics, cursor = _topic_partitions(broker, request.body)
        return reply(request, throttle_time=0, topics=topics, next_cursor=cursor)

    return {35: (1, 4, describe_log_dirs), 57: (0, 2, update_features), 75: (0, 0, describe_topic_partitions)}


def _topic_partitions(broker, body) -> tuple[list[dict], dict | None]:
    """The topics' partitions from the cursor on, at most the request's limit, and the cursor after them."""
    names = sorted({topic.name for topic in body.topics} if body.topics else {topic.name for topic in broker.topics})
    cursor = body.cursor
    if cursor is not None:
        names = [name for name in names if name >= cursor.topic_name]
    budget, node, answer = max(body.response_partition_limit, 1), broker.config.node_id, []
    for name in names:
        topic = broker.topics.get(name)
        if topic is None:
            answer.append({"error_code": Error.UNKNOWN_TOPIC_OR_PARTITION, "name": name, "topic_id": None,
                           "partitions": [], "topic_authorized_operations": UNREQUESTED_OPERATIONS})
            continue
        first = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        partitions = list(range(first, topic.partitions))
        if len(partitions) > budget:
            answer.append(_topic_entry(topic, partitions[:budget], node))
            return answer, {"topic_name": name, "partition_index": partitions[budget]}
        budget -= len(partitions)
        answer.append(_topic_entry(topic, partitions, node))
        if budget == 0 and name != names[-1]:
            return answer, {"topic_name": names[names.index(name) + 1], "partition_index": 0}
    return answer, None


def _topic_entry(topic, partitions: list[int], node: int) -> dict:
    return {"error_code": Error.NONE, "name": topic.name, "topic_id": topic.topic_id, "is_internal": False,
            "topic_authorized_operations": UNREQUESTED_OPERATIONS, "partitions": [
                {"error_code": Error.NONE, "partition_index": partition, "leader_id": node, "leader_epoch": 0,
                 "replica_nodes": [node], "isr_nodes": [node], "eligible_leader_replicas": [], "last_known_elr": [],
                 "offline_replicas": []} for partition in partitions]}


def _log_dir_topics(broker, wanted) -> list[dict]:
    if wanted is None:
        wanted_partitions = {topic.name: range(topic.partitions) for topic in broker.topics}
    else:
        wanted_partitions = {entry.topic: entry.partitions for entry in wanted}
    topics = []
    for name, partitions in wanted_partitions.items():
        topic = broker.topics.get(name)
        hosted = [partition for partition in partitions if topic is not None and 0 <= partition < topic.partitions]
        if hosted:
            topics.append({"name": name, "partitions": [
                {"partition_index": partition, "offset_lag": 0, "is_future_key": False,
                 "partition_size": _size_bytes(broker.partition_log(name, partition).directory)}
                for partition in hosted]})
    return topics


def _size_bytes(directory: Path) -> int:
    return sum(path.stat().st_size for path in directory.iterdir() if path.is_file()) if directory.is_dir() else 0


def _feature_update(broker, feature: str, level: int) -> dict:
    if feature not in FEATURES:
        return {"error_code": Error.INVALID_UPDATE_VERSION,
                "error_message": f"Invalid update version {level} for feature {feature}. Local controller "
                                 f"{broker.config.node_id} does not support this feature."}
    if level != FEATURES[feature]:
        return {"error_code": Error.INVALID_UPDATE_VERSION,
                "error_message": f"Invalid update version {level} for feature {feature}. The reference broker's "
                                 f"features are fixed: {feature} is at {FEATURES[feature]}."}
    return {"error_code": Error.NONE, "error_message": None}
