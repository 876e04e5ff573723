"""Committed offsets: OffsetCommit and OffsetFetch (v9) for the poll thread, and what the application processed.

    offsets = GroupOffsets(config, cluster, identity)   # identity() -> (member id, member epoch, generation)
    pending = offsets.send({tp: 42})                    # sent, answered later (pipelined, in order)
    errors = offsets.finish(pending)                    # {tp: "NONE" | error name}
    offsets.committed([tp]) -> {tp: offset or -1}
    pending = offsets.send({tp: [(41, 42), (46, 47)]})  # individual commit: OffsetRanges (impl/wire/schemas.py)
    offsets.stable_offsets[tp], offsets.committed_ranges[tp]   # the last LastStableOffset, CommittedRangeOffsets

    processed = ProcessedOffsets()
    processed.start(tp, 40); processed.done(tp, 41); processed.done(tp, 40)
    processed.commit_offset(tp) -> 42; processed.ranges(tp) -> [] (processed offsets above it)

`finish` retries what Kafka's consumer retries, with the latest member epoch,
every retry.backoff.ms until default.api.timeout.ms: STALE_MEMBER_EPOCH (the
epoch moved while the commit travelled), NOT_COORDINATOR,
COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS, REQUEST_TIMED_OUT and
a broken connection; every other error is the answer. Without a group
membership (assign) commits go as a simple consumer: member "" and epoch -1.

ProcessedOffsets is where individual commit slots in: it keeps the processed
offsets of each partition as merged ranges; a plain commit takes the offset
below which everything is processed, individual commit the ranges above it.
"""

from __future__ import annotations

import bisect
import time
from dataclasses import dataclass
from typing import Callable

from kipcheck.impl.consumer.cluster import Cluster
from kipcheck.impl.consumer.config import ConsumerConfig
from kipcheck.impl.consumer.connection import BrokerConnection, ConnectionFailed, Sent
from kipcheck.impl.consumer.errors import KafkaError
from kipcheck.impl.topic_partition import TopicPartition
from kipcheck.impl.wire.errors import error_name
from kipcheck.impl.wire.schemas import flat, pairs
from kipcheck.model.errors import Error

OFFSET_COMMIT, OFFSET_FETCH, VERSION = 8, 9, 9
RETRIED = {Error.STALE_MEMBER_EPOCH, Error.NOT_COORDINATOR, Error.COORDINATOR_NOT_AVAILABLE,
           Error.COORDINATOR_LOAD_IN_PROGRESS, Error.REQUEST_TIMED_OUT, Error.NETWORK_EXCEPTION}


@dataclass
class PendingCommit:
    offsets: dict[TopicPartition, int | list[tuple[int, int]]]   # a plain offset, or ranges (individual commit)
    generation: int
    connection: BrokerConnection | None
    sent: Sent | None


