"""GroupMembership: KIP-848 group membership (ConsumerGroupHeartbeat v1) in a background thread.

    membership = GroupMembership(config, cluster, ("orders",), member_id, trace)
    membership.start()
    decisions = membership.take_decisions()   # the poll thread: what the coordinator decided since
    membership.poll_done(revoked)             # a poll ended: acknowledge its completed revokes, rejoin if fenced
    membership.polled(now_ms); membership.commit_identity(); membership.fenced(generation, now_ms)
    membership.close()                        # leave the group (epoch -1) and stop the thread

Why a thread: heartbeats must keep flowing while the application processes,
whether it polls every millisecond (KIP-983) or is blocked in a revoke
callback inside poll (the callback mode). Tying heartbeats to poll would tie
the session timeout to processing time, which KIP-848 separated from it (the
rebalance timeout, max.poll.interval.ms, bounds revocation instead); Kafka's
own KIP-848 consumer heartbeats from its background thread, librdkafka from
its main thread, for the same reason.

What the thread does, as Kafka 4.2's consumer (AbstractMembershipManager):
- joins with epoch 0, its subscription, the rebalance timeout
  (max.poll.interval.ms) and an empty owned list; then heartbeats every
  heartbeat interval the coordinator gives, reporting the partitions it holds:
  those assigned and those whose revocation has not completed;
- an assignment that drops partitions is a revoke, one that adds them an
  assign: both become Decisions the next poll learns (spec RD-2), kept in the
  order they came; the poll that completes a revoke ends with `poll_done`,
  and the next heartbeat, sent at once, leaves those partitions out: the
  acknowledgement, traced as `release` (RD-11); after a broken connection the
  next heartbeat is a full one, so its answer carries the whole assignment;
- UNKNOWN_MEMBER_ID or FENCED_MEMBER_EPOCH (the coordinator fenced the member,
  e.g. at its rebalance timeout): every partition it held is lost, and it
  rejoins with epoch 0 once a poll has told the application (as Kafka's
  consumer rejoins after its onPartitionsLost), so no poll reports a
  partition lost and given back at once; a commit that learns of the fencing
  first reports it through `fenced`, so it is applied once (`generation`
  counts fencings);
- NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS or
  a broken connection: find the coordinator again after retry.backoff.ms;
  any other error is fatal and raised by the next poll;
- no poll for max.poll.interval.ms: the member leaves the group (its
  partitions are lost to it) and rejoins after the next poll, so an
  application that stopped polling holds no partition forever.
Subscriptions are topic names (no regular expressions). With
`group.instance.id` the member is static: every heartbeat names its instance,
and leaving (epoch -1) ends the instance's membership at once.

With the key-range assignor (group.remote.assignor=key-range-round-robin,
spec/key-range-assign.md KR-13, KR-14) an assigned partition may come with a
key share (the tagged `key_ranges` of ConsumerGroupHeartbeat): the ASSIGN
Decision carries it, and heartbeats report it with the partition, also while
its revocation is pending, so that the coordinator hands it on only once this
member gave it up.
"""

from __future__ import annotations

import logging
import threading
import time

from kipcheck.impl.consumer.cluster import Cluster
from kipcheck.impl.consumer.config import ConsumerConfig
from kipcheck.impl.consumer.connection import BrokerConnection, ConnectionFailed
from kipcheck.impl.consumer.errors import KafkaError
from kipcheck.impl.consumer.ownership import ASSIGN, LOSE, REVOKE, Decision
from kipcheck.impl.consumer.tracing import ConsumerTrace
from kipcheck.impl.topic_partition import TopicPartition
from kipcheck.model.errors import Error
from kipcheck.model.key_range_assign import shares_from_wire, shares_to_wire

log = logging.getLogger("kipcheck.consumer")

CONSUMER_GROUP_HEARTBEAT, HEARTBEAT_VERSION = 68, 1
JOIN_EPOCH, LEAVE_EPOCH = 0, -1
FENCED = {Error.UNKNOWN_MEMBER_ID, Error.FENCED_MEMBER_EPOCH}
FIND_AGAIN = {Error.NOT_COORDINATOR, Error.COORDINATOR_NOT_AVAILABLE, Error.COORDINATOR_LOAD_IN_PROGRESS,
              Error.NETWORK_EXCEPTION}


def now_ms() -> int:
    return time.monotonic_ns() // 1_000_000  # the broker's clock too, so both sides' traces compare


