"""Broker: the state one broker process serves, its timers, and its start and clean stop.

Owns the topics (metadata.Topics), the partition logs (log.PartitionLog), the
share groups (groups.ShareGroups), the classic and KIP-848 consumer groups
with their committed offsets (impl/groups' GroupCoordinator, offsets in
`<data dir>/consumer-offsets/`), individual commit (impl/ic's IcCoordinator,
whose primary log is the consumer groups' offsets log, its IC log beside it)
with the key-range filter cache of Fetch, and impl/share's engine: a
ShareSessionCache, a ShareCoordinator in `<data dir>/share-state/`, and one
SharePartition per (group, topic, partition), loaded lazily on first
ShareFetch. The request handlers live in handlers/; everything runs on one
asyncio loop, so no two handlers ever touch the state at once.

Storage: every file the broker writes (segments, topics.json, the share-state
log, traces) goes through one impl/storage.Storage, which keeps at most
`open_files_max()` files open. `storage_factory` builds it (default Storage);
a test may inject one over a faulty disk, never the production path.

Timers (one task, every TICK_MS): expire acquisition locks whose deadline
passed, expire group members past their session timeout, fire the consumer
groups' timers (join phase, sync, session and rebalance timeouts), fsync the
logs every `log.flush.interval.ms` (a log whose fsync fails is tried again next
time). Waiting fetches sleep on `changed()`, which wakes
them when records are produced or become available again; no fetch waits
longer than limits.MAX_WAIT_MS.

Clock: `now_ms()` is a monotonic millisecond clock (never decreasing, as the
engine and the trace format require).
"""

from __future__ import annotations

import asyncio
import json
import logging
import resource
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

from kipcheck.impl.broker.clock import now_ms
from kipcheck.impl.broker.config import BrokerConfig, advertised_address
from kipcheck.impl.broker.groups import ShareGroups
from kipcheck.impl.broker.handlers import all_handlers
from kipcheck.impl.broker.limits import reserve_file_descriptors
from kipcheck.impl.broker.log import PartitionLog
from kipcheck.impl.broker.metadata import Topic, TopicError, Topics
from kipcheck.impl.broker.server import Connection, Server, release_frame
from kipcheck.impl.broker.share_engine import ShareEngine
from kipcheck.impl.broker.transactions import TransactionCoordinator
from kipcheck.impl.groups.coordinator import GroupCoordinator
from kipcheck.impl.ic.coordinator import CapReached, IcCoordinator
from kipcheck.impl.ic.key_range_cache import KeyRangeCache
from kipcheck.impl.share.config import ShareConfig
from kipcheck.impl.storage import OPEN_FILES_MAX, Storage, StorageError
from kipcheck.impl.storage.durable_log import DurableLog
from kipcheck.model.errors import Error

log = logging.getLogger("kipcheck.broker")

TICK_MS = 50


