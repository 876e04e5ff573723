"""Committed-offset APIs: OffsetCommit (8) v2-10, OffsetFetch (9) v1-10, OffsetDelete (47) v0.

As Kafka 4.2's KafkaApis does before the group coordinator sees a commit: a
topic id the broker does not know is UNKNOWN_TOPIC_ID (v10 names topics by
id), an unknown topic or partition UNKNOWN_TOPIC_OR_PARTITION; the rest goes
to GroupCoordinator.commit, which validates the member and answers one error
per partition (OffsetCommit has no top-level error). OffsetFetch v8+ asks for
several groups at once; before v8 it asks for one and, before v2, reports a
group error on every partition. A partition without a committed offset
answers offset -1 and metadata "" (Kafka's INVALID_OFFSET).

Individual commit (spec/ic.md, impl/wire/schemas.py for the fields): a partition
carrying OffsetRanges goes, once the group has validated the member as for any
commit, to the IC coordinator, and answers its error and LastStableOffset; a
plain commit of a partition that is individually committed is the IC commit
of every offset below it (IC-19). A partition carrying
more than `individual.commit.max.ranges.per.commit` ranges is INVALID_REQUEST
before the IC coordinator sees it (a request cost limit: a commit costs time
in proportion to its ranges). OffsetFetch answers an individually
committed partition's held ranges in CommittedRangeOffsets; its committed
offset is the stable offset + 1, from the same store. OffsetDelete of an
individually committed partition answers INVALID_REQUEST for it (IC-19).
"""

from __future__ import annotations

from kipcheck.impl.broker.clock import now_ms
from kipcheck.impl.broker.metadata import topic_id_of
from kipcheck.impl.groups.coordinator import OffsetCommit
from kipcheck.impl.groups.offsets import CommittedOffset
from kipcheck.impl.wire.codec import reply
from kipcheck.impl.wire.schemas import flat, pairs
from kipcheck.model.errors import Error

NO_OFFSET = -1


def handlers(broker) -> dict:
    coordinator = broker.consumer_groups

    async def offset_commit(connection, request):
        body, at_ms = request.body, now_ms()
        errors: dict[tuple[str, int], str] = {}
        offsets: dict[tuple[str, int], CommittedOffset] = {}
        individual: dict[tuple[str, int], list | int] = {}  # ranges, or a plain offset over IC state (IC-19)
        stable: dict[tuple[str, int], int] = {}
        rows = []  # (topic entry fields, partition, key) in request order
        for topic in body.topics:
            name, fields, known = _topic_name(broker, topic)
            for part in topic.partitions:
                key = (name or "", part.partition_index)
                rows.append((fields, part.partition_index, key))
                if not known:
                    errors[key] = Error.UNKNOWN_TOPIC_ID if name is None else Error.UNKNOWN_TOPIC_OR_PARTITION
                elif not 0 <= part.partition_index < broker.topics.get(name).partitions:
                    errors[key] = Error.UNKNOWN_TOPIC_OR_PARTITION
                elif len(getattr(part, "offset_ranges", ())) > 2 * broker.config.ic.max_ranges_per_commit:
                    errors[key] = Error.INVALID_REQUEST  # individual.commit.max.ranges.per.commit
                elif getattr(part, "offset_ranges", ()):
                    individual[key] = part.offset_ranges
                elif broker.ic.individually_committed((body.group_id, *key)):
                    individual[key] = part.committed_offset
                else:
                    offsets[key] = CommittedOffset(part.committed_offset, getattr(part, "committed_leader_epoch", -1),
                                                   part.committed_metadata or "", at_ms)
        if individual:
            _commit_individually(broker, body, request.api_version, individual, errors, stable, at_ms)
        if offsets:
            errors.update(coordinator.commit(OffsetCommit(
                body.group_id, body.member_id, getattr(body, "group_instance_id", None),
                body.generation_id_or_member_epoch, request.api_version, offsets), at_ms))
        return reply(request, throttle_time=0, topics=_by_topic(
            rows, lambda partition, key: {"partition_index": partition, "error_code": errors[key],
                                          "last_stable_offset": stable.get(key, -1)}))

    async def offset_fetch(connection, request):
        body = request.body
        if request.api_version >= 8:
            return reply(request, throttle_time=0, groups=[
                _fetched_group(broker, group.group_id, getattr(group, "member_id", None),
                               getattr(group, "member_epoch", -1), group.topics, request.api_version)
                for group in body.groups])
        fetched = _fetched_group(broker, body.group_id, None, -1, body.topics, request.api_version)
        return reply(request, throttle_time=0, topics=fetched["topics"], error_code=fetched["error_code"])

    async def offset_delete(connection, request):
        body = request.body
        keys = [(topic.name, part.partition_index) for topic in body.topics for part in topic.partitions]
        # IC-19: an individually committed partition's offset is its IC state's; deleting it is not served.
        individual = {key: Error.INVALID_REQUEST for key in keys
                      if broker.ic.individually_committed((body.group_id, *key))}
        error, errors = coordinator.delete_offsets(body.group_id, [key for key in keys if key not in individual]) \
            if body.group_id else (Error.INVALID_GROUP_ID, {})
        errors = {**errors, **individual}
        if error != Error.NONE:
            return reply(request, throttle_time=0, error_code=error, topics=[])
        topics: dict[str, list[dict]] = {}
        for name, partition in keys:
            topics.setdefault(name, []).append({"partition_index": partition, "error_code": errors[name, partition]})
        return reply(request, throttle_time=0, error_code=Error.NONE,
                     topics=[{"name": name, "partitions": parts} for name, parts in topics.items()])

    return {8: (2, 10, offset_commit), 9: (1, 10, offset_fetch), 47: (0, 0, offset_delete)}


