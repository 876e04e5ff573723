"""What a run left behind on a broker, seen from the outside through the wire: groups, offsets and logs.

    view = probe_view(probe)                   # a probe's group(s) and partitions, asked on its own connections
    view = broker_view(bootstrap, Leaves(share_groups=("billing",), consumer_groups=("readers",),
                                         topics=(("orders", 3),)))   # what a client scenario left
    # {"share group state": {"billing": "Empty"}, "member epoch": {"alice": 3},
    #  "committed offset": {"readers orders:0": 30}, "log end offset": {"orders:0": 40}, ...}

Each kind of observation maps its subjects (a group, a member, a partition) to a value, so that two brokers'
views are compared subject by subject (compare.py). What is asked, and of whom, as an admin client would:
ShareGroupDescribe and ConsumerGroupDescribe at the group's coordinator (the group's state, epochs and assignor,
each member's epoch, subscription and assignment), DescribeShareGroupOffsets (the start offset the share
coordinator stored for each share-partition) and OffsetFetch (each committed offset) there too, and ListOffsets
at each partition's leader (the log start and end offsets). A question the broker answers with an error
observes the error. Members are named by the name a probe gave them (the rest of their id is the probe's random
choice), or, for real clients, whose ids are all random, by their place once sorted by what they hold
(spec/conformance.md, N-4).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from kipcheck.impl.consumer.connection import BrokerConnection
from kipcheck.impl.topic_partition import TopicPartition
from kipcheck.impl.wire.errors import error_name
from kipcheck.model.errors import Error
from kipcheck.oracle.conformance.probes.routing import find_coordinator

LIST_OFFSETS, METADATA, OFFSET_FETCH = 2, 3, 9
CONSUMER_GROUP_DESCRIBE, SHARE_GROUP_DESCRIBE, DESCRIBE_SHARE_GROUP_OFFSETS = 69, 77, 90
EARLIEST, LATEST = -2, -1            # ListOffsets' timestamps for the log start and end offsets
PROBE_MEMBER_SUFFIX = re.compile(r"-[0-9a-f]{12}$")   # the probe's random part of a member id (Probe.member)
TIMEOUT_MS, MAX_RESPONSE_BYTES = 30_000, 100_000_000

View = dict[str, dict]


@dataclass(frozen=True)
class Leaves:
    """What a client scenario leaves on its broker for the outside view: its groups, its topics and their
    partition counts."""

    share_groups: tuple[str, ...] = ()
    consumer_groups: tuple[str, ...] = ()
    topics: tuple[tuple[str, int], ...] = ()

    def partitions(self) -> list[str]:
        return [f"{topic}:{index}" for topic, count in self.topics for index in range(count)]


def probe_view(probe) -> View:
    """The probe's group (and its neighbours'), and the log offsets of its partitions, as the broker answers now."""
    view: View = {"broker restarts": {probe.group: probe.restarts}}
    names = {topic_id: name for name, topic_id in probe.topic_ids.items()}
    for each in (probe, *probe.made):
        if SHARE_GROUP_DESCRIBE in probe.api_keys:
            _merge(view, _group(each.coordinator, SHARE_GROUP_DESCRIBE, "share", each.group, names, _probe_member))
    if LIST_OFFSETS in probe.api_keys and probe.partitions:
        _merge(view, _log_offsets(lambda _: probe.leader, list(probe.partitions)))
    return view


def broker_view(bootstrap: str, leaves: Leaves) -> View:
    """What a client scenario left (`leaves`) on the broker at `bootstrap`, as it answers now."""
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    wire = _Wire((host, int(port)), [topic for topic, _ in leaves.topics])
    try:
        view: View = {}
        for group in leaves.share_groups:
            coordinator = wire.coordinator(group)
            _merge(view, _group(coordinator, SHARE_GROUP_DESCRIBE, "share", group, wire.topic_names, None))
            _merge(view, _share_start_offsets(coordinator, group, leaves.partitions()))
        for group in leaves.consumer_groups:
            coordinator = wire.coordinator(group)
            _merge(view, _group(coordinator, CONSUMER_GROUP_DESCRIBE, "consumer", group, wire.topic_names, None))
            _merge(view, _committed_offsets(coordinator, group, leaves.partitions()))
        _merge(view, _log_offsets(wire.leader, leaves.partitions()))
        return view
    finally:
        wire.close()


class _Wire:
    """Connections to a broker's cluster: its topics' leaders and ids (Metadata), and groups' coordinators."""

    def __init__(self, address: tuple[str, int], topics: list[str]):
        self.connections: dict[tuple[str, int], BrokerConnection] = {}
        self.admin = self._connect(address)
        answer = self.admin.request(METADATA, 12, topics=[{"topic_id": None, "name": topic} for topic in topics],
                                    allow_auto_topic_creation=False, include_topic_authorized_operations=False)
        brokers = {broker.node_id: (broker.host, broker.port) for broker in answer.brokers}
        self.topic_names = {topic.topic_id: topic.name for topic in answer.topics}
        self.leaders = {f"{topic.name}:{part.partition_index}": brokers.get(part.leader_id, address)
                        for topic in answer.topics for part in topic.partitions}

    def _connect(self, address: tuple[str, int]) -> BrokerConnection:
        if address not in self.connections:
            self.connections[address] = BrokerConnection(*address, "kipcheck-outside", TIMEOUT_MS, MAX_RESPONSE_BYTES)
        return self.connections[address]

    def coordinator(self, group: str) -> BrokerConnection:
        """The group's coordinator, asked with FindCoordinator v2 (the reference broker serves v0 to v2, Kafka 4.2 v1
        to v6) until the cluster has one."""
        return self._connect(find_coordinator(self.admin, group, version=2))

    def leader(self, tp: str) -> BrokerConnection:
        return self._connect(self.leaders.get(tp, next(iter(self.connections))))

    def close(self) -> None:
        for connection in self.connections.values():
            connection.close()


