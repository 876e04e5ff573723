"""Fetcher: fetch positions, the fetch buffer and Fetch (v12) requests, for the poll thread.

    fetcher = Fetcher(config, cluster)
    fetcher.seek(tp, offset); fetcher.positions           # next offset to return, per partition
    fetcher.fetch(partitions, max_wait_ms)                 # one Fetch per leader, into the buffer
    records = fetcher.take(partitions, max_records)        # buffered records, positions advance
    fetcher.forget(partitions)                             # ownership ended: position and buffer go
    fetcher.discard_buffered(partitions)                   # keep the position, drop what was fetched ahead
    fetcher.reset(partitions, "earliest" | "latest")       # ListOffsets

Limits: the buffer holds raw batches, decoded one batch at a time as records
are taken, so decoded records stay within a batch (decompressed no further
than receive.message.max.bytes) and max.poll.records; a
partition with buffered records is not fetched again, and no fetch is sent
while the buffer holds fetch.max.bytes, so buffered bytes stay within about one
fetch (a broker may answer one batch above the byte limits, KIP-74); one Fetch
is in flight at a time, asking for at most fetch.max.bytes and
max.partition.fetch.bytes per partition. A Fetch answers whole batches from
the one holding the fetch offset: records below the position are skipped.
Partition errors: OFFSET_OUT_OF_RANGE resets the position by
auto.offset.reset ("none" raises it); NOT_LEADER_OR_FOLLOWER and
UNKNOWN_TOPIC_OR_PARTITION refresh the metadata and fetch again later; any
other raises KafkaError. `fetch_partition` builds one partition's entry of the
request, with the partition's KeyRanges from `key_ranges` (impl/wire/schemas.py) when
it is fetched by key range.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

from kipcheck.impl.consumer.cluster import Cluster
from kipcheck.impl.consumer.config import ConsumerConfig
from kipcheck.impl.consumer.connection import BrokerConnection, ConnectionFailed
from kipcheck.impl.consumer.errors import KafkaError
from kipcheck.impl.consumer.records import ConsumerRecord, decode_batch, last_offset, split_batches
from kipcheck.impl.topic_partition import TopicPartition
from kipcheck.impl.wire.errors import error_name
from kipcheck.impl.wire.schemas import flat
from kipcheck.model.errors import Error

FETCH, LIST_OFFSETS = 1, 2
VERSIONS = {FETCH: 12, LIST_OFFSETS: 7}
NO_SESSION_EPOCH, READ_UNCOMMITTED, CONSUMER_REPLICA = -1, 0, -1
TIMESTAMPS = {"earliest": -2, "latest": -1}
REFRESH_ERRORS = {Error.NOT_LEADER_OR_FOLLOWER, Error.UNKNOWN_TOPIC_OR_PARTITION, Error.UNKNOWN_LEADER_EPOCH}


@dataclass
class Buffered:
    batches: deque = field(default_factory=deque)       # raw batches not yet decoded
    records: deque = field(default_factory=deque)       # decoded, not yet returned
    size_bytes: int = 0
    batch_end: int = 0                                   # the offset after the batch being returned


class Fetcher:
    def __init__(self, config: ConsumerConfig, cluster: Cluster):
        self.config, self.cluster = config, cluster
        self.positions: dict[TopicPartition, int] = {}
        self.key_ranges: dict[TopicPartition, list[tuple[int, int]]] = {}   # set by the consumer
        self.fetched_bytes = 0       # record bytes received, for measurements
        self._buffers: dict[TopicPartition, Buffered] = {}
        self._connections: dict[int, BrokerConnection] = {}
        self._next_start = 0  # take() starts at a different partition each time: fairness

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.positions[tp] = offset
        self._buffers.pop(tp, None)

    def forget(self, partitions) -> None:
        for tp in partitions:
            self.positions.pop(tp, None)
            self._buffers.pop(tp, None)

    def discard_buffered(self, partitions) -> None:
        for tp in partitions:
            self._buffers.pop(tp, None)

    def buffered_bytes(self) -> int:
        return sum(buffer.size_bytes for buffer in self._buffers.values())

    def take(self, partitions: frozenset[TopicPartition], max_records: int) -> list[ConsumerRecord]:
        """Up to `max_records` buffered records of `partitions`, in offset order per partition."""
        ready = sorted(tp for tp in partitions if tp in self._buffers)
        records: list[ConsumerRecord] = []
        for index in range(len(ready)):
            tp = ready[(self._next_start + index) % len(ready)]
            records += self._take_from(tp, max_records - len(records))
            if len(records) >= max_records:
                break
        self._next_start += 1
        return records

    def _take_from(self, tp: TopicPartition, limit: int) -> list[ConsumerRecord]:
        buffer, taken = self._buffers[tp], []
        while len(taken) < limit and (buffer.records or buffer.batches):
            if not buffer.records:
                batch = buffer.batches.popleft()
                buffer.size_bytes -= len(batch)
                decoded = decode_batch(tp.topic, tp.partition, batch, self.config.receive_message_max_bytes)
                buffer.records.extend(record for record in decoded if record.offset >= self.positions[tp])
                buffer.batch_end = last_offset(batch) + 1
            if buffer.records:
                record = buffer.records.popleft()
                taken.append(record)
                self.positions[tp] = record.offset + 1
            if not buffer.records:
                # The batch is done: the position passes its offsets without records (a key-range fetch
                # sends batches emptied by filtering), as Kafka's consumer moves to the batch's next offset.
                self.positions[tp] = max(self.positions[tp], buffer.batch_end)
        if not buffer.records and not buffer.batches:
            del self._buffers[tp]
        return taken

    def fetch(self, partitions: frozenset[TopicPartition], max_wait_ms: int) -> None:
        wanted = [tp for tp in sorted(partitions) if tp in self.positions and tp not in self._buffers]
        if not wanted or self.buffered_bytes() >= self.config.fetch_max_bytes:
            return
        by_leader: dict[int | None, list[TopicPartition]] = {}
        for tp in wanted:
            by_leader.setdefault(self.cluster.leader(*tp), []).append(tp)
        if None in by_leader:
            self._refresh(by_leader.pop(None))
        for leader, leader_partitions in by_leader.items():
            self._fetch_from(leader, leader_partitions, max_wait_ms // len(by_leader))

    def fetch_partition(self, tp: TopicPartition) -> dict:
        return {"partition": tp.partition, "current_leader_epoch": -1, "fetch_offset": self.positions[tp],
                "last_fetched_epoch": -1, "log_start_offset": -1,
                "partition_max_bytes": self.config.max_partition_fetch_bytes,
                "key_ranges": flat(self.key_ranges.get(tp, ()))}

    def _fetch_from(self, leader: int, partitions: list[TopicPartition], max_wait_ms: int) -> None:
        topics: dict[str, list[dict]] = {}
        for tp in partitions:
            topics.setdefault(tp.topic, []).append(self.fetch_partition(tp))
        answer = self._request(leader, FETCH, timeout_ms=max_wait_ms + self.config.request_timeout_ms,
                               replica_id=CONSUMER_REPLICA, max_wait=max_wait_ms,
                               min_bytes=self.config.fetch_min_bytes, max_bytes=self.config.fetch_max_bytes,
                               isolation_level=READ_UNCOMMITTED, session_id=0, session_epoch=NO_SESSION_EPOCH,
                               topics=[{"topic": topic, "partitions": parts} for topic, parts in topics.items()],
                               forgotten_topics_data=[], rack_id="")
        if answer is None:
            return
        if answer.error_code.name != "none":
            raise KafkaError(answer.error_code.name.upper(), "Fetch failed")
        for topic in answer.responses:
            for part in topic.partitions:
                self._fetched(TopicPartition(topic.topic, part.partition_index), part)

    def _fetched(self, tp: TopicPartition, part) -> None:
        error = error_name(part.error_code)
        if tp not in self.positions:
            return
        if error == Error.OFFSET_OUT_OF_RANGE:
            self.reset([tp], self.config.auto_offset_reset)
        elif error in REFRESH_ERRORS:
            self._refresh([tp])
        elif error != Error.NONE:
            raise KafkaError(error, f"fetching {tp}")
        elif part.records:
            self.fetched_bytes += len(part.records)
            batches = [batch for batch in split_batches(part.records) if last_offset(batch) >= self.positions[tp]]
            if batches:
                self._buffers[tp] = Buffered(deque(batches), deque(), sum(len(batch) for batch in batches))

    def reset(self, partitions, strategy: str) -> None:
        """Positions of `partitions` from ListOffsets: the log start ("earliest") or end ("latest")."""
        if strategy not in TIMESTAMPS:
            raise KafkaError(Error.OFFSET_OUT_OF_RANGE, f"no offset for {sorted(map(str, partitions))} and "
                                                        f"auto.offset.reset is {strategy}")
        by_topic: dict[str, list[dict]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append({"partition_index": tp.partition, "current_leader_epoch": -1,
                                                      "timestamp": TIMESTAMPS[strategy]})
        answer = self._request(self.cluster.leader(*sorted(partitions)[0]), LIST_OFFSETS,
                               replica_id=CONSUMER_REPLICA, isolation_level=READ_UNCOMMITTED,
                               topics=[{"name": topic, "partitions": parts} for topic, parts in by_topic.items()])
        if answer is None:
            raise KafkaError(Error.NETWORK_EXCEPTION, "ListOffsets failed: the connection broke")
        for topic in answer.topics:
            for part in topic.partitions:
                if part.error_code.name != "none":
                    raise KafkaError(part.error_code.name.upper(), f"ListOffsets for {topic.name}:{part.partition_index}")
                self.seek(TopicPartition(topic.name, part.partition_index), part.offset)

    def _request(self, leader: int | None, api_key: int, timeout_ms: int | None = None, **body):
        """The answer, or None when the connection broke (after retry.backoff.ms; reopened at the next request)."""
        connection = self._connections.get(leader)
        try:
            if connection is None:
                connection = self._connections[leader] = self.cluster.connect(leader)
            return connection.receive(connection.send(api_key, VERSIONS[api_key], **body), timeout_ms)
        except (ConnectionFailed, KafkaError) as error:
            if isinstance(error, KafkaError) and error.error != Error.NETWORK_EXCEPTION:
                raise
            self._connections.pop(leader, None)
            time.sleep(self.config.retry_backoff_ms / 1000)
            return None

    def _refresh(self, partitions: list[TopicPartition]) -> None:
        connection = self.cluster.connect()
        try:
            self.cluster.refresh(connection, names=sorted({tp.topic for tp in partitions}))
        finally:
            connection.close()

    def close(self) -> None:
        for connection in self._connections.values():
            connection.close()
        self._connections.clear()