class GroupOffsets:
    def __init__(self, config: ConsumerConfig, cluster: Cluster, identity: Callable[[], tuple[str, int, int]]):
        self.config, self.cluster, self.identity = config, cluster, identity
        self._connection: BrokerConnection | None = None
        self.stable_offsets: dict[TopicPartition, int] = {}
        self.committed_ranges: dict[TopicPartition, list[tuple[int, int]]] = {}

    def send(self, offsets: dict[TopicPartition, int | list[tuple[int, int]]]) -> PendingCommit:
        member_id, epoch, generation = self.identity()
        topics: dict[str, list[dict]] = {}
        for tp, offset in sorted(offsets.items()):
            ranges = {} if type(offset) is int else {"committed_offset": -1, "offset_ranges": flat(offset)}
            topics.setdefault(tp.topic, []).append({"partition_index": tp.partition, "committed_offset": offset,
                                                    "committed_leader_epoch": -1, "committed_metadata": "", **ranges})
        try:
            connection = self._connect()
            sent = connection.send(OFFSET_COMMIT, VERSION, group_id=self.config.group_id, member_id=member_id,
                                   generation_id_or_member_epoch=epoch, group_instance_id=None,
                                   topics=[{"name": topic, "partitions": parts} for topic, parts in topics.items()])
        except (ConnectionFailed, KafkaError):
            self._connection, connection, sent = None, None, None  # finish() sends it again
        return PendingCommit(dict(offsets), generation, connection, sent)

    def finish(self, pending: PendingCommit) -> dict[TopicPartition, str]:
        """Each partition's answer, retried as the module docstring says; `pending.generation` becomes the
        generation of the last send (the membership the final answer speaks of)."""
        deadline = time.monotonic() + self.config.default_api_timeout_ms / 1000
        errors: dict[TopicPartition, str] = {}
        attempt = pending
        while True:
            errors.update(self._answer(attempt))
            pending.generation = attempt.generation
            retry = {tp: offset for tp, offset in attempt.offsets.items() if errors[tp] in RETRIED}
            if not retry or time.monotonic() >= deadline:
                return errors
            time.sleep(self.config.retry_backoff_ms / 1000)
            attempt = self.send(retry)

    def _answer(self, pending: PendingCommit) -> dict[TopicPartition, str]:
        if pending.sent is None or pending.connection is not self._connection:
            return {tp: Error.NETWORK_EXCEPTION for tp in pending.offsets}
        try:
            answer = pending.connection.receive(pending.sent)
        except ConnectionFailed:
            self._connection = None
            return {tp: Error.NETWORK_EXCEPTION for tp in pending.offsets}
        answered = {TopicPartition(topic.name, part.partition_index): error_name(part.error_code)
                    for topic in answer.topics for part in topic.partitions}
        self.stable_offsets.update({TopicPartition(topic.name, part.partition_index): part.last_stable_offset
                                    for topic in answer.topics for part in topic.partitions})
        return {tp: answered.get(tp, Error.UNKNOWN_SERVER_ERROR) for tp in pending.offsets}

    def committed(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        """The group's committed offset of each partition (-1: none), retried as commits are."""
        deadline = time.monotonic() + self.config.default_api_timeout_ms / 1000
        while True:
            error, offsets = self._fetch_committed(partitions)
            if error == Error.NONE or error not in RETRIED or time.monotonic() >= deadline:
                if error != Error.NONE:
                    raise KafkaError(error, f"OffsetFetch for {sorted(map(str, partitions))}")
                return offsets
            time.sleep(self.config.retry_backoff_ms / 1000)

    def _fetch_committed(self, partitions: list[TopicPartition]) -> tuple[str, dict[TopicPartition, int]]:
        member_id, epoch, _ = self.identity()
        topics: dict[str, list[int]] = {}
        for tp in sorted(partitions):
            topics.setdefault(tp.topic, []).append(tp.partition)
        group = {"group_id": self.config.group_id, "member_id": member_id or None, "member_epoch": epoch,
                 "topics": [{"name": topic, "partition_indexes": parts} for topic, parts in topics.items()]}
        try:
            answer = self._connect().request(OFFSET_FETCH, VERSION, groups=[group], require_stable=False)
        except (ConnectionFailed, KafkaError) as error:
            self._connection = None
            return getattr(error, "error", Error.NETWORK_EXCEPTION), {}
        fetched = answer.groups[0]
        offsets, error = {}, fetched.error_code.name.upper()
        for topic in fetched.topics:
            for part in topic.partitions:
                error = error_name(part.error_code) if error == Error.NONE else error
                offsets[TopicPartition(topic.name, part.partition_index)] = part.committed_offset
                self.committed_ranges[TopicPartition(topic.name, part.partition_index)] = \
                    pairs(part.committed_range_offsets)
        return error, offsets

    def _connect(self) -> BrokerConnection:
        if self._connection is None:
            self._connection = self.cluster.connect_coordinator(self.config.group_id)
        return self._connection

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None


class ProcessedOffsets:
    def __init__(self) -> None:
        self._ranges: dict[TopicPartition, list[list[int]]] = {}  # sorted, disjoint, non-adjacent [first, last]

    def start(self, tp: TopicPartition, offset: int) -> None:
        """Processing of `tp` starts at `offset`: everything below it counts as processed."""
        self._ranges[tp] = [[-1, offset - 1]]

    def done(self, tp: TopicPartition, offset: int) -> None:
        ranges = self._ranges[tp]
        index = bisect.bisect_right(ranges, [offset, offset])
        if (index and ranges[index - 1][1] >= offset) or (index < len(ranges) and ranges[index][0] == offset):
            return  # already processed
        ranges.insert(index, [offset, offset])
        if index + 1 < len(ranges) and ranges[index + 1][0] == offset + 1:
            ranges[index][1] = ranges.pop(index + 1)[1]
        if index and ranges[index - 1][1] == offset - 1:
            ranges[index - 1][1] = ranges.pop(index)[1]

    def commit_offset(self, tp: TopicPartition) -> int:
        """The offset below which every record of `tp` is processed (Kafka's committed offset)."""
        return self._ranges[tp][0][1] + 1

    def ranges(self, tp: TopicPartition) -> list[tuple[int, int]]:
        """The processed ranges above the commit offset (what an individual commit sends)."""
        return [(first, last) for first, last in self._ranges[tp][1:]]

    def forget(self, tp: TopicPartition) -> None:
        self._ranges.pop(tp, None)
