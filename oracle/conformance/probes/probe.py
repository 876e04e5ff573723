"""Probe: a share-group client that speaks the protocol itself and writes down what it saw as traces.

    probe = Probe(target, "late-ack", timers)
    topic = probe.topic(partitions=1)
    probe.produce(topic, 0, [5, 5])                   # two log batches of 5 records
    alice = probe.member("alice")                     # joins the group (ShareGroupHeartbeat), subscribed
    held = probe.fetch(alice, [f"{topic}:0"], max_records=10)   # {tp: [[first, last, count], ...]}
    probe.acknowledge(alice, {f"{topic}:0": [(0, 4, "accept")]})
    probe.close(alice)                                # the final (-1) request
    traces = probe.finish()                           # the trace files it wrote

Requests are built by impl/consumer/connection (kio), so the probe sends what a
careless or hostile client would: any epoch, acknowledgements of records it
never held, past the end or after the lock expired, sessions past the limit.
Each answer becomes steps of the traces a broker would be judged by:
share-partition traces (one per topic-partition: `append` as the log grew,
`acquire`, `acknowledge`, `leave`, and a `check` of the start offset the share
coordinator stored (`stored_spso`, SP-47), read with DescribeShareGroupOffsets
after every step that may write state, where the broker serves it) and one
share-session trace for the group. Times come from tolerance.Timers: every
request is kept clear of the windows in which a lock deadline may fall, so the
model's timers and the broker's agree.

On a cluster the probe finds its way as a client does (routing.py): its topics
are led by one broker (placed there by CreateTopics, on a broker other than the
group coordinator where there is one), its members' sessions live there, and
heartbeats and DescribeShareGroupOffsets go to the group coordinator. Each
group reads from the earliest offset (the group config
share.auto.offset.reset, where the broker serves IncrementalAlterConfigs), and
a new topic's share-partitions are known to be initialized before anything is
produced: a member subscribed to it waits until the group's assignment holds
every one of them (Kafka initializes them asynchronously, after a heartbeat,
and assigns only initialized ones). A broker without group configs gets the
older way: a member opens a session on the empty partitions and closes it.

A probe assumes it is the only client of its group and topics (each probe makes
fresh ones), so what it saw is everything that happened to them. Probes made
with `probe.neighbour(name)` share the broker's session cache: each full
ShareFetch records how many sessions the neighbours hold (`other_sessions`,
SS-5), which assumes no other client holds sessions on that broker.
"""

from __future__ import annotations

import struct
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from kipcheck.impl.consumer.connection import BrokerConnection
from kipcheck.impl.topic_partition import TopicPartition
from kipcheck.impl.wire.batches import split_batches
from kipcheck.model.cross_machine import reloaded_window
from kipcheck.model.errors import Error
from kipcheck.model.profiles import is_kafka
from kipcheck.model.violation import Violation
from kipcheck.oracle.check import check_file
from kipcheck.oracle.conformance.probes.routing import (
    FIND_COORDINATOR, cluster_brokers, find_coordinator, retry_on_coordinator,
)
from kipcheck.oracle.conformance.probes.tolerance import Ambiguous, Timers
from kipcheck.oracle.share_traces import (
    ACK_CODES, FINAL_EPOCH, ShareSteps, TraceBook, answer_lock_ms, session_advanced,
)

SHARE_FETCH, SHARE_ACKNOWLEDGE = 78, 79
BATCH_OPTIMIZED, RECORD_LIMIT = 0, 1  # ShareFetch v2 ShareAcquireMode (KIP-1206)
DESCRIBE_OFFSETS = 90
CREATE_TOPICS = 19
INCREMENTAL_ALTER_CONFIGS = 44
SHARE_GROUP_HEARTBEAT, SHARE_GROUP_DESCRIBE = 76, 77  # Describe: a broker with share group configs serves it
ASSIGNMENT_WAIT_S = 60.0
# Partition errors that say "the leader is being elected": asked again for up to LEADER_WAIT_S.
LEADER_MOVING = frozenset({Error.NOT_LEADER_OR_FOLLOWER, Error.LEADER_NOT_AVAILABLE, Error.UNKNOWN_TOPIC_OR_PARTITION})
LEADER_WAIT_S = 60.0
REQUEST_TIMEOUT_MS = 30_000
SLACK_MS = 250  # what a request may take beyond its own wait (one that takes longer is inconclusive)
UNUSED_EPOCH = 1_000_000  # an epoch no session of a probe reaches
DISCONNECT_POLLS, DISCONNECT_POLL_S = 500, 0.02


