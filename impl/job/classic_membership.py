"""ClassicMembership: a member of a classic consumer group (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) in a
thread of its own, speaking Kafka's consumer protocol with an assignor of the application's (the group leader's).

    membership = ClassicMembership(cluster, group_id, "processor-3", topic, leader_assign, timeouts)
    membership.start()                      # joins, then heartbeats
    membership.take(held)                   # partitions newly given, if no rebalance is under way
    membership.assigned                     # what the last SyncGroup gave this member
    membership.release(partition)           # no longer held: the group rebalances, so the leader can give it on
    membership.identity()                   # (member id, generation, generation) for an OffsetCommit
    membership.failure                      # a ProcessorError once the member lost what it held
    membership.close()                      # LeaveGroup

The member is static (its instance id names it) and reports in every
JoinGroup the partitions it holds (ConsumerProtocolSubscription v1's owned
partitions); when it is the leader, `leader_assign(members)` gets each
member's (member id, instance id, owned partitions) and returns each member's
partitions, sent back with SyncGroup as ConsumerProtocolAssignment v1. Kafka's
brokers take both for what they are, so the group is described as any other
(`kafka-consumer-groups --describe`).

Threads: the membership thread joins and heartbeats; the processor's thread
takes the partitions given, releases them and commits. A partition is taken
only while no join is under way, so every JoinGroup reports exactly what the
member holds, and the leader never gives a partition away while a member
still holds it.

Rebalances: the member rejoins when a heartbeat says REBALANCE_IN_PROGRESS,
when it released a partition, and (the leader) when `leader_stale()` says
that what it assigned with has changed. UNKNOWN_MEMBER_ID or ILLEGAL_GENERATION
while it holds partitions means the group went on without it: they may be
another's, so it fails (`failure`); holding nothing, it joins again.
FENCED_INSTANCE_ID means another process took its instance: it fails. A broken connection or a coordinator moving: found again.
"""

from __future__ import annotations

import io
import logging
import struct
import threading
from dataclasses import dataclass
from typing import Callable

from kio.index import load_entity_schema
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType

from kipcheck.impl.consumer.cluster import Cluster
from kipcheck.impl.consumer.connection import BrokerConnection, ConnectionFailed
from kipcheck.impl.consumer.errors import KafkaError
from kipcheck.impl.expansion.processor import ProcessorError
from kipcheck.impl.wire.codec import build
from kipcheck.model.errors import Error

log = logging.getLogger("kipcheck.job")

JOIN_GROUP, SYNC_GROUP, HEARTBEAT, LEAVE_GROUP = 11, 14, 12, 13
VERSIONS = {JOIN_GROUP: 5, SYNC_GROUP: 5, HEARTBEAT: 4, LEAVE_GROUP: 5}
PROTOCOL_TYPE, PROTOCOL_VERSION = "consumer", 1
LOST = {Error.UNKNOWN_MEMBER_ID, Error.ILLEGAL_GENERATION, Error.FENCED_INSTANCE_ID}
FIND_AGAIN = {Error.NOT_COORDINATOR, Error.COORDINATOR_NOT_AVAILABLE, Error.COORDINATOR_LOAD_IN_PROGRESS,
              Error.NETWORK_EXCEPTION}
RETRY_BACKOFF_S = 0.1


@dataclass(frozen=True)
class Timeouts:
    session_ms: int = 10_000
    rebalance_ms: int = 60_000
    heartbeat_interval_ms: int = 500


@dataclass(frozen=True)
class Member:
    member_id: str
    instance_id: str | None
    owned: frozenset[int]  # partitions of the topic it holds


LeaderAssign = Callable[[list[Member]], dict[str, list[int]]]


