"""ShareEngine: the broker's side of impl/share (sessions, share-partitions, share coordinator, traces).

The share-group rules themselves are impl/share's; this adapter only wires
them to the broker:
- one ShareCoordinator on `<data dir>/share-state/`, one ShareSessionCache,
  and one SharePartition per (group, "topic:partition"), loaded on first use
  with SharePartition.load (reads the persisted state, or initializes it; a
  state without a start offset, as a member's subscription initializes it
  under kafka-4.2 (`initialize_subscribed`, spec ST-2), starts at the log end
  or start, or by_duration at the first batch with a record that
  recent, per `share.auto.offset.reset`; where Kafka 4.2 fails to initialize
  when no record is that recent, the broker starts at the log end) and then told about
  every stored log batch past what it knows, so it can replay the log. A load
  whose initialization the coordinator cannot write raises PersisterError
  (acknowledge answers its error; the next use tries again), as Kafka drops a
  share-partition that failed to initialize;
- groups' dynamic configs (impl/share/group_configs.py, served by
  handlers/configs.py) on `<data dir>/share-state/group-configs.log`: a
  group's share.auto.offset.reset when its share-partition is first
  initialized, its share.record.lock.duration.ms at each acquisition and
  renewal (spec SP-46);
- produced batches are passed to every loaded SharePartition of their
  topic-partition (`on_produced`);
- a member's records are released when its session closes (final epoch) or
  its connection closes: kafka-4.2 in the session's share-partitions only,
  kip in every share-partition of its group. Under kafka-4.2 a connection
  close that leaves the group no session drops the group's share-partitions
  (records still acquired in them, e.g. in partitions the session forgot,
  come back from their last persisted state when the partition is loaded
  again), also when a final request had closed the session on it before
  (Kafka keeps that connection's session as stale, spec SS-31). A connection close
  only ends the sessions last used successfully on that connection, so a
  member that reconnected keeps its new session, and a request that failed
  (say, a stranger naming the member) claims nothing (Kafka keys sessions by
  connection);
- with a trace dir, impl/share's TraceWriter writes the traces (with
  `trace_state`, each share-partition step is followed by a `check` of the
  partition's whole state); `close()`
  writes a final `check` step for every share-partition and for the sessions
  of every group with a share-partition, then flushes. A connection close that
  ends a session is traced as `disconnect` (SS-17); sessions die with the
  process, so each broker process writes new share-session trace files.

The engine is handed only what it uses of the broker: the directory and
storage of the share state, the partition logs (`log_of`, read through the
ShareLog protocol) and whether a group subscribed to a topic (`subscribed`).
It tells the broker what changed through its answers (`expire_locks`,
`connection_closed`), never by calling back.

`partition_factory` builds SharePartitions (default SharePartition.load); a
test may inject another (see tests/broker_bugs.py), never the production path.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable, Protocol

from kipcheck.impl.broker.clock import now_ms
from kipcheck.impl.share.config import ShareConfig
from kipcheck.impl.share.coordinator import ShareCoordinator, StateSummary
from kipcheck.impl.share.group_configs import GroupConfigs
from kipcheck.impl.share.partition import NO_START_OFFSET, PersisterError, SharePartition
from kipcheck.impl.share.sessions import SessionAnswer, ShareSessionCache
from kipcheck.impl.share.tracing import TraceWriter
from kipcheck.impl.storage import Storage
from kipcheck.impl.topic_partition import TopicPartition
from kipcheck.model.errors import Error

Acks = list[tuple[str, int, int, str]]  # (tp, first, last, type), as the session trace records them


class ShareLog(Protocol):
    """What the engine reads of a partition's log (impl/broker/log.py's PartitionLog)."""

    @property
    def start_offset(self) -> int: ...

    @property
    def end_offset(self) -> int: ...

    def offset_for_timestamp(self, timestamp_ms: int) -> int: ...

    def batch_details(self, from_offset: int = 0) -> list[tuple[int, int, tuple[int, int | None] | None]]: ...


class Connection(Protocol):
    """What the engine keeps on a client connection (impl/broker/server.py's Connection)."""

    connection_id: int
    attachments: dict


class ShareEngine:
    partition_factory: Callable[..., SharePartition] = staticmethod(SharePartition.load)

    def __init__(self, config: ShareConfig, state_dir: Path, storage: Storage, log_of: Callable[[str, int], ShareLog],
                 subscribed: Callable[[str, str], bool], trace_dir: Path | None = None, trace_state: bool = False):
        """`state_dir`: the share coordinator's and groups' configs' files; `log_of(topic, partition)`: the
        partition's log; `subscribed(group, topic)`: whether a member of the group subscribed to the topic."""
        self.log_of, self.subscribed = log_of, subscribed
        self.trace_state = trace_state
        self.config = config
        self.trace_writer = None
        if trace_dir is not None:
            self.trace_writer = TraceWriter(trace_dir, config, storage)
        self.coordinator = ShareCoordinator(state_dir, config, trace_writer=self.trace_writer, now_ms=now_ms(),
                                            storage=storage)
        self.sessions = ShareSessionCache(config, trace_writer=self.trace_writer)
        # Groups' dynamic configs (IncrementalAlterConfigs on a GROUP resource) beside the share state.
        self.group_configs = GroupConfigs(state_dir, config, storage)
        self.partitions: dict[tuple[str, TopicPartition], SharePartition] = {}
        self.persisted_keys = set(self.coordinator.keys())  # share-partitions initialized before this process
        self.groups_of_tp: dict[TopicPartition, set[str]] = {}
        self.connection_of: dict[tuple[str, str], int] = {}
        # kafka-4.2: the connections of sessions a final request closed; their close may empty the group (SS-31).
        self.stale_connection_of: dict[tuple[str, str], int] = {}

    # -- share-partitions ------------------------------------------------------------------

    def partition(self, group: str, tp: TopicPartition, at_ms: int) -> SharePartition:
        share_partition = self.partitions.get((group, tp))
        if share_partition is None:
            partition_log = self.log_of(tp.topic, tp.partition)
            # The group's share.auto.offset.reset, used only if no start offset is persisted (SharePartition.load).
            config = self.group_configs.share_config(group)
            reset_offset = None
            if config.reset_duration_ms is not None:
                # by_duration: the first batch with a record at most that old (Kafka 4.2 offsetForTimestamp).
                reset_offset = partition_log.offset_for_timestamp(int(time.time() * 1000) - config.reset_duration_ms)
            share_partition = self.partition_factory(
                config, self.coordinator, f"{group}:{tp}", partition_log.start_offset,
                partition_log.end_offset, at_ms, trace_writer=self.trace_writer, reset_offset=reset_offset)
            share_partition.trace_state = self.trace_state
            for first, last, transaction in partition_log.batch_details(share_partition.log_end_offset):
                share_partition.on_append(first, last - first + 1, at_ms, transaction)
            self.partitions[(group, tp)] = share_partition
            self.groups_of_tp.setdefault(tp, set()).add(group)
        return share_partition

    def initialize_subscribed(self, group: str, partitions: list[TopicPartition], at_ms: int) -> None:
        """kafka-4.2: a member of the group subscribes to the topics of `partitions`: each share-partition without a
        state gets one with no start offset (-1), as Kafka's group coordinator sends InitializeShareGroupState after
        the heartbeat; the leader applies share.auto.offset.reset when it first loads it (SharePartition.load). A
        write the disk refuses is tried again at the next heartbeat."""
        for tp in partitions:
            key = f"{group}:{tp}"
            if not self.coordinator.holds(key) and \
                    self.coordinator.initialize(key, 0, NO_START_OFFSET, at_ms) == Error.NONE:
                self.persisted_keys.add(key)

    def loaded(self, group: str, tp: TopicPartition) -> bool:
        """Whether the group's share-partition is in this leader's cache (a ShareFetch of it loaded it, and the
        group has not been emptied since, SS-31)."""
        return (group, tp) in self.partitions

    def initialized(self, group: str, tp: TopicPartition) -> bool:
        """Whether the group's share-partition has state to read (kafka-4.2; the `kip` profile: always).

        Kafka 4.2 initializes it when a member of the group subscribes to its topic; before that the
        share coordinator refuses to read it (see handlers/share.py)."""
        return self.config.profile == "kip" or (group, tp) in self.partitions or f"{group}:{tp}" in self.persisted_keys \
            or self.subscribed(group, tp.topic)

    # -- what the share groups' admin APIs ask (handlers/share_offsets.py) ------------------

    def stored_partitions(self, group: str) -> list[TopicPartition]:
        """The group's share-partitions the share coordinator holds a state for."""
        prefix = f"{group}:"
        return [TopicPartition.parse(key[len(prefix):]) for key in self.coordinator.keys() if key.startswith(prefix)]

    def stored_summary(self, group: str, tp: TopicPartition) -> StateSummary | None:
        """The share-partition's state as the share coordinator stored it, as the last state write carried it (not
        the leader's SPSO in memory: spec SP-47); None if it has no state."""
        return self.coordinator.summary(f"{group}:{tp}")

    def reset_start(self, group: str, tp: TopicPartition, start_offset: int, at_ms: int) -> str:
        """AlterShareGroupOffsets on a group without members: the share-partition starts again at `start_offset`,
        a new state (the next state epoch) with nothing in flight; a loaded copy is dropped, to load it again."""
        self._unload(group, tp, at_ms)
        stored = self.stored_summary(group, tp)
        error = self.coordinator.initialize(f"{group}:{tp}", 0 if stored is None else stored.state_epoch + 1,
                                            start_offset, at_ms)
        if error == Error.NONE:
            self.persisted_keys.add(f"{group}:{tp}")
        return error

    def delete_state(self, group: str, tp: TopicPartition, at_ms: int) -> str:
        """DeleteShareGroupOffsets or DeleteGroups on a group without members: the share-partition's state is
        deleted (a tombstone); the next member to subscribe initializes it again."""
        self._unload(group, tp, at_ms)
        error = self.coordinator.delete(f"{group}:{tp}", at_ms)
        if error == Error.NONE:
            self.persisted_keys.discard(f"{group}:{tp}")
        return error

    def _unload(self, group: str, tp: TopicPartition, at_ms: int) -> None:
        share_partition = self.partitions.pop((group, tp), None)
        if share_partition is not None:
            share_partition.trace_check(at_ms)
            self.groups_of_tp[tp].discard(group)

    def on_produced(self, topic: str, partition: int, batch_ranges: list) -> None:
        """New log batches (PartitionLog.batch_details: first, last, transaction) for the loaded share-partitions."""
        tp, at_ms = TopicPartition(topic, partition), now_ms()
        for group in self.groups_of_tp.get(tp, ()):
            share_partition = self.partitions[(group, tp)]
            for first, last, transaction in batch_ranges:
                share_partition.on_append(first, last - first + 1, at_ms, transaction)

    def on_log_start(self, topic: str, partition: int, offset: int) -> None:
        """DeleteRecords moved the log start offset: the loaded share-partitions' SPSO jumps (spec SP-64)."""
        tp, at_ms = TopicPartition(topic, partition), now_ms()
        for group in self.groups_of_tp.get(tp, ()):
            self.partitions[(group, tp)].on_log_start(offset, at_ms)

    def acquire(self, group: str, member: str, tp: TopicPartition, max_records: int, at_ms: int,
                record_limit: bool = False) -> list[tuple[int, int, int]]:
        return self.partition(group, tp, at_ms).acquire(member, max_records, at_ms, record_limit,
                                                        lock_duration_ms=self.lock_duration_ms(group))

    def lock_duration_ms(self, group: str) -> int:
        """SP-46: the group's lock duration now (its dynamic config, else the broker's), read at each lock."""
        return self.group_configs.share_config(group).record_lock_duration_ms

    def acknowledge(self, group: str, member: str, tp: TopicPartition, batches: list[tuple[int, int, str]], at_ms: int,
                    renew: bool = False) -> str:
        try:
            share_partition = self.partition(group, tp, at_ms)
        except PersisterError as error:
            return error.error
        return share_partition.acknowledge(member, batches, at_ms, renew, lock_duration_ms=self.lock_duration_ms(group))

    def release_member(self, group: str, member: str, at_ms: int, partitions: frozenset[str] | None = None) -> int:
        """Release the member's records in `partitions` of its group (as the session names them; None: in all)."""
        return sum(share_partition.release_member(member, at_ms)
                   for (owner, tp), share_partition in self.partitions.items()
                   if owner == group and (partitions is None or str(tp) in partitions))

    def drop_group(self, group: str, at_ms: int) -> None:
        """The group has no session left: forget its share-partitions (each trace ends with a check); the
        next use loads them again from the share coordinator (Kafka 4.2's onGroupEmpty)."""
        for _, tp in [key for key in self.partitions if key[0] == group]:
            self._unload(group, tp, at_ms)
            self.persisted_keys.add(f"{group}:{tp}")   # initialized: readable again

    def expire_locks(self, at_ms: int) -> int:
        expired = 0
        for share_partition in self.partitions.values():
            deadline = share_partition.next_deadline_ms()
            if deadline is not None and deadline <= at_ms:
                expired += share_partition.expire_locks(at_ms)
        return expired

    # -- sessions --------------------------------------------------------------------------

    def share_fetch_session(self, group: str, member: str, epoch: int, add: list[str], forget: list[str],
                            acks: Acks, at_ms: int) -> SessionAnswer:
        return self.sessions.share_fetch(group, member, epoch, add, forget, acks=acks, now_ms=at_ms)

    def share_acknowledge_session(self, group: str, member: str, epoch: int, acks: Acks, at_ms: int) -> SessionAnswer:
        return self.sessions.share_acknowledge(group, member, epoch, acks=acks, now_ms=at_ms)

    def has_session(self, group: str, member: str) -> bool:
        return self.sessions.epoch_of(group, member) is not None

    def session_used(self, connection: Connection, group: str, member: str, answer: SessionAnswer) -> None:
        """A request succeeded on `connection`: its close now ends the member's session (unless this one closed it;
        under kafka-4.2 the close of the connection of a session so closed still empties a group left without
        sessions, spec SS-31)."""
        key = (group, member)
        if answer.closed:
            closed_on = self.connection_of.pop(key, connection.connection_id)
            if self.config.profile != "kip":
                self.stale_connection_of[key] = closed_on
            return
        self.stale_connection_of.pop(key, None)
        connection.attachments.setdefault("share_members", set()).add(key)
        self.connection_of[key] = connection.connection_id

    def connection_closed(self, connection: Connection, at_ms: int) -> bool:
        """The connection's sessions end; whether that made records available again or dropped a group."""
        released, dropped = 0, False
        for group, member in connection.attachments.get("share_members", ()):
            key = (group, member)
            if self.connection_of.get(key) == connection.connection_id:
                del self.connection_of[key]
            elif self.stale_connection_of.get(key) == connection.connection_id:
                del self.stale_connection_of[key]   # its session ended by a final request: SS-31's check only
            else:
                continue
            answer = self.sessions.close_member(group, member, at_ms)
            if answer.release:
                released += self.release_member(group, member, at_ms, answer.released)
            if answer.group_empty:
                self.drop_group(group, at_ms)
                dropped = True
        return bool(released or dropped)

    # -- shutdown --------------------------------------------------------------------------

    def close(self) -> None:
        at_ms = now_ms()
        for share_partition in self.partitions.values():
            share_partition.trace_check(at_ms)
        for group in {group for group, _ in self.partitions}:
            self.sessions.trace_check(group, at_ms)
        self.coordinator.close()
        self.group_configs.close()
        if self.trace_writer is not None:
            self.trace_writer.close()