class ProbeError(RuntimeError):
    """The broker answered something the probe cannot turn into a trace (say, no such topic)."""


@dataclass
class Member:
    name: str
    member_id: str
    connection: BrokerConnection
    epoch: int = 0  # the epoch of the next request (0: no session yet)
    session: set[str] = field(default_factory=set)  # the topic-partitions of its session


class Probe:
    def __init__(self, target, name: str, timers: Timers):
        self.target = target
        self.name = name
        self.timers = timers
        self.group = f"kipcheck-{name}-{uuid.uuid4().hex[:8]}"
        self.members: list[Member] = []
        self.topic_ids: dict[str, uuid.UUID] = {}
        self.partitions: dict[str, TraceBook] = {}   # "topic:partition" -> its share-partition trace
        self.finished: list[TraceBook] = []           # traces ended by a restart (sessions die with the broker)
        self.neighbours: list[Probe] = []             # other groups of this broker whose sessions it counts
        self.made: list[Probe] = []                   # the neighbours it made (finished with it)
        self.restarts = 0                             # how many times it killed -9 and restarted the broker
        self.sessions = TraceBook({"format": "kipcheck-trace", "version": 1, "machine": "share-session",
                                   "profile": target.profile,
                                   "config": {"max_sessions": target.settings.max_sessions}})
        self.steps = ShareSteps(target.profile, sessions=lambda _: self.sessions,
                                partitions=lambda _, tp: self.partitions[tp], held=lambda _: list(self.partitions),
                                read_records=True)
        self.admin = self._connect("admin", target.address)
        self.api_keys = self._api_keys()
        self.describes_offsets = DESCRIBE_OFFSETS in self.api_keys
        # Version 2 where the broker offers it: RENEW and the record_limit acquire mode (Kafka 4.2).
        self.share_versions = (min(self.api_keys.get(SHARE_FETCH, 1), 2), min(self.api_keys.get(SHARE_ACKNOWLEDGE, 1), 2))
        self.speaks_v2 = self.share_versions == (2, 2)
        self._route()
        self.reads_earliest = self._read_earliest()

    # -- setting up --------------------------------------------------------------------------

    def _connect(self, client_id: str, address: tuple[str, int] | None = None) -> BrokerConnection:
        host, port = address or self.leader_address
        return BrokerConnection(host, port, client_id, REQUEST_TIMEOUT_MS, 100_000_000)

    def _route(self) -> None:
        """Find the group coordinator and pick the broker that leads the probe's topics (routing.py)."""
        self.brokers = cluster_brokers(self.admin)
        # FindCoordinator v4 (batched keys); a broker serving only older versions (librdkafka's mock) is one node.
        finds = self.api_keys.get(FIND_COORDINATOR, -1) >= 4
        coordinator_address = find_coordinator(self.admin, self.group) if finds else self.target.address
        others = [node for node, address in sorted(self.brokers.items()) if address != coordinator_address]
        self.leader_node = others[0] if others and len(self.brokers) > 1 else min(self.brokers, default=None)
        self.leader_address = self.brokers.get(self.leader_node, self.target.address)
        self.leader = self._connect("leader")
        self.coordinator = self._connect("coordinator", coordinator_address)

    def _refind_coordinator(self) -> None:
        if self.api_keys.get(FIND_COORDINATOR, -1) >= 4:
            self.coordinator.close()
            self.coordinator = self._connect("coordinator", find_coordinator(self.admin, self.group))

    def _read_earliest(self) -> bool:
        """Set the group config share.auto.offset.reset=earliest; False where the broker has no group configs."""
        if INCREMENTAL_ALTER_CONFIGS not in self.api_keys or SHARE_GROUP_DESCRIBE not in self.api_keys:
            return False
        from kipcheck.oracle.conformance.scenarios.clients import set_share_group_earliest

        return set_share_group_earliest(self.admin, self.group) == "none"

    def _heartbeat(self, member_id: str, member_epoch: int):
        return retry_on_coordinator(lambda: self.coordinator.request(
            SHARE_GROUP_HEARTBEAT, 1, group_id=self.group, member_id=member_id, member_epoch=member_epoch,
            rack_id=None, subscribed_topic_names=sorted(self.topic_ids)), self._refind_coordinator)

    def _api_keys(self) -> dict[int, int]:
        """{api key: the highest version the broker serves}."""
        answer = self.admin.request(18, 2)  # v2: what every broker with share groups serves, librdkafka's mock too
        return {entry.api_key: entry.max_version for entry in answer.api_keys}

    def topic(self, partitions: int = 1) -> str:
        """A fresh topic (CreateTopics), its share-partitions initialized for the group at offset 0 (by a member that
        subscribes, opens a session on them and closes it)."""
        name = f"{self.group}-t{len(self.topic_ids)}"
        if CREATE_TOPICS in self.api_keys:
            # On a cluster, every partition on the leader broker: the members' sessions live there.
            placed = len(self.brokers) > 1
            assignments = [{"partition_index": index, "broker_ids": [self.leader_node]}
                           for index in range(partitions)] if placed else []
            answer = self.admin.request(CREATE_TOPICS, 7, topics=[{
                "name": name, "num_partitions": -1 if placed else partitions, "replication_factor": -1 if placed else 1,
                "assignments": assignments, "configs": []}], timeout=REQUEST_TIMEOUT_MS, validate_only=False)
        else:  # a broker without CreateTopics (librdkafka's mock) creates topics when Metadata names them
            answer = self.admin.request(3, 12, topics=[{"topic_id": None, "name": name}], allow_auto_topic_creation=True,
                                        include_topic_authorized_operations=False)
        error = answer.topics[0].error_code.name
        if error != "none":
            raise ProbeError(f"creating topic {name}: {error.upper()}")
        self.topic_ids[name] = answer.topics[0].topic_id
        config = self.target.partition_trace_config()
        tps = [f"{name}:{index}" for index in range(partitions)]
        for tp in tps:
            self.partitions[tp] = TraceBook({"format": "kipcheck-trace", "version": 1, "machine": "share-partition",
                                             "profile": self.target.profile, "config": {**config, "start_offset": 0}})
        if self.reads_earliest:
            self._wait_initialized(name, partitions)
        else:  # initialized while the log is empty, so they start at offset 0 whatever the group's reset
            opener = self.member(f"opener{len(self.topic_ids)}")
            self.fetch(opener, tps, max_records=1)
            self.close(opener)
        return name

    def _wait_initialized(self, topic: str, partitions: int) -> None:
        """A member subscribed to `topic` heartbeats until it is assigned each of its partitions, and leaves: the
        group coordinator assigns only share-partitions whose state it has initialized. A probe makes its topics
        before its members join, so this member is alone and is assigned every initialized partition."""
        if self.members:
            raise ProbeError("a probe makes its topics before its members join")
        member_id, epoch = f"initializer-{uuid.uuid4().hex[:12]}", 0
        deadline = time.monotonic() + ASSIGNMENT_WAIT_S
        while True:
            answer = self._heartbeat(member_id, epoch)
            if answer.error_code.name != "none":
                raise ProbeError(f"ShareGroupHeartbeat while {topic} is initialized: {answer.error_code.name.upper()}")
            epoch = answer.member_epoch
            assigned = {partition for assigned in (answer.assignment.topic_partitions if answer.assignment else ())
                        if assigned.topic_id == self.topic_ids[topic] for partition in assigned.partitions}
            if assigned == set(range(partitions)):
                break
            if time.monotonic() > deadline:
                raise ProbeError(f"{topic}: {len(assigned)} of {partitions} partitions assigned (initialized) after "
                                 f"{ASSIGNMENT_WAIT_S:.0f} s")
            time.sleep(0.1)
        self._heartbeat(member_id, FINAL_EPOCH)

    def member(self, name: str) -> Member:
        """A member with its own connection to the leader, joined to the group (subscribed to every topic of the
        probe)."""
        member = Member(name, f"{name}-{uuid.uuid4().hex[:12]}", self._connect(name))
        answer = self._heartbeat(member.member_id, 0)
        if answer.error_code.name != "none":
            raise ProbeError(f"ShareGroupHeartbeat for {name}: {answer.error_code.name.upper()}")
        self.members.append(member)
        return member

    def neighbour(self, name: str) -> "Probe":
        """A probe of another group on the same broker and clock, finished with this one; the two count each other's
        sessions (the cache is the broker's, shared by every group)."""
        other = Probe(self.target, f"{self.name}-{name}", self.timers)
        for probe in (self, *self.neighbours):
            probe.neighbours.append(other)
            other.neighbours.append(probe)
        self.made.append(other)
        return other

    def _other_sessions(self) -> int:
        return sum(member.epoch != 0 for probe in self.neighbours for member in probe.members)

    def produce(self, topic: str, partition: int, batch_sizes: list[int]) -> None:
        """Produce batches (one Producer flush each) and append them to the partition's trace as the log has them."""
        from kipcheck.oracle.conformance.scenarios.clients import produce  # confluent-kafka: needed only by probes that produce

        bootstrap = "%s:%d" % self.target.address
        for size in batch_sizes:
            produce(bootstrap, topic, [(partition, None, f"{topic}-{index}".encode()) for index in range(size)])
        tp = f"{topic}:{partition}"
        book = self.partitions[tp]
        known = sum(step["args"]["count"] for step in book.steps if step["op"] == "append") + \
            book.header["config"]["start_offset"] + sum(last - first + 1 for first, last, *_ in
                                                        book.header["config"].get("initial_state", []))
        at_ms = self.timers.now_ms()
        for first, last in self.log_batches(topic, partition, known):
            if last >= known:
                book.add(at_ms, "log", "append", {"count": last - max(first, known) + 1})
                known = last + 1

    def log_batches(self, topic: str, partition: int, start: int = 0) -> list[tuple[int, int]]:
        """(first, last) of every batch in the partition's log that ends at or past `start` (below it the log may
        have been deleted, DeleteRecords), read with Fetch (API 1)."""
        batches, offset, deadline = [], start, time.monotonic() + LEADER_WAIT_S
        while True:
            answer = self.leader.request(1, 12, replica_id=-1, max_wait=0, min_bytes=0, max_bytes=64 << 20,
                                        isolation_level=0, session_id=0, session_epoch=-1, rack_id="",
                                        topics=[{"topic": topic, "partitions": [{
                                            "partition": partition, "current_leader_epoch": -1, "fetch_offset": offset,
                                            "last_fetched_epoch": -1, "log_start_offset": -1,
                                            "partition_max_bytes": 64 << 20}]}], forgotten_topics_data=[])
            part = answer.responses[0].partitions[0]
            error = Error.of_code(int(part.error_code))
            if error in LEADER_MOVING and time.monotonic() < deadline:  # a restarted cluster elects its leaders
                time.sleep(0.1)
                continue
            if error != Error.NONE:
                raise ProbeError(f"Fetch of {topic}:{partition} from offset {offset}: {error}")
            records = bytes(part.records or b"")
            found = [(struct.unpack_from(">q", batch)[0], struct.unpack_from(">q", batch)[0] + header.last_offset_delta)
                     for batch, header in (split_batches(records) if records else [])]
            found = [(first, last) for first, last in found if last >= offset]
            if not found:
                return batches
            batches += found
            offset = found[-1][1] + 1
            if offset >= part.high_watermark:
                return batches

    # -- requests ----------------------------------------------------------------------------

    def _topics(self, tps: list[str], acks: dict[str, list[tuple[int, int, str]]]) -> list[dict]:
        topics: dict[str, list[dict]] = {}
        for tp in dict.fromkeys([*tps, *acks]):
            topic, partition = TopicPartition.parse(tp)
            batches = [{"first_offset": first, "last_offset": last, "acknowledge_types": [ACK_CODES[kind]]}
                       for first, last, kind in acks.get(tp, [])]
            topics.setdefault(topic, []).append({"partition_index": partition, "acknowledgement_batches": batches})
        return [{"topic_id": self.topic_ids[topic], "partitions": parts} for topic, parts in topics.items()]

    def _forgotten(self, tps: list[str]) -> list[dict]:
        topics: dict[str, list[int]] = {}
        for tp in tps:
            topic, partition = TopicPartition.parse(tp)
            topics.setdefault(topic, []).append(partition)
        return [{"topic_id": self.topic_ids[topic], "partitions": partitions} for topic, partitions in topics.items()]

    def _timed(self, wait_ms: int, send):
        """Send when no lock deadline can fall during the request (its wait shortened to fit, see Timers.fit):
        (sent_ms, received_ms, wait_ms used, answer)."""
        wait_ms = self.timers.fit(wait_ms, SLACK_MS)
        sent_ms = self.timers.now_ms()
        answer = send(wait_ms)
        received_ms = self.timers.now_ms()
        self.timers.check_clear(sent_ms, received_ms)
        return sent_ms, received_ms, wait_ms, answer

    def fetch(self, member: Member, tps: list[str], max_records: int = 500, wait_ms: int = 0,
              acks: dict[str, list[tuple[int, int, str]]] | None = None, epoch: int | None = None,
              forget: list[str] = (), record_limit: bool = False, renew: bool = False) -> dict[str, list]:
        """One ShareFetch; returns {tp: acquired runs [first, last, delivery_count]} (empty when refused).
        `forget`: topic-partitions taken out of the session (ForgottenTopicsData). Version 2 only: `record_limit`,
        the record_limit acquire mode (SP-42); `renew`, a renewing ShareFetch (IsRenewAck, every limit 0: its
        acknowledgements may renew, and it acquires nothing, SP-41)."""
        acks = {tp: batches for tp, batches in (acks or {}).items() if batches}
        epoch = member.epoch if epoch is None else epoch
        added, forgotten = set(tps) | set(acks), set(forget)
        observed = {"other_sessions": self._other_sessions()} if epoch == 0 and self.neighbours else {}
        sent_ms, received_ms, wait_ms, answer = self._timed(wait_ms, lambda wait: member.connection.request(
            SHARE_FETCH, self.share_versions[0], **self._fetch_body(member, epoch, wait, max_records, tps, acks, forget,
                                                                    record_limit, renew)))
        error, results = answer.error_code.name.upper(), self._partition_results(answer)
        lock_ms = answer_lock_ms(answer) or self.target.settings.lock_ms
        acquire_args = {"acquire_mode": "record_limit"} if record_limit else {}  # SP-42
        if answer_lock_ms(answer):
            acquire_args["lock_duration_ms"] = answer_lock_ms(answer)  # SP-46: the answer's AcquisitionLockTimeoutMs
        acquired = self.steps.share_fetch(member, epoch, tps, acks, error, results, sent_ms, received_ms, max_records,
                                          forget, wait_ms, observed, acquire_args, lock_ms if renew else None)
        if error != Error.NONE:
            self._threw(member, epoch, error, acks, sent_ms, "acknowledge_error_code", added, forgotten)
            return {}
        if renew or any(acquired.values()):
            self.timers.lock_taken(sent_ms, received_ms, lock_ms)  # SP-41: a renewed lock may run from now
        if epoch == FINAL_EPOCH:
            self._observe(acks)
            return {}
        self._observe(results)
        return acquired

    def _fetch_body(self, member: Member, epoch: int, wait_ms: int, max_records: int, tps: list[str], acks: dict,
                    forget: list[str], record_limit: bool, renew: bool) -> dict:
        limits = {"max_wait": 0, "min_bytes": 0, "max_bytes": 0, "max_records": 0} if renew else {
            "max_wait": wait_ms, "min_bytes": 1, "max_bytes": 64 << 20, "max_records": max_records}
        v2 = {"share_acquire_mode": RECORD_LIMIT if record_limit else BATCH_OPTIMIZED, "is_renew_ack": renew} \
            if self.share_versions[0] >= 2 else {}
        if (record_limit or renew) and not v2:
            raise ProbeError("record_limit and RENEW need ShareFetch version 2, which the broker does not serve")
        return {"group_id": self.group, "member_id": member.member_id, "share_session_epoch": epoch,
                "batch_size": max(max_records, 1), "topics": self._topics(tps, acks),
                "forgotten_topics_data": self._forgotten(forget), **limits, **v2}

    def acknowledge(self, member: Member, acks: dict[str, list[tuple[int, int, str]]],
                    epoch: int | None = None, renew: bool = False) -> dict[str, str]:
        """One ShareAcknowledge; returns {tp: error name} ({} when the request was refused). `renew`: IsRenewAck
        (version 2), so that its acknowledgements may be of type renew (SP-41)."""
        acks = {tp: batches for tp, batches in acks.items() if batches}
        epoch = member.epoch if epoch is None else epoch
        v2 = {"is_renew_ack": renew} if self.share_versions[1] >= 2 else {}
        if renew and not v2:
            raise ProbeError("RENEW needs ShareAcknowledge version 2, which the broker does not serve")
        sent_ms, received_ms, _, answer = self._timed(0, lambda _: member.connection.request(
            SHARE_ACKNOWLEDGE, self.share_versions[1], group_id=self.group, member_id=member.member_id,
            share_session_epoch=epoch, topics=self._topics([], acks), **v2))
        error = answer.error_code.name.upper()
        lock_ms = answer_lock_ms(answer) or self.target.settings.lock_ms  # version 2 answers one
        errors = self.steps.share_acknowledge(member, epoch, acks, error, self._partition_results(answer), sent_ms,
                                              lock_ms if renew else None)
        if error != Error.NONE:
            self._threw(member, epoch, error, acks, sent_ms, "error_code", set())
            return {}
        if renew:
            self.timers.lock_taken(sent_ms, received_ms, lock_ms)  # SP-41
        self._observe(acks)
        return errors

    def _threw(self, member: Member, epoch: int, error: str, acks: dict, sent_ms: int, error_field: str,
               tps: set[str], forgotten: set[str] = frozenset()) -> None:
        """SP-40, SS-32 (the Kafka profiles): a request whose acknowledgements threw is answered
        UNKNOWN_SERVER_ERROR, after an incremental request's epoch moved; the partition that threw changed nothing.
        Which one it was is unknown when the request acknowledged in several: that run is inconclusive."""
        if error != Error.UNKNOWN_SERVER_ERROR or not acks or epoch == 0 or not is_kafka(self.target.profile):
            return
        if len(acks) > 1:
            raise Ambiguous(f"a request acknowledging in {len(acks)} partitions threw: which one is unknown")
        if epoch != FINAL_EPOCH:
            session_advanced(member, epoch, tps, forgotten)
        ((tp, batches),) = acks.items()
        self.partitions[tp].add(sent_ms, member.name, "acknowledge", {
            "batches": [{"first": first, "last": last, "type": kind} for first, last, kind in batches]},
            {"error": Error.UNKNOWN_SERVER_ERROR})

    def close(self, member: Member, acks: dict[str, list[tuple[int, int, str]]] | None = None,
              with_acknowledge: bool = False) -> None:
        """The member's final request (epoch -1): a ShareFetch, or a ShareAcknowledge, with these acks."""
        if with_acknowledge:
            self.acknowledge(member, acks or {}, epoch=FINAL_EPOCH)
        else:
            self.fetch(member, [], acks=acks, epoch=FINAL_EPOCH)

    def disconnect(self, member: Member) -> None:
        """Close the member's connection: the broker ends its session and releases its records (SS-17).

        The broker learns of the close on its own time, so the probe asks (on a new connection, with an epoch no
        session has) until the answer is no longer INVALID_SHARE_SESSION_EPOCH: then the session is gone, and
        that answer is recorded (SHARE_SESSION_NOT_FOUND, SS-6)."""
        self.timers.fit(0, SLACK_MS)
        at_ms = self.timers.now_ms()
        member.connection.close()
        member.connection = self._connect(member.name)
        self.sessions.add(at_ms, member.name, "disconnect", {})
        had_session = member.epoch != 0
        if had_session:
            self.steps.left(at_ms, member)
        member.epoch, member.session = 0, set()
        if had_session and is_kafka(self.target.profile) and not any(other.epoch for other in self.members):
            # SS-31: the group's last session closed with its connection; its share-partitions are dropped, and
            # reloaded from the share coordinator when next used.
            self._reload({tp: self._model_window(book) for tp, book in self.partitions.items()})
        for _ in range(DISCONNECT_POLLS):
            answer = member.connection.request(78, 1, group_id=self.group, member_id=member.member_id,
                                               share_session_epoch=UNUSED_EPOCH, max_wait=0, min_bytes=1,
                                               max_records=1, batch_size=1, topics=[], forgotten_topics_data=[])
            if answer.error_code.name != "invalid_share_session_epoch":
                break
            time.sleep(DISCONNECT_POLL_S)
        self.timers.check_clear(at_ms, self.timers.now_ms())
        self.fetch(member, [], epoch=UNUSED_EPOCH)
        self._observe(self.partitions)

    def check(self, tp: str) -> None:
        """A `check` of the start offset the share coordinator stored for the partition (SP-47), read with
        DescribeShareGroupOffsets where the broker serves it. Not recorded when a lock may have expired (and
        written) while it was read: which write it saw is then unknown."""
        if not self.describes_offsets:
            return
        topic, partition = TopicPartition.parse(tp)
        try:
            sent_ms, _, _, answer = self._timed(0, lambda _: self.coordinator.request(DESCRIBE_OFFSETS, 0, groups=[
                {"group_id": self.group, "topics": [{"topic_name": topic, "partitions": [partition]}]}]))
        except Ambiguous:
            return
        part = answer.groups[0].topics[0].partitions[0]
        if part.error_code.name == "none":
            self.partitions[tp].add(sent_ms, "check", "check", {}, {"stored_spso": part.start_offset})

    def wait_for_lock_expiry(self) -> None:
        """Sleep until every lock taken so far has surely fired."""
        self.timers.after_all_deadlines()

    # -- a broker restart (targets that can restart their broker) ----------------------------

    def restart(self) -> None:
        """Kill -9 the broker and start it again (no request in flight); each share-partition trace ends there and
        the next starts from the window XM-1 says it reloads. Members must open new sessions (epoch 0)."""
        windows = {tp: self._model_window(book) for tp, book in self.partitions.items()}
        self.target.restart()
        self.restarts += 1
        for connection in (self.admin, self.leader, self.coordinator):
            connection.close()
        # The topics stay on their leader; the group's coordinator may have moved.
        self.admin, self.leader = self._connect("admin", self.target.address), self._connect("leader")
        self.coordinator = self._connect("coordinator", self.target.address)
        self._refind_coordinator()
        for member in self.members:
            member.connection.close()
            member.connection, member.epoch, member.session = self._connect(member.name), 0, set()
        self._reload(windows)
        # Sessions die with the broker: the share-session trace of the old process ends, a new one starts.
        self.finished.append(self.sessions)
        self.sessions = TraceBook(dict(self.sessions.header))
        for tp in self.partitions:
            self.check(tp)

    def _reload(self, windows: dict[str, tuple[int, list[list]]]) -> None:
        """Each share-partition trace ends, and the next starts from what its share-partition reloads from the share
        coordinator (XM-1), given its (SPSO, window) when it was dropped: after a restart, or after Kafka dropped
        the share-partitions of a group whose last session's connection closed (SS-31)."""
        for tp, (spso, window) in windows.items():
            self.finished.append(self.partitions[tp])
            config = {**self.partitions[tp].header["config"], "start_offset": spso,
                      "initial_state": reloaded_window(window)}
            self.partitions[tp] = TraceBook({**self.partitions[tp].header, "config": config})
            topic, partition = TopicPartition.parse(tp)
            self.produce(topic, partition, [])  # the log past the reloaded window, as append steps

    def window_end(self, tp: str) -> int:
        """SPEO of the partition as the model has it after what the probe saw (to aim acknowledgements at it)."""
        spso, window = self._model_window(self.partitions[tp])
        return window[-1][1] + 1 if window else spso

    def _model_window(self, book: TraceBook) -> tuple[int, list[list]]:
        """(SPSO, window runs) of the model after the trace's steps so far."""
        model, _ = replay(book.header, book.steps)
        model.advance(self.timers.now_ms())
        return model.spso, model.snapshot()

    # -- bookkeeping -------------------------------------------------------------------------

    def _observe(self, tps) -> None:
        """The state after a step that may have changed it: a `check` of each partition's SPSO."""
        for tp in tps:
            self.check(tp)

    def _partition_results(self, answer) -> dict:
        names = {topic_id: name for name, topic_id in self.topic_ids.items()}
        return {f"{names[topic.topic_id]}:{part.partition_index}": part
                for topic in answer.responses for part in topic.partitions if topic.topic_id in names}

    def finish(self, directory: Path) -> list[Path]:
        """Close every connection and write the traces (the neighbours' it made too) to `directory`; their paths."""
        paths = [path for other in self.made for path in other.finish(directory)]
        for connection in (*(member.connection for member in self.members), self.admin, self.leader, self.coordinator):
            connection.close()
        directory.mkdir(parents=True, exist_ok=True)
        books = [*self.finished, self.sessions, *self.partitions.values()]
        for index, book in enumerate(books):
            if not book.steps:
                continue
            path = directory / f"{self.name}.{index:02d}.{book.header['machine']}.jsonl"
            path.write_text("\n".join(book.lines()) + "\n")
            paths.append(path)
        return paths


def replay(header: dict, steps: list[dict]):
    """Replay share-partition steps (dicts) through the model, stopping at the first it does not allow:
    (the model, the index of that step or None)."""
    from kipcheck.model.share_partition import SharePartition

    model = SharePartition(**header["config"], profile=header.get("profile", "kip"))
    for index, step in enumerate(steps):
        args, observed = step["args"], step.get("observed") or {}
        try:
            model.advance(step["at_ms"])
            if step["op"] == "append":
                model.append(args["count"])
            elif step["op"] == "acquire":
                model.acquire(step["at_ms"], step["actor"], args["max_records"], observed["records"])
            elif step["op"] == "acknowledge":
                batches = [(batch["first"], batch["last"], batch["type"]) for batch in args["batches"]]
                ruled = model.acknowledge(step["at_ms"], step["actor"], batches)
                if observed.get("error", ruled.value) != ruled.value:
                    return model, index
            elif step["op"] == "leave":
                model.leave(step["at_ms"], step["actor"])
        except Violation:
            return model, index
    return model, None


def judge(paths: list[Path]):
    return [check_file(path) for path in paths]