class GroupMembership:
    def __init__(self, config: ConsumerConfig, cluster: Cluster, topics: tuple[str, ...], member_id: str,
                 trace: ConsumerTrace | None):
        self.config, self.cluster, self.topics, self.member_id, self.trace = config, cluster, topics, member_id, trace
        self.lock = threading.Lock()
        self.changed = threading.Event()  # set when a decision arrives (a poll may return early) or on a fatal error
        self.epoch = JOIN_EPOCH
        self.generation = 0
        self.fatal: KafkaError | None = None
        self._send_now = threading.Event()
        self._assignment: frozenset[TopicPartition] = frozenset()
        self._unreleased: set[TopicPartition] = set()   # revoked by the coordinator, revoke not completed
        self._shares: dict[TopicPartition, tuple[int, int]] = {}  # key shares of partitions held (KR-14)
        self._reported: frozenset[TopicPartition] | None = None  # None: joining, nothing reported yet
        self._decisions: list[Decision] = []
        self._interval_ms = 0
        self._last_poll_ms = now_ms()
        self._out = False  # fenced or left: rejoin once a poll has told the application
        self._full = True  # the next heartbeat carries every field, so the answer carries the assignment
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"heartbeat-{member_id}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    # -- called by the poll thread ------------------------------------------------------------

    def take_decisions(self) -> list[Decision]:
        with self.lock:
            if self.fatal is not None:
                raise self.fatal
            decisions, self._decisions = self._decisions, []
            self.changed.clear()
            return decisions

    def poll_done(self, revoked: frozenset[TopicPartition]) -> None:
        """A poll ended: its completed revokes are acknowledged, and a member fenced or gone rejoins, now."""
        with self.lock:
            self._unreleased -= revoked
            for tp in revoked - self._assignment:
                self._shares.pop(tp, None)
            rejoin, self._out = self._out, False
        if revoked or rejoin:
            self._send_now.set()

    def polled(self, at_ms: int) -> None:
        with self.lock:
            self._last_poll_ms = at_ms

    def commit_identity(self) -> tuple[str, int, int]:
        """(member id, member epoch, generation) for an OffsetCommit."""
        with self.lock:
            return self.member_id, self.epoch, self.generation

    def fenced(self, generation: int, at_ms: int) -> None:
        """A commit sent in `generation` was answered UNKNOWN_MEMBER_ID: lose everything, once."""
        with self.lock:
            if generation == self.generation:
                self._lose_all(at_ms, "fenced (learned from a commit)")

    def close(self) -> None:
        self._stop.set()
        self._send_now.set()
        self._thread.join(self.config.request_timeout_ms / 1000 + 5)

    # -- the heartbeat thread ---------------------------------------------------------------------

    def _run(self) -> None:
        connection: BrokerConnection | None = None
        while not self._stop.is_set() and self.fatal is None:
            try:
                connection = connection or self.cluster.connect_coordinator(self.config.group_id)
                self._beat(connection)
            except (KafkaError, ConnectionFailed) as error:
                if isinstance(error, KafkaError) and error.error not in FIND_AGAIN:
                    self._fail(error)
                    break
                log.info("member %s: %s; finding the coordinator again", self.member_id, error)
                self._full = True  # an answer may have been lost: ask for the whole assignment again
                if connection is not None:
                    connection.close()
                connection = None
                self._stop.wait(self.config.retry_backoff_ms / 1000)
                continue
            self._send_now.wait(self._interval_ms / 1000)
            self._send_now.clear()
        if connection is not None:
            self._leave(connection)
            connection.close()

    def _beat(self, connection: BrokerConnection) -> None:
        request, generation = self._request()
        if request is None:
            return
        answer = connection.request(CONSUMER_GROUP_HEARTBEAT, HEARTBEAT_VERSION, **request)
        error = answer.error_code.name.upper()
        assignment = None
        if error == Error.NONE and answer.assignment is not None:
            assignment = self._partitions(connection, answer.assignment.topic_partitions)
        with self.lock:
            at_ms = now_ms()
            if generation != self.generation:
                return  # a commit learned of a fencing meanwhile: this answer is to a membership that ended
            if error == Error.NONE:
                self.epoch = answer.member_epoch
                self._interval_ms = max(1, round(answer.heartbeat_interval.total_seconds() * 1000))
                if assignment is not None:
                    self._assigned(*assignment, at_ms)
            elif error in FENCED:
                self._lose_all(at_ms, f"fenced: {error}")
            else:
                raise KafkaError(error, answer.error_message or "ConsumerGroupHeartbeat failed")

    def _request(self) -> tuple[dict | None, int]:
        """(the next heartbeat's fields or None if none is due, the generation); writes its `release` (RD-11)."""
        with self.lock:
            at_ms, generation = now_ms(), self.generation
            if self._out:
                return None, generation
            if self._reported is not None and at_ms - self._last_poll_ms > self.config.max_poll_interval_ms:
                log.warning("member %s: no poll for max.poll.interval.ms (%d ms): leaving the group",
                            self.member_id, self.config.max_poll_interval_ms)
                self._lose_all(at_ms, "left the group: max.poll.interval.ms passed")
                return {**self._fields(LEAVE_EPOCH), "topic_partitions": None}, self.generation
            owned = self._assignment | self._unreleased
            if self._reported is not None and self.trace is not None and self._reported - owned:
                self.trace.release(at_ms, self._reported - owned)
            joining, self._reported = self._reported is None, owned
            fields = self._fields(JOIN_EPOCH if joining else self.epoch)
            if joining or self._full:
                self._full = False
                fields.update(rebalance_timeout=self.config.max_poll_interval_ms, subscribed_topic_names=self.topics,
                              server_assignor=self.config.remote_assignor)
            fields["topic_partitions"] = self._by_topic_id(owned)
            return fields, generation

    def _fields(self, epoch: int) -> dict:
        return {"group_id": self.config.group_id, "member_id": self.member_id, "member_epoch": epoch,
                "instance_id": self.config.group_instance_id, "rack_id": None, "rebalance_timeout": -1,
                "subscribed_topic_names": None, "subscribed_topic_regex": None, "server_assignor": None}

    def _by_topic_id(self, partitions: frozenset[TopicPartition]) -> list[dict]:
        by_topic: dict[str, list[int]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        return [{"topic_id": self.cluster.topic_id(topic), "partitions": sorted(parts),
                 "key_ranges": shares_to_wire({partition: self._shares[TopicPartition(topic, partition)]
                                               for partition in parts if TopicPartition(topic, partition) in self._shares})}
                for topic, parts in sorted(by_topic.items()) if self.cluster.topic_id(topic) is not None]

    def _partitions(self, connection: BrokerConnection, topic_partitions
                    ) -> tuple[frozenset[TopicPartition], dict[TopicPartition, tuple[int, int]]]:
        """The assigned partitions, and the key shares of those that come with one (KR-14)."""
        unknown = [entry.topic_id for entry in topic_partitions if self.cluster.name_of(entry.topic_id) is None]
        if unknown:
            self.cluster.refresh(connection, ids=unknown)
        assigned, shares = set(), {}
        for entry in topic_partitions:
            name = self.cluster.name_of(entry.topic_id)
            if name is None:
                log.warning("member %s: assigned topic id %s that Metadata does not know; left out",
                            self.member_id, entry.topic_id)
                continue
            assigned.update(TopicPartition(name, partition) for partition in entry.partitions)
            shares.update({TopicPartition(name, partition): share
                           for partition, share in shares_from_wire(entry.key_ranges).items()})
        return frozenset(assigned), shares

    def _assigned(self, assignment: frozenset[TopicPartition], shares: dict[TopicPartition, tuple[int, int]],
                  at_ms: int) -> None:
        revoked, added = self._assignment - assignment, assignment - self._assignment
        self._assignment = assignment
        self._unreleased = (self._unreleased | revoked) - added
        # A share is given up with its partition (the coordinator revokes one before assigning another).
        self._shares = {**{tp: share for tp, share in self._shares.items() if tp in self._unreleased},
                        **{tp: share for tp, share in shares.items() if tp in assignment}}
        for kind, partitions in ((REVOKE, revoked), (ASSIGN, added)):
            if partitions:
                key_shares = {tp: self._shares[tp] for tp in partitions if tp in self._shares} if kind == ASSIGN else {}
                self._decisions.append(Decision(kind, frozenset(partitions), at_ms, key_shares))
        self.changed.set()

    def _lose_all(self, at_ms: int, reason: str) -> None:
        held = self._assignment | self._unreleased
        log.warning("member %s: %s; partitions lost: %s", self.member_id, reason, sorted(map(str, held)))
        if held:
            self._decisions.append(Decision(LOSE, frozenset(held), at_ms))
        self._assignment, self._unreleased, self._reported, self._shares = frozenset(), set(), None, {}
        self.epoch, self.generation, self._out = JOIN_EPOCH, self.generation + 1, True
        self.changed.set()

    def _leave(self, connection: BrokerConnection) -> None:
        with self.lock:
            joined = self._reported is not None and not self._out
        if joined:
            try:
                connection.request(CONSUMER_GROUP_HEARTBEAT, HEARTBEAT_VERSION,
                                   **{**self._fields(LEAVE_EPOCH), "topic_partitions": None})
            except ConnectionFailed as error:
                log.info("member %s: leave heartbeat failed: %s", self.member_id, error)

    def _fail(self, error: KafkaError) -> None:
        with self.lock:
            self.fatal = error
        self.changed.set()