class ClassicMembership:
    def __init__(self, cluster: Cluster, group_id: str, instance_id: str, topic: str, protocol: str,
                 leader_assign: LeaderAssign, leader_stale: Callable[[], bool], timeouts: Timeouts = Timeouts()):
        self.cluster, self.group_id, self.instance_id, self.topic = cluster, group_id, instance_id, topic
        self.protocol, self.leader_assign, self.leader_stale, self.timeouts = protocol, leader_assign, leader_stale, timeouts
        self.lock = threading.Lock()
        self.member_id, self.generation, self.leader = "", -1, False
        self.assigned: frozenset[int] = frozenset()
        self.owned: set[int] = set()
        self.failure: ProcessorError | None = None
        self._joined = False  # a SyncGroup answered since the last need to join
        self._stop, self._wake = threading.Event(), threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"classic-{instance_id}", daemon=True)

    # -- the processor's thread ----------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def take(self) -> frozenset[int]:
        """Partitions given and not yet held, now held; none while a rebalance is under way."""
        with self.lock:
            if not self._joined:
                return frozenset()
            new = self.assigned - self.owned
            self.owned |= new
            return new

    def release(self, partition: int) -> None:
        with self.lock:
            self.owned.discard(partition)
            self._joined = False
        self._wake.set()

    def identity(self) -> tuple[str, int, int]:
        with self.lock:
            return self.member_id, self.generation, self.generation

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(self.timeouts.rebalance_ms / 1000 + 5)

    # -- the membership thread ---------------------------------------------------------------

    def _run(self) -> None:
        connection: BrokerConnection | None = None
        while not self._stop.is_set() and self.failure is None:
            try:
                connection = connection or self.cluster.connect_coordinator(self.group_id)
                self._join(connection) if not self._joined else self._heartbeat(connection)
            except (KafkaError, ConnectionFailed) as error:
                if isinstance(error, KafkaError) and error.error not in FIND_AGAIN:
                    self._fail(f"the group answered {error}")
                    break
                log.info("member %s: %s; finding the coordinator again", self.instance_id, error)
                if connection is not None:
                    connection.close()
                connection = None
                self._stop.wait(RETRY_BACKOFF_S)
                continue
            if self._joined:
                self._wake.wait(self.timeouts.heartbeat_interval_ms / 1000)
                self._wake.clear()
        if connection is not None:
            self._leave(connection)
            connection.close()

    def _join(self, connection: BrokerConnection) -> None:
        with self.lock:
            owned, member_id = frozenset(self.owned), self.member_id
        answer = self._request(connection, JOIN_GROUP, self.timeouts.rebalance_ms, group_id=self.group_id,
                               session_timeout=self.timeouts.session_ms, rebalance_timeout=self.timeouts.rebalance_ms,
                               member_id=member_id, group_instance_id=self.instance_id, protocol_type=PROTOCOL_TYPE,
                               protocols=[{"name": self.protocol, "metadata": encode_subscription(self.topic, owned)}])
        error = answer.error_code.name.upper()
        if error in (Error.MEMBER_ID_REQUIRED, Error.REBALANCE_IN_PROGRESS):
            self._set(member_id=answer.member_id or member_id)
            return
        if error != Error.NONE:
            return self._refused(error, "JoinGroup")
        members = [Member(member.member_id, member.group_instance_id, decode_subscription(member.metadata, self.topic))
                   for member in answer.members]
        leader = answer.leader == answer.member_id
        assignments = self.leader_assign(members) if leader else {}
        synced = self._request(connection, SYNC_GROUP, self.timeouts.rebalance_ms, group_id=self.group_id,
                               generation_id=answer.generation_id, member_id=answer.member_id,
                               group_instance_id=self.instance_id, protocol_type=PROTOCOL_TYPE,
                               protocol_name=self.protocol,
                               assignments=[{"member_id": member, "assignment": encode_assignment(self.topic, parts)}
                                            for member, parts in sorted(assignments.items())])
        error = synced.error_code.name.upper()
        if error == Error.REBALANCE_IN_PROGRESS:
            return
        if error != Error.NONE:
            return self._refused(error, "SyncGroup")
        with self.lock:
            self.member_id, self.generation, self.leader = answer.member_id, answer.generation_id, leader
            self.assigned = decode_assignment(synced.assignment, self.topic)
            self._joined = True

    def _heartbeat(self, connection: BrokerConnection) -> None:
        with self.lock:
            member_id, generation, leader = self.member_id, self.generation, self.leader
        answer = self._request(connection, HEARTBEAT, None, group_id=self.group_id, generation_id=generation,
                               member_id=member_id, group_instance_id=self.instance_id)
        error = answer.error_code.name.upper()
        if error == Error.REBALANCE_IN_PROGRESS or (error == Error.NONE and leader and self.leader_stale()):
            self._set(joined=False)
        elif error != Error.NONE:
            self._refused(error, "Heartbeat")

    def _refused(self, error: str, request: str) -> None:
        if error in FIND_AGAIN:
            raise KafkaError(error, f"{request} for group {self.group_id}")
        with self.lock:
            held = sorted(self.owned)
        if error in LOST and not held and error != Error.FENCED_INSTANCE_ID:  # fenced: another has our instance
            self._set(member_id="" if error == Error.UNKNOWN_MEMBER_ID else self.member_id, joined=False)
            return
        self._fail(f"{request} answered {error} while it held partitions {held}: they may be another's already")

    def _request(self, connection: BrokerConnection, api_key: int, wait_ms: int | None, **body):
        """The answer; JoinGroup and SyncGroup wait for the others, up to the rebalance timeout."""
        sent = connection.send(api_key, VERSIONS[api_key], **body)
        return connection.receive(sent, None if wait_ms is None else wait_ms + self.timeouts.session_ms)

    def _set(self, member_id: str | None = None, joined: bool = False) -> None:
        with self.lock:
            self.member_id = self.member_id if member_id is None else member_id
            self._joined = joined

    def _fail(self, reason: str) -> None:
        log.error("member %s of group %s: %s", self.instance_id, self.group_id, reason)
        with self.lock:
            self.failure = ProcessorError(f"{self.instance_id} of group {self.group_id}: {reason}")

    def _leave(self, connection: BrokerConnection) -> None:
        with self.lock:
            member_id = self.member_id
        if member_id:
            try:
                connection.request(LEAVE_GROUP, VERSIONS[LEAVE_GROUP], group_id=self.group_id,
                                   members=[{"member_id": member_id, "group_instance_id": self.instance_id,
                                             "reason": "the processor stopped"}])
            except ConnectionFailed as error:
                log.info("member %s: LeaveGroup failed: %s", self.instance_id, error)


