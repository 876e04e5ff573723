"""KIP-848 consumer group APIs: ConsumerGroupHeartbeat (68) v0-1 and ConsumerGroupDescribe (69) v0-1.

The rules are impl/groups' (ConsumerGroups, through GroupCoordinator); this
module maps topic ids to names and back (assignments and owned partitions
travel by topic id; ids are stable, metadata.topic_id_of). An owned partition
of a topic id the broker does not know keeps a name no topic has, so it
still counts as owned. A key share of a partition (the key-range assignor's
unit) travels in the tagged field `key_ranges` of its TopicPartitions, as
(partition, low, high) triples (spec/key-range-assign.md KR-14); clients that
never ask for that assignor never see it. On v0 a joining member may leave its id empty: the
coordinator gives it one, as Kafka does. An error answer carries only the
error and its message (Kafka's service answers so); a leave answers the
member id and its leave epoch.
"""

from __future__ import annotations

import uuid

from kipcheck.impl.broker.clock import now_ms
from kipcheck.impl.broker.metadata import topic_id_of
from kipcheck.impl.groups.assignors import Assignment, KeyShare
from kipcheck.impl.groups.consumer import HeartbeatRequest
from kipcheck.impl.wire.codec import reply
from kipcheck.model.errors import Error
from kipcheck.model.key_range_assign import shares_from_wire, shares_to_wire

AUTHORIZED_OPERATIONS_OMITTED = -2147483648  # Kafka's value when the client did not ask for them


def handlers(broker) -> dict:
    coordinator = broker.consumer_groups

    async def consumer_group_heartbeat(connection, request):
        body = request.body
        member_id = body.member_id
        if request.api_version == 0 and not member_id and body.member_epoch == 0:
            member_id = str(uuid.uuid4())
        try:
            owned = None if body.topic_partitions is None else _owned(broker, body.topic_partitions)
        except ValueError as error:
            return reply(request, throttle_time=0, error_code=Error.INVALID_REQUEST, error_message=str(error),
                         member_id=None, member_epoch=0, heartbeat_interval=0, assignment=None)
        answer = coordinator.consumer_heartbeat(HeartbeatRequest(
            body.group_id, member_id, body.member_epoch, body.instance_id, body.rack_id,
            round(body.rebalance_timeout.total_seconds() * 1000),
            None if body.subscribed_topic_names is None else tuple(body.subscribed_topic_names),
            getattr(body, "subscribed_topic_regex", None), body.server_assignor, owned,
            request.header.client_id or "", connection.client_host), now_ms())
        if answer.error != Error.NONE:
            return reply(request, throttle_time=0, error_code=answer.error, error_message=answer.message,
                         member_id=None, member_epoch=0, heartbeat_interval=0, assignment=None)
        assignment = None
        if answer.assignment is not None:
            assignment = {"topic_partitions": [{"topic_id": topic_id_of(topic), **to_wire(units)}
                                               for topic, units in sorted(answer.assignment.items())]}
        interval = broker.config.groups.consumer_heartbeat_interval_ms if answer.member_epoch >= 0 else 0
        return reply(request, throttle_time=0, error_code=Error.NONE, error_message=None, member_id=answer.member_id,
                     member_epoch=answer.member_epoch, heartbeat_interval=interval, assignment=assignment)

    async def consumer_group_describe(connection, request):
        return reply(request, throttle_time=0, groups=[_described(broker, group_id)
                                                        for group_id in request.body.group_ids])

    return {68: (0, 1, consumer_group_heartbeat), 69: (0, 1, consumer_group_describe)}


def _owned(broker, topic_partitions) -> Assignment:
    owned: Assignment = {}
    for entry in topic_partitions:
        topic = broker.topics.get_by_id(entry.topic_id)
        name = topic.name if topic is not None else f"<unknown topic id {entry.topic_id}>"
        owned[name] = owned.get(name, frozenset()) | from_wire(entry.partitions, entry.key_ranges)
    return owned


def to_wire(units) -> dict:
    """A topic's units as `partitions` and the `key_ranges` triples of its key shares (KR-14)."""
    shares = {unit.partition: (unit.low, unit.high) for unit in units if isinstance(unit, KeyShare)}
    partitions = {unit for unit in units if isinstance(unit, int)} | set(shares)
    return {"partitions": sorted(partitions), "key_ranges": shares_to_wire(shares)}


def from_wire(partitions, key_ranges) -> frozenset:
    """The units of a TopicPartitions entry: its key shares, and its other listed partitions whole.
    ValueError if key_ranges is not triples (KR-14) of listed partitions."""
    shares = shares_from_wire(key_ranges)
    if not set(shares) <= set(partitions):
        raise ValueError(f"KeyRanges names partitions {sorted(set(shares) - set(partitions))} that are not listed")
    return frozenset(KeyShare(partition, *share) for partition, share in shares.items()) | \
        frozenset(partition for partition in partitions if partition not in shares)


def _described(broker, group_id: str) -> dict:
    coordinator = broker.consumer_groups
    group = coordinator.consumer.groups.get(group_id)
    if group is None:
        return {"error_code": Error.GROUP_ID_NOT_FOUND, "error_message": f"Group {group_id} not found.",
                "group_id": group_id, "group_state": "Dead", "group_epoch": -1, "assignment_epoch": -1,
                "assignor_name": "", "members": [], "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED}
    members = [{"member_id": member.member_id, "instance_id": member.instance_id, "rack_id": member.rack_id,
                "member_epoch": member.epoch, "client_id": member.client_id, "client_host": member.client_host,
                "subscribed_topic_names": list(member.subscribed_names),
                "subscribed_topic_regex": member.subscribed_regex,
                "assignment": _assignment(member.assigned),
                "target_assignment": _assignment(group.target.get(member.member_id, {})),
                "member_type": 1}  # 1: the consumer protocol (0 would be a classic member)
               for member in group.members.values()]
    return {"error_code": Error.NONE, "error_message": None, "group_id": group_id, "group_state": group.state(),
            "group_epoch": group.epoch, "assignment_epoch": group.assignment_epoch,
            "assignor_name": coordinator.consumer.assignor_name(group.members.values()), "members": members,
            "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED}


def _assignment(assignment: Assignment) -> dict:
    return {"topic_partitions": [{"topic_id": topic_id_of(topic), "topic_name": topic,
                                  "partitions": to_wire(units)["partitions"]}
                                 for topic, units in sorted(assignment.items())]}