def _merge(view: View, more: View) -> None:
    for kind, subjects in more.items():
        view.setdefault(kind, {}).update(subjects)


def _group(coordinator: BrokerConnection, api_key: int, protocol: str, group: str, names: dict,
           member_name: Callable[[str], str] | None) -> View:
    """ShareGroupDescribe or ConsumerGroupDescribe of `group`; members named by `member_name`, or by their place
    (None: their ids are random)."""
    version = 1 if api_key == SHARE_GROUP_DESCRIBE else 0
    described = coordinator.request(api_key, version, group_ids=[group], include_authorized_operations=False).groups[0]
    error = error_name(described.error_code)
    if error != Error.NONE:
        return {f"{protocol} group describe error": {group: str(error)}}
    members = sorted(([member.member_epoch, sorted(member.subscribed_topic_names), sorted(
        f"{names.get(assigned.topic_id, assigned.topic_name)}:{partition}"
        for assigned in member.assignment.topic_partitions for partition in assigned.partitions)], member.member_id)
        for member in described.members)
    view: View = {f"{protocol} group {what}": {group: value} for what, value in (
        ("state", described.group_state), ("epoch", described.group_epoch),
        ("assignment epoch", described.assignment_epoch), ("assignor", described.assignor_name),
        ("size", len(members)))}
    for place, ((epoch, subscription, assignment), member_id) in enumerate(members, start=1):
        name = f"{group} {member_name(member_id) if member_name else f'member-{place}'}"
        view.setdefault(f"{protocol} member epoch", {})[name] = epoch
        view.setdefault(f"{protocol} member subscription", {})[name] = subscription
        view.setdefault(f"{protocol} member assignment", {})[name] = assignment
    return view


def _probe_member(member_id: str) -> str:
    return PROBE_MEMBER_SUFFIX.sub("", member_id)


def _or_error(value, code):
    """An answer's value, or its error where it has one."""
    return value if error_name(code) == Error.NONE else str(error_name(code))


def _by_topic(tps: list[str]) -> dict[str, list[int]]:
    topics: dict[str, list[int]] = {}
    for tp in tps:
        topic, partition = TopicPartition.parse(tp)
        topics.setdefault(topic, []).append(partition)
    return topics


def _share_start_offsets(coordinator: BrokerConnection, group: str, tps: list[str]) -> View:
    answer = coordinator.request(DESCRIBE_SHARE_GROUP_OFFSETS, 0, groups=[{"group_id": group, "topics": [
        {"topic_name": topic, "partitions": partitions} for topic, partitions in _by_topic(tps).items()]}])
    return _per_partition("share start offset", group, answer.groups[0], lambda topic: topic.topic_name,
                          lambda part: part.start_offset)


def _committed_offsets(coordinator: BrokerConnection, group: str, tps: list[str]) -> View:
    answer = coordinator.request(OFFSET_FETCH, 9, require_stable=False, groups=[{
        "group_id": group, "member_id": None, "member_epoch": -1,
        "topics": [{"name": topic, "partition_indexes": parts} for topic, parts in _by_topic(tps).items()]}])
    return _per_partition("committed offset", group, answer.groups[0], lambda topic: topic.name,
                          lambda part: part.committed_offset)


def _per_partition(kind: str, group: str, answered, topic_name: Callable, value: Callable) -> View:
    """`kind` of each partition of a group's answer (or the partition's error), or the group's error."""
    if error_name(answered.error_code) != Error.NONE:
        return {f"{kind} error": {group: str(error_name(answered.error_code))}}
    return {kind: {f"{group} {topic_name(topic)}:{part.partition_index}": _or_error(value(part), part.error_code)
                   for topic in answered.topics for part in topic.partitions}}


def _log_offsets(leader: Callable[[str], BrokerConnection], tps: list[str]) -> View:
    """The log start and end offsets of each partition (ListOffsets at its leader)."""
    view: View = {}
    for tp in tps:
        topic, partition = TopicPartition.parse(tp)
        for kind, timestamp in (("log start offset", EARLIEST), ("log end offset", LATEST)):
            answer = leader(tp).request(LIST_OFFSETS, 7, replica_id=-1, isolation_level=0, topics=[{
                "name": topic, "partitions": [{"partition_index": partition, "current_leader_epoch": -1,
                                               "timestamp": timestamp}]}])
            part = answer.topics[0].partitions[0]
            view.setdefault(kind, {})[tp] = _or_error(part.offset, part.error_code)
    return view
