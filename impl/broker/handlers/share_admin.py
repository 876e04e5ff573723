"""Share groups' offsets, for admin clients: DescribeShareGroupOffsets (90) v0-1, AlterShareGroupOffsets (91) v0,
DeleteShareGroupOffsets (92) v0, as Kafka 4.2's group coordinator answers them (what Admin.listShareGroupOffsets,
alterShareGroupOffsets and deleteShareGroupOffsets, and so kafka-share-groups.sh, send).

Describe reads what the share coordinator stored (the start offset of the last state write carried, the SPSO
before that write moved it, not the leader's SPSO in memory: spec SP-47, as Apache Kafka answers; the
conformance runner reads it after every step that may write state): every share-partition the group has a
state for when the request names no topics, else the partitions named. A partition without a state (of a group
no one knows, of a topic that does not exist, or past its partitions) is answered NONE with -1, Kafka's "no
offset", as Kafka 4.2 answers it, and so is one whose state has no start offset yet (kafka-4.2: initialized when a
member subscribed, not written since). Its lag is Kafka's: the log end offset, less the start offset, less the
records at or above it acknowledged or archived (ReadShareGroupStateSummary's DeliveryCompleteCount); -1
without a state.

Alter and delete act on a share group without members only (NON_EMPTY_GROUP otherwise): alter gives each
partition named a new state at its start offset, with the next state epoch (InitializeShareGroupState), and
makes the share group when no group has the id yet, as Kafka 4.2 does; delete deletes the state of every
partition of each topic named (DeleteShareGroupState's tombstones) of a group that exists; the next member to
subscribe initializes them again by share.auto.offset.reset. A topic unknown, or a partition it does not have,
is UNKNOWN_TOPIC_OR_PARTITION. The KIP's text has no way to delete a share-partition's state (seed 002 has no
DeleteShareGroupState): under `kip` DeleteShareGroupOffsets is not served. Where Kafka 4.2 answers UNKNOWN_SERVER_ERROR (a describe naming
partition -1) the reference broker answers as for any partition without a state (spec/kafka-findings.md).
"""

from __future__ import annotations

from kipcheck.impl.broker.clock import now_ms
from kipcheck.impl.broker.metadata import topic_id_of
from kipcheck.impl.topic_partition import TopicPartition
from kipcheck.impl.wire.codec import reply
from kipcheck.model.errors import Error

UNKNOWN = -1   # Kafka's answer for an offset or lag it cannot tell
INVALID_GROUP_ID_MESSAGE = "The group id is invalid."   # Kafka's
UNKNOWN_PARTITION_MESSAGE = "This server does not host this topic-partition."   # Kafka's


def handlers(broker) -> dict:
    async def describe_offsets(connection, request):
        return reply(request, throttle_time=0, groups=[_describe(broker, group.group_id, group.topics)
                                                       for group in request.body.groups])

    async def alter_offsets(connection, request):
        body = request.body
        error, message = share_group_alterable(broker, body.group_id, may_create=True)
        if error == Error.NONE:
            broker.groups.create_empty(body.group_id)
        responses = [] if error != Error.NONE else [
            {"topic_name": topic.topic_name, "topic_id": topic_id_of(topic.topic_name),
             "partitions": [{"partition_index": part.partition_index, **_error_fields(
                 _alter(broker, body.group_id, topic.topic_name, part.partition_index, part.start_offset))}
                            for part in topic.partitions]}
            for topic in body.topics]
        return reply(request, throttle_time=0, error_code=error, error_message=message, responses=responses)

    async def delete_offsets(connection, request):
        body = request.body
        error, message = share_group_alterable(broker, body.group_id)
        responses = [] if error != Error.NONE else [
            {"topic_name": topic.topic_name, "topic_id": topic_id_of(topic.topic_name),
             **_error_fields(delete_topic_state(broker, body.group_id, topic.topic_name))}
            for topic in body.topics]
        return reply(request, throttle_time=0, error_code=error, error_message=message, responses=responses)

    table = {90: (0, 1, describe_offsets), 91: (0, 0, alter_offsets)}
    if broker.share_config.profile != "kip":
        table[92] = (0, 0, delete_offsets)
    return table