def open_files_max() -> int:
    """OPEN_FILES_MAX, or half the process's file limit if that is lower (connections need the rest)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return OPEN_FILES_MAX if soft == resource.RLIM_INFINITY else max(1, min(OPEN_FILES_MAX, soft // 2))


class Broker:
    storage_factory: Callable[..., Storage] = Storage

    def __init__(self, data_dir: Path, config: BrokerConfig, share_config: ShareConfig,
                 trace_dir: Path | None = None, trace_state: bool = False):
        self.data_dir = Path(data_dir)
        self.config = config
        self.share_config = share_config
        self.storage = self.storage_factory(open_files_max=open_files_max())
        self.storage.make_dirs(self.data_dir)
        self.topics = Topics(self.data_dir, self.storage)
        self.logs: dict[tuple[str, int], PartitionLog] = {}
        self.groups = ShareGroups(self._partition_count, config.session_timeout_ms, config.max_group_size,
                                  id_taken=lambda group_id: self.consumer_groups.share_group_refused(group_id))
        self.consumer_groups = GroupCoordinator(
            self.data_dir / "consumer-offsets", config.groups, self._partition_count,
            lambda: [topic.name for topic in self.topics], lambda group_id: group_id in self.groups.groups,
            trace_dir=trace_dir, storage=self.storage)
        # The key-range assignor splits a topic's partitions only where the topic and the broker allow it (KR-4).
        self.consumer_groups.consumer.key_share_topic = \
            lambda name: self.topics.get(name) is not None and self.topics.get(name).accept_range_fetch
        self.consumer_groups.consumer.coordinator_allows_ic = config.ic.accept_individual_commit
        self.ic = IcCoordinator(self.data_dir / "consumer-offsets", config.ic, trace_dir=trace_dir,
                                on_cap_reached=self._ic_cap_reached, offsets=self.consumer_groups.offsets,
                                now_ms=now_ms(), storage=self.storage)
        self.key_range_cache = KeyRangeCache(config.ic.key_range_cache_bytes)
        self.engine = ShareEngine(share_config, self.data_dir / "share-state", self.storage, self.partition_log,
                                  self.groups.has_subscribed, trace_dir, trace_state)
        self.host, self.port = "127.0.0.1", 0
        self.advertised = (self.host, self.port)  # what Metadata and FindCoordinator tell clients
        self.server: Server | None = None
        # num.io.threads: the CPU-heavy pure work of a request (decoding a large frame, reading produced or
        # filtered records) runs here, so the event loop keeps serving other clients meanwhile.
        self.workers = ThreadPoolExecutor(config.io_threads, thread_name_prefix="kipcheck-io")
        self._change = asyncio.Event()
        self._timer: asyncio.Task | None = None
        for topic in self.topics:
            for partition in range(topic.partitions):
                self.partition_log(topic.name, partition)
        self.transactions = TransactionCoordinator(self.data_dir / "transactions", self._write_marker,
                                                   storage=self.storage)
        # DeleteRecords: every log start offset it set, one record each (Kafka's log-start-offset checkpoint).
        self._log_starts = DurableLog(self.data_dir / "log-start-offsets.log", storage=self.storage)
        for payload in self._log_starts.replay():
            record = json.loads(payload)
            self.partition_log(record["topic"], record["partition"]).deleted_below = record["offset"]

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self, host: str, port: int) -> tuple[str, int]:
        reserve_file_descriptors(self.config.max_connections, self.storage.open_files_max)
        self.server = Server(all_handlers(self), self.config, self.connection_closed, self.workers)
        self.host, self.port = await self.server.start(host, port)
        self.advertised = advertised_address(self.config.advertised_listener) if self.config.advertised_listener \
            else (self.host, self.port)
        self._timer = asyncio.create_task(self._tick_forever())
        return self.host, self.port

    async def stop(self) -> None:
        """Clean stop: no new requests, then traces flushed and logs and share state fsync'd."""
        if self.server is not None:
            await self.server.stop()
        if self._timer is not None:
            self._timer.cancel()
        # Workers touch no broker state: a clean stop does not wait for one still reading a large batch.
        self.workers.shutdown(wait=False, cancel_futures=True)
        self.engine.close()
        self.ic.close()
        self.consumer_groups.close()
        self.transactions.close()
        self._log_starts.close()
        for partition_log in self.logs.values():
            try:
                partition_log.close()
            except StorageError as error:
                log.error("log %s not fsync'd at stop: %s", partition_log.directory.name, error)
        self.storage.close()

    # -- topics and logs -------------------------------------------------------------------

    def topic(self, name: str, create: bool = False) -> Topic | None:
        """The topic, auto-created with `num.partitions` when asked and allowed."""
        topic = self.topics.get(name)
        if topic is None and create and self.config.auto_create_topics:
            try:
                topic = self.create_topic(name, self.config.default_partitions)
            except TopicError as error:
                log.warning("cannot auto-create topic %r: %s %s", name, error.error, error)
                return None
        return topic

    def check_partition_budget(self, partitions: int) -> None:
        """TopicError POLICY_VIOLATION if `partitions` more would take the broker past max.broker.partitions."""
        hosted, limit = sum(topic.partitions for topic in self.topics), self.config.max_broker_partitions
        if hosted + partitions > limit:
            raise TopicError(Error.POLICY_VIOLATION, f"the broker hosts {hosted} partitions: {partitions} more would "
                                                     f"exceed max.broker.partitions ({limit})")

    def create_topic(self, name: str, partitions: int, configs: dict[str, str] | None = None) -> Topic:
        if self.topics.get(name) is None:  # an existing name is TOPIC_ALREADY_EXISTS whatever the budget
            self.check_partition_budget(partitions)
        topic = self.topics.create(name, partitions, configs)
        for partition in range(partitions):
            self.partition_log(name, partition)
        log.info("created topic %s with %d partition(s), id %s", name, partitions, topic.topic_id)
        return topic

    def partition_log(self, topic: str, partition: int) -> PartitionLog:
        key = (topic, partition)
        if key not in self.logs:
            self.logs[key] = PartitionLog.open(self.data_dir / "logs" / f"{topic}-{partition}",
                                               self.config.segment_bytes, self.config.flush_interval_messages,
                                               self.storage)
        return self.logs[key]

    def _write_marker(self, topic: str, partition: int, producer_id: int, producer_epoch: int, commit: bool) -> None:
        """The transaction coordinator's marker for one partition (StorageError if the disk refuses it)."""
        partition_log = self.partition_log(topic, partition)
        end_before = partition_log.end_offset
        if partition_log.append_marker(producer_id, producer_epoch, commit) is not None:
            self.engine.on_produced(topic, partition, partition_log.batch_details(end_before))
            self.notify_changed()

    def delete_records(self, topic: str, partition: int, offset: int) -> int:
        """DeleteRecords: the log start offset moves to `offset` (-1: the log end), durably; returns the new
        log start offset. ValueError for an offset past the log end (OFFSET_OUT_OF_RANGE); StorageError."""
        partition_log = self.partition_log(topic, partition)
        offset = partition_log.end_offset if offset == -1 else offset
        if not 0 <= offset <= partition_log.end_offset:
            raise ValueError(f"offset {offset} is past the log end {partition_log.end_offset}")
        if offset > partition_log.start_offset:
            self._log_starts.append(json.dumps({"topic": topic, "partition": partition, "offset": offset}).encode())
            partition_log.deleted_below = offset
            self.engine.on_log_start(topic, partition, offset)
            self.notify_changed()
        return partition_log.start_offset

    def find_log(self, topic: str, partition: int) -> PartitionLog | None:
        known = self.topics.get(topic)
        return self.partition_log(topic, partition) if known and 0 <= partition < known.partitions else None

    def _ic_cap_reached(self, event: CapReached) -> None:
        """The seed's "callout rebalance": the partition's owners are fenced and the group rebalances it."""
        fenced = self.consumer_groups.fence_owners(event.group, event.topic, event.partition, now_ms())
        log.warning("group %s: %s-%d holds %d individual-commit ranges (cap %d, stable offset %d): fenced %s",
                    event.group, event.topic, event.partition, event.ranges_held, event.max_ranges,
                    event.stable_offset, fenced or "no KIP-848 member")

    def _partition_count(self, name: str) -> int:
        topic = self.topics.get(name)
        return topic.partitions if topic else 0

    async def off_loop(self, function: Callable[..., Any], *arguments: Any) -> Any:
        """`function(*arguments)` on a worker thread (num.io.threads); it must not touch the broker's state."""
        return await asyncio.get_running_loop().run_in_executor(self.workers, function, *arguments)

    # -- waiting ---------------------------------------------------------------------------

    def notify_changed(self) -> None:
        """Records were produced or became available: wake every waiting fetch."""
        self._change.set()
        self._change = asyncio.Event()

    async def wait_changed(self, timeout_ms: int) -> None:
        if timeout_ms <= 0:
            return
        release_frame()
        try:
            await asyncio.wait_for(self._change.wait(), timeout_ms / 1000)
        except asyncio.TimeoutError:
            pass

    # -- connections and timers --------------------------------------------------------------

    def connection_closed(self, connection: Connection) -> None:
        if self.engine.connection_closed(connection, now_ms()):
            self.notify_changed()

    async def _tick_forever(self) -> None:
        last_flush_ms = now_ms()
        while True:
            await asyncio.sleep(TICK_MS / 1000)
            try:
                at_ms = now_ms()
                if self.engine.expire_locks(at_ms):
                    self.notify_changed()
                for group_id, member_id in self.groups.expire(at_ms):
                    log.info("share group %s: member %s expired", group_id, member_id)
                for event in self.consumer_groups.tick(at_ms):
                    log.info("%s", event)
                if at_ms - last_flush_ms >= self.config.flush_interval_ms:
                    self._flush_logs()
                    last_flush_ms = at_ms
            except Exception:
                log.exception("broker timer failed")

    def _flush_logs(self) -> None:
        for partition_log in self.logs.values():
            if partition_log.unflushed:
                try:
                    partition_log.flush()
                except StorageError as error:
                    log.warning("log %s not fsync'd (tried again next time): %s", partition_log.directory.name, error)