def _commit_individually(broker, body, version: int, individual: dict, errors: dict, stable: dict,
                         at_ms: int) -> None:
    """The IC partitions of an OffsetCommit: the group validates the member, then the IC coordinator answers."""
    error = broker.consumer_groups.validate_commit(OffsetCommit(
        body.group_id, body.member_id, getattr(body, "group_instance_id", None), body.generation_id_or_member_epoch,
        version, {}), at_ms)
    for (topic, partition), ranges_or_offset in individual.items():
        if error != Error.NONE:
            errors[topic, partition] = error
            continue
        if type(ranges_or_offset) is int:
            answer = broker.ic.plain_commit(body.group_id, topic, partition, ranges_or_offset, body.member_id, at_ms)
        else:
            try:
                ranges = pairs(ranges_or_offset)
            except ValueError:
                errors[topic, partition] = Error.INVALID_REQUEST
                continue
            answer = broker.ic.commit(body.group_id, topic, partition, ranges, body.member_id, at_ms)
        errors[topic, partition], stable[topic, partition] = answer.error, answer.stable_offset


def _topic_name(broker, topic) -> tuple[str | None, dict, bool]:
    """(topic name or None for an unknown id, the topic's response fields, whether the topic exists)."""
    if hasattr(topic, "topic_id"):
        known = broker.topics.get_by_id(topic.topic_id)
        return (known.name if known else None), {"topic_id": topic.topic_id}, known is not None
    return topic.name, {"name": topic.name}, broker.topics.get(topic.name) is not None


def _by_topic(rows, partition_fields) -> list[dict]:
    """Rows in request order, grouped back into their topics."""
    topics: list[dict] = []
    for fields, partition, key in rows:
        if not topics or topics[-1]["fields"] is not fields:
            topics.append({"fields": fields, "partitions": []})
        topics[-1]["partitions"].append(partition_fields(partition, key))
    return [{**topic["fields"], "partitions": topic["partitions"]} for topic in topics]


def _fetched_group(broker, group_id: str, member_id: str | None, member_epoch: int, topics, version: int) -> dict:
    rows = None
    if topics is not None:
        rows = []
        for topic in topics:
            name, fields, _ = _topic_name(broker, topic)
            rows += [(fields, partition, None if name is None else (name, partition))
                     for partition in topic.partition_indexes]
    if not group_id:
        error, offsets = Error.INVALID_GROUP_ID, {}
    else:
        error, offsets = broker.consumer_groups.fetch(
            group_id, member_id, member_epoch, None if rows is None else [key for _, _, key in rows if key])
    if rows is None:  # every partition the group has an offset for
        fields_of: dict[str, dict] = {}
        rows = [(fields_of.setdefault(name, {"name": name, "topic_id": topic_id_of(name)}), partition,
                 (name, partition)) for name, partition in sorted(offsets)]
    partition_error = error if version < 2 else Error.NONE

    def partition_fields(partition: int, key) -> dict:
        committed = offsets.get(key)
        held = broker.ic.fetch(group_id, *key, member=member_id or "", now_ms=now_ms())[1] \
            if key is not None and broker.ic.individually_committed((group_id, *key)) else []
        return {"partition_index": partition, "committed_range_offsets": flat(held),
                "error_code": Error.UNKNOWN_TOPIC_ID if key is None else partition_error,
                "committed_offset": committed.offset if committed else NO_OFFSET,
                "committed_leader_epoch": committed.leader_epoch if committed else -1,
                "metadata": committed.metadata if committed else ""}

    return {"group_id": group_id, "error_code": error,
            "topics": [] if error != Error.NONE and version >= 2 else _by_topic(rows, partition_fields)}