def share_group_exists(broker, group_id: str) -> bool:
    """A share group has members, or a state the share coordinator holds (membership is not persisted)."""
    return group_id in broker.groups.groups or bool(broker.engine.stored_partitions(group_id))


def share_group_alterable(broker, group_id: str, may_create: bool = False) -> tuple[str, str | None]:
    """(error, message) for a share group whose offsets an admin may change: it exists (or, `may_create`, no group
    of another type has its id) and has no members."""
    if not group_id:
        return Error.INVALID_GROUP_ID, INVALID_GROUP_ID_MESSAGE
    if not share_group_exists(broker, group_id) and (not may_create or broker.groups.id_taken(group_id)):
        return Error.GROUP_ID_NOT_FOUND, f"Group {group_id} not found."
    if broker.groups.groups.get(group_id) and broker.groups.groups[group_id].members:
        return Error.NON_EMPTY_GROUP, None   # Kafka's answer carries no message: the error's own is printed
    return Error.NONE, None


def delete_topic_state(broker, group_id: str, topic_name: str) -> tuple[str, str | None]:
    """Delete the state of every share-partition of `topic_name` the group has; (error, message)."""
    if broker.topics.get(topic_name) is None:
        return Error.UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_PARTITION_MESSAGE
    for tp in broker.engine.stored_partitions(group_id):
        if tp.topic == topic_name:
            error = broker.engine.delete_state(group_id, tp, now_ms())
            if error != Error.NONE:
                return error, f"the state of {tp} was not deleted"
    return Error.NONE, None


def _describe(broker, group_id: str, topics) -> dict:
    if not group_id:
        return {"group_id": group_id, "topics": [], "error_code": Error.INVALID_GROUP_ID,
                "error_message": INVALID_GROUP_ID_MESSAGE}
    if topics is None:
        wanted: dict[str, list[int]] = {}
        for tp in sorted(broker.engine.stored_partitions(group_id)):
            wanted.setdefault(tp.topic, []).append(tp.partition)
    else:
        wanted = {topic.topic_name: list(topic.partitions) for topic in topics}
    return {"group_id": group_id, "error_code": Error.NONE, "error_message": None, "topics": [
        {"topic_name": name, "topic_id": topic_id_of(name),
         "partitions": [_partition_offsets(broker, group_id, TopicPartition(name, index)) for index in partitions]}
        for name, partitions in wanted.items()]}


def _partition_offsets(broker, group_id: str, tp: TopicPartition) -> dict:
    topic = broker.topics.get(tp.topic)
    stored = broker.engine.stored_summary(group_id, tp)
    # A state initialized at subscription and not written since has no start offset (-1) and so no lag either.
    if stored is None or stored.start_offset == UNKNOWN or topic is None or not 0 <= tp.partition < topic.partitions:
        return {"partition_index": tp.partition, "start_offset": UNKNOWN, "leader_epoch": 0, "lag": UNKNOWN,
                "error_code": Error.NONE, "error_message": None}
    end = broker.partition_log(tp.topic, tp.partition).end_offset
    return {"partition_index": tp.partition, "start_offset": stored.start_offset, "leader_epoch": 0,
            "lag": end - stored.start_offset - stored.delivery_complete_count, "error_code": Error.NONE,
            "error_message": None}


def _alter(broker, group_id: str, topic_name: str, partition: int, start_offset: int) -> tuple[str, str | None]:
    topic = broker.topics.get(topic_name)
    if topic is None or not 0 <= partition < topic.partitions:
        return Error.UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_PARTITION_MESSAGE
    error = broker.engine.reset_start(group_id, TopicPartition(topic_name, partition), start_offset, now_ms())
    return error, None if error == Error.NONE else "the share-partition's new state was not written"


def _error_fields(result: tuple[str, str | None]) -> dict:
    error, message = result
    return {"error_code": error, "error_message": message}