def encode_subscription(topic: str, owned: frozenset[int]) -> bytes:
    """ConsumerProtocolSubscription v1, after its version, as Kafka's ConsumerProtocol writes it."""
    return _encode("consumer_protocol_subscription", topics=[topic], user_data=None,
                   owned_partitions=[{"topic": topic, "partitions": sorted(owned)}] if owned else [])


def encode_assignment(topic: str, partitions) -> bytes:
    return _encode("consumer_protocol_assignment", user_data=None,
                   assigned_partitions=[{"topic": topic, "partitions": sorted(partitions)}] if partitions else [])


def decode_subscription(data: bytes, topic: str) -> frozenset[int]:
    """The partitions of `topic` a member says it owns; none if its metadata cannot be read (v0 has none)."""
    value = _decode("consumer_protocol_subscription", data)
    return frozenset(partition for owned in getattr(value, "owned_partitions", ()) if owned.topic == topic
                     for partition in owned.partitions) if value is not None else frozenset()


def decode_assignment(data: bytes, topic: str) -> frozenset[int]:
    value = _decode("consumer_protocol_assignment", data)
    return frozenset(partition for assigned in value.assigned_partitions if assigned.topic == topic
                     for partition in assigned.partitions) if value is not None else frozenset()


def _encode(schema: str, **values) -> bytes:
    entity_class = load_entity_schema(schema, PROTOCOL_VERSION, EntityType.data)
    buffer = io.BytesIO()
    buffer.write(struct.pack(">h", PROTOCOL_VERSION))
    entity_writer(entity_class)(buffer, build(entity_class, values))
    return buffer.getvalue()


def _decode(schema: str, data: bytes):
    if len(data) < 2:
        return None
    (version,) = struct.unpack_from(">h", data)
    try:
        value, _ = entity_reader(load_entity_schema(schema, min(version, 3), EntityType.data))(data, 2)
    except Exception as error:  # kio raises many types on bytes it cannot read
        log.warning("unreadable %s v%d: %s", schema, version, error)
        return None
    return value
