"""CreatePartitions (37) v0-3: a topic grows, answered as Apache Kafka 4.2's controller answers it.

What Kafka 4.2.2 answered on a one-broker cluster (measured with kio, every
version alike), and so this broker answers:
- a topic named twice in one request: INVALID_REQUEST "Duplicate topic name."
  (one result), the other topics served;
- a timeout of 0 or less: REQUEST_TIMED_OUT for every other topic, nothing
  changed (unknown topics included);
- an unknown topic: UNKNOWN_TOPIC_OR_PARTITION;
- a count that is not an increase: INVALID_PARTITIONS, "Topic already has N
  partition(s)." when equal, else "The topic T currently has N partition(s);
  M would not be an increase." (zero and negative counts too);
- manual assignments, one per new partition: a count that differs is
  INVALID_REPLICA_ASSIGNMENT "Attempted to add A additional partition(s), but
  only B assignment(s) were specified."; each replica list, its broker ids
  sorted, is refused when empty, when it names a broker the cluster does not
  have ("... includes broker B, but no such broker is registered.") or one
  twice ("... includes the broker B more than once."). On a one-broker cluster
  the only list accepted is this broker's node id alone;
- `validate_only`: the same answers, nothing changed.
Clients match results by name: Kafka lists them in its hash map's order, this
broker the duplicates first, then unknown topics, then the rest as asked.
This broker's own bounds come after Kafka's rules: a topic holds at most
impl/broker/metadata.py's MAX_PARTITIONS (INVALID_PARTITIONS) and the broker
`max.broker.partitions` (POLICY_VIOLATION, as CreateTopics answers).

A topic grows durably before it is answered (topics.json is replaced
atomically, so after kill -9 it has its old or its new count, never a half);
from then on Metadata answers the new count, a KIP-848 group's next heartbeat
sees its metadata change and rebalances, and a share group's next heartbeat
assigns the new partitions. Kafka propagates the new count to its brokers'
metadata caches a moment after answering; here there is one broker, so at once.
"""

from __future__ import annotations

import logging
from collections import Counter

from kipcheck.impl.broker.metadata import MAX_PARTITIONS, TopicError
from kipcheck.impl.wire.codec import reply
from kipcheck.model.errors import Error

log = logging.getLogger("kipcheck.broker")


def handlers(broker) -> dict:
    async def create_partitions(connection, request):
        body = request.body
        names = Counter(wanted.name for wanted in body.topics)
        duplicates = list(dict.fromkeys(wanted.name for wanted in body.topics if names[wanted.name] > 1))
        served = [wanted for wanted in body.topics if names[wanted.name] == 1]
        results = [_result(name, Error.INVALID_REQUEST, "Duplicate topic name.") for name in duplicates]
        if body.timeout.total_seconds() <= 0:
            results += [_result(wanted.name, Error.REQUEST_TIMED_OUT) for wanted in served]
        else:
            known = [wanted for wanted in served if broker.topics.get(wanted.name) is not None]
            results += [_result(wanted.name, Error.UNKNOWN_TOPIC_OR_PARTITION) for wanted in served
                        if broker.topics.get(wanted.name) is None]
            results += [_grow(broker, wanted, body.validate_only) for wanted in known]
        return reply(request, throttle_time=0, results=results)

    return {37: (0, 3, create_partitions)}


def _result(name: str, error: str, message: str | None = None) -> dict:
    return {"name": name, "error_code": error, "error_message": message}


def _grow(broker, wanted, validate_only: bool) -> dict:
    topic = broker.topics.get(wanted.name)
    try:
        _check(broker, topic, wanted)
        if not validate_only:
            grown = broker.topics.grow(topic.name, wanted.count)
            for partition in range(topic.partitions, grown.partitions):
                broker.partition_log(topic.name, partition)
            log.info("topic %s grew from %d to %d partition(s)", topic.name, topic.partitions, grown.partitions)
    except TopicError as failure:
        return _result(topic.name, failure.error, str(failure))
    return _result(topic.name, Error.NONE)


def _check(broker, topic, wanted) -> None:
    """TopicError as Kafka's controller, then this broker's bounds, would refuse the request for this topic."""
    if wanted.count == topic.partitions:
        raise TopicError(Error.INVALID_PARTITIONS, f"Topic already has {topic.partitions} partition(s).")
    if wanted.count < topic.partitions:
        raise TopicError(Error.INVALID_PARTITIONS, f"The topic {topic.name} currently has {topic.partitions} "
                                                   f"partition(s); {wanted.count} would not be an increase.")
    added = wanted.count - topic.partitions
    if wanted.assignments is not None:
        if len(wanted.assignments) != added:
            raise TopicError(Error.INVALID_REPLICA_ASSIGNMENT, f"Attempted to add {added} additional partition(s), "
                                                               f"but only {len(wanted.assignments)} assignment(s) "
                                                               f"were specified.")
        for assignment in wanted.assignments:
            _check_replicas(broker.config.node_id, [int(broker_id) for broker_id in assignment.broker_ids])
    if wanted.count > MAX_PARTITIONS:
        raise TopicError(Error.INVALID_PARTITIONS, f"partition count {wanted.count} is above {MAX_PARTITIONS}, the "
                                                   f"most a topic of this broker holds")
    broker.check_partition_budget(added)


def _check_replicas(node_id: int, replicas: list[int]) -> None:
    """ReplicationControlManager.validateManualPartitionAssignment on a cluster of one broker, `node_id`."""
    if not replicas:
        raise TopicError(Error.INVALID_REPLICA_ASSIGNMENT,
                         "The manual partition assignment includes an empty replica list.")
    previous = None
    for broker_id in sorted(replicas):
        if broker_id != node_id:
            raise TopicError(Error.INVALID_REPLICA_ASSIGNMENT, f"The manual partition assignment includes broker "
                                                               f"{broker_id}, but no such broker is registered.")
        if broker_id == previous:
            raise TopicError(Error.INVALID_REPLICA_ASSIGNMENT, f"The manual partition assignment includes the "
                                                               f"broker {broker_id} more than once.")
        previous = broker_id
