"""Every write path under injected disk faults: nothing acknowledged unless written, files left as they were.

Each path (partition segments, topics.json, the share-state log and its
compaction, share-partition acknowledgements and initialization, traces) is
driven through a FaultyDisk (tests/faulty_disk.py) that makes short writes,
ENOSPC, EIO on fsync and undo failures happen on demand. The last test runs
the segment checks against deliberately broken storage (a short count
ignored, no undo, an undo never retried) and asserts each is caught.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
from functools import partial
from pathlib import Path

import harness  # tests/harness.py
import pytest

from kipcheck.impl.broker.log import PartitionLog
from kipcheck.impl.broker.metadata import TopicError, Topics
from kipcheck.impl.share.config import ShareConfig
from kipcheck.impl.share.coordinator import LOG_NAME, ShareCoordinator
from kipcheck.impl.share.partition import ACKNOWLEDGED, PersisterError, SharePartition
from kipcheck.impl.share.tracing import TraceWriter
from kipcheck.impl.storage import AppendFile, Storage, StorageError
from kipcheck.impl.tracing import INCOMPLETE_SUFFIX

record_batch = harness.record_batch
BATCH_BYTES = len(record_batch(3))
KEY = "g1:orders:0"


def segment_bytes(directory: Path) -> bytes:
    return b"".join(path.read_bytes() for path in sorted(directory.glob("*.log")))


def replayed_copy(directory: Path) -> Path:
    """A copy of `directory` to open as a restarted broker would (opening cuts torn tails: never the original)."""
    copy = directory.with_name(directory.name + "-replayed")
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(directory, copy)
    return copy


def reopened_ranges(directory: Path) -> list[tuple[int, int]]:
    return PartitionLog.open(replayed_copy(directory)).batch_ranges()


# -- partition segments ------------------------------------------------------------------------


def check_a_refused_write_leaves_the_segment_as_it_was(storage: Storage, disk, directory: Path, faults,
                                                       flush_interval_messages: int = 1 << 62) -> None:
    log = PartitionLog.open(directory, storage=storage, flush_interval_messages=flush_interval_messages)
    log.append(record_batch(3))
    before = segment_bytes(directory)
    for operation, error in faults:
        disk.fail(operation, error)
    with pytest.raises(StorageError):
        log.append(record_batch(5))
    assert segment_bytes(directory) == before and log.end_offset == 3 and log.batch_ranges() == [(0, 2)]
    assert log.append(record_batch(2)) == 3
    assert reopened_ranges(directory) == [(0, 2), (3, 4)]


check_a_short_write_is_never_acknowledged = partial(
    check_a_refused_write_leaves_the_segment_as_it_was, faults=[("short_write", errno.ENOSPC), ("write", errno.ENOSPC)])
check_a_failed_fsync_is_cut_back = partial(
    check_a_refused_write_leaves_the_segment_as_it_was, faults=[("sync", errno.EIO)], flush_interval_messages=1)


def check_a_refused_undo_blocks_appends_until_it_succeeds(storage: Storage, disk, directory: Path) -> None:
    log = PartitionLog.open(directory, storage=storage)
    log.append(record_batch(3))
    good = segment_bytes(directory)
    disk.fail("short_write")
    disk.fail("write", errno.ENOSPC)
    disk.fail("truncate", errno.EIO, times=2)
    for _ in range(2):   # the torn half stays until the disk lets it be cut: nothing may land after it
        with pytest.raises(StorageError):
            log.append(record_batch(2))
        assert segment_bytes(directory).startswith(good) and log.end_offset == 3
    assert reopened_ranges(directory) == [(0, 2)]   # a kill -9 now: the replay cuts the torn half
    assert log.append(record_batch(4)) == 3
    assert segment_bytes(directory)[:len(good)] == good
    assert reopened_ranges(directory) == [(0, 2), (3, 6)]


SEGMENT_CHECKS = {"short write": check_a_short_write_is_never_acknowledged,
                  "EIO on fsync": check_a_failed_fsync_is_cut_back,
                  "refused undo": check_a_refused_undo_blocks_appends_until_it_succeeds}


@pytest.mark.parametrize("check", SEGMENT_CHECKS.values(), ids=SEGMENT_CHECKS.keys())
def test_segment_writes(check, tmp_path, faulty_disk):
    check(Storage(faulty_disk), faulty_disk, tmp_path / "t-0")
    assert faulty_disk.fired > 0


@pytest.mark.parametrize("operation", ["make_dirs", "open", "sync_dir", "write", "short_write"])
def test_a_segment_that_cannot_be_created_is_not_used(operation, tmp_path, faulty_disk):
    storage = Storage(faulty_disk)
    directory = tmp_path / "t-0"
    log = PartitionLog.open(directory, storage=storage, segment_bytes=BATCH_BYTES)
    for expected_segments in (1, 2):       # a partition's first segment, then a rolled one
        end = log.end_offset
        faulty_disk.fail(operation)
        if operation == "short_write":
            faulty_disk.fail("write")
        with pytest.raises(StorageError):
            log.append(record_batch(3))
        assert faulty_disk.fired
        assert log.end_offset == end and len(log.segments) == expected_segments   # listed, empty: taken next
        assert log.segments[-1].file.size == 0 and log.segments[-1].base_offset == end
        assert log.append(record_batch(3)) == end and len(log.segments) == expected_segments
    assert reopened_ranges(directory) == [(0, 2), (3, 5)]


def test_a_roll_the_disk_refused_leaves_no_segment_that_cuts_later_ones_at_replay(tmp_path, faulty_disk):
    # The refused roll's file stays on disk (created, then cut back to nothing). A smaller batch still fits the
    # old segment; were it written there, the empty file would name an offset inside the old segment, and the
    # replay would take it for a gap and drop every segment after it, the acknowledged ones too.
    directory = tmp_path / "t-0"
    log = PartitionLog.open(directory, storage=Storage(faulty_disk), segment_bytes=BATCH_BYTES + len(record_batch(1)))
    assert log.append(record_batch(3)) == 0
    faulty_disk.fail("write")
    with pytest.raises(StorageError):
        log.append(record_batch(3))
    assert log.append(record_batch(1)) == 3 and log.append(record_batch(3)) == 4 and log.append(record_batch(3)) == 7
    assert reopened_ranges(directory) == log.batch_ranges() == [(0, 2), (3, 3), (4, 6), (7, 9)]


def test_a_torn_tail_the_disk_will_not_cut_at_open_is_cut_before_the_next_append(tmp_path, faulty_disk):
    directory = tmp_path / "t-0"
    log = PartitionLog.open(directory)
    log.append(record_batch(2))
    log.close()
    segment = next(directory.glob("*.log"))
    with open(segment, "ab") as file:
        file.write(record_batch(3)[:30])       # a crash mid-write
    faulty_disk.fail("truncate", errno.EIO)
    reopened = PartitionLog.open(directory, storage=Storage(faulty_disk))
    assert reopened.end_offset == 2 and faulty_disk.fired == 1
    assert reopened.append(record_batch(1)) == 2
    assert reopened_ranges(directory) == [(0, 1), (2, 2)]


def test_segment_files_open_on_demand_within_the_bound(tmp_path):
    storage = Storage(open_files_max=3)
    descriptors_before = len(os.listdir("/proc/self/fd"))
    logs = [PartitionLog.open(tmp_path / f"t-{index}", storage=storage, segment_bytes=BATCH_BYTES)
            for index in range(6)]
    for _ in range(4):
        for log in logs:
            log.append(record_batch(3))
    assert all(len(log.segments) == 4 for log in logs)
    assert len(os.listdir("/proc/self/fd")) - descriptors_before <= 3 and storage.open_count() <= 3
    for log in logs:                       # every segment still reads back, reopened as needed
        assert len(log.read(0, 1 << 20)) == 4 * BATCH_BYTES
    for log in logs:
        log.close()
    reopened = [PartitionLog.open(tmp_path / f"t-{index}", storage=storage) for index in range(6)]
    assert all(log.end_offset == 12 for log in reopened) and storage.open_count() <= 3


def test_a_share_coordinator_dropped_without_close_keeps_no_descriptor(tmp_path):
    """As after a crash, a test drops a coordinator and replays its log with a new one: the dropped one's
    descriptors (plain integers) are closed when it is collected, not kept for the life of the process."""
    import gc

    descriptors_before = len(os.listdir("/proc/self/fd"))
    for _ in range(20):
        coordinator = ShareCoordinator(tmp_path, ShareConfig(), fsync=False)
        coordinator.initialize(KEY, 0, 0)
        del coordinator
    gc.collect()
    assert len(os.listdir("/proc/self/fd")) - descriptors_before <= 1


# -- topics.json -------------------------------------------------------------------------------


@pytest.mark.parametrize("operation", ["open", "write", "short_write", "sync", "rename"])
def test_a_topic_the_disk_refuses_is_not_created(operation, tmp_path, faulty_disk):
    topics = Topics(tmp_path, Storage(faulty_disk))
    topics.create("kept", 1)
    saved = (tmp_path / "topics.json").read_bytes()
    faulty_disk.fail(operation, errno.ENOSPC)
    if operation == "short_write":
        faulty_disk.fail("write")
    with pytest.raises(TopicError) as raised:
        topics.create("refused", 2)
    assert raised.value.error == "KAFKA_STORAGE_ERROR"
    assert topics.get("refused") is None and (tmp_path / "topics.json").read_bytes() == saved
    assert sorted(path.name for path in tmp_path.iterdir()) == ["topics.json"]
    assert topics.create("refused", 2).partitions == 2
    assert json.loads((tmp_path / "topics.json").read_text()) == {"kept": 1, "refused": 2}


# -- the share-state log -----------------------------------------------------------------------


FAULTS = {
    "short write": [("short_write", errno.ENOSPC, 1), ("write", errno.ENOSPC, 1)],
    "ENOSPC": [("write", errno.ENOSPC, 1)],
    "EIO on fsync": [("sync", errno.EIO, 1)],
    "undo refused twice": [("short_write", errno.ENOSPC, 1), ("write", errno.ENOSPC, 1), ("truncate", errno.EIO, 2)],
}


def replayed_state(data_dir: Path, config: ShareConfig):
    return ShareCoordinator(replayed_copy(data_dir), config).read(KEY)


@pytest.mark.parametrize("fault", list(FAULTS))
def test_a_share_state_write_the_disk_refuses_changes_nothing_and_recovers(fault, tmp_path, faulty_disk):
    config, data_dir = ShareConfig(), tmp_path / "share-state"
    coordinator = ShareCoordinator(data_dir, config, storage=Storage(faulty_disk))
    assert coordinator.initialize(KEY, 0, 0) == "NONE"
    assert coordinator.write(KEY, 0, -1, [(0, 4, ACKNOWLEDGED, 1)]) == "NONE"
    state, stored = coordinator.read(KEY), (data_dir / LOG_NAME).read_bytes()
    for operation, error, times in FAULTS[fault]:
        faulty_disk.fail(operation, error, path=LOG_NAME, times=times)
    for _ in range(2 if fault == "undo refused twice" else 1):
        assert coordinator.write(KEY, 0, -1, [(5, 9, ACKNOWLEDGED, 1)]) == "COORDINATOR_NOT_AVAILABLE"
        assert coordinator.read(KEY) == state == replayed_state(data_dir, config)
    assert (data_dir / LOG_NAME).read_bytes().startswith(stored)
    assert coordinator.write(KEY, 0, -1, [(5, 9, ACKNOWLEDGED, 1)]) == "NONE"   # no permanent failure
    assert replayed_state(data_dir, config) == coordinator.read(KEY) != state
    assert faulty_disk.fired == sum(times for _, _, times in FAULTS[fault])


def test_a_new_share_state_log_the_disk_refuses_is_created_later(tmp_path, faulty_disk):
    faulty_disk.fail("make_dirs", path="share-state")
    coordinator = ShareCoordinator(tmp_path / "share-state", ShareConfig(), storage=Storage(faulty_disk))
    assert coordinator.initialize(KEY, 0, 0) == "COORDINATOR_NOT_AVAILABLE"
    assert coordinator.read(KEY)[0] == "INVALID_REQUEST"
    assert coordinator.initialize(KEY, 0, 0) == "NONE"
    assert ShareCoordinator(tmp_path / "share-state", ShareConfig()).read(KEY)[0] == "NONE"


def test_a_compaction_the_disk_refuses_keeps_the_log_and_is_tried_again(tmp_path, faulty_disk):
    config = ShareConfig(updates_per_snapshot=1000)
    coordinator = ShareCoordinator(tmp_path, config, storage=Storage(faulty_disk), compact_bytes=2048)
    coordinator.initialize(KEY, 0, 0)
    faulty_disk.fail("write", path=LOG_NAME + ".tmp", times=None)
    for offset in range(60):
        assert coordinator.write(KEY, 0, -1, [(offset, offset, ACKNOWLEDGED, 1)]) == "NONE"
    assert (tmp_path / LOG_NAME).stat().st_size > 2048 and not (tmp_path / (LOG_NAME + ".tmp")).exists()
    assert replayed_state(tmp_path, config) == coordinator.read(KEY) and faulty_disk.fired > 1
    faulty_disk.heal()
    assert coordinator.write(KEY, 0, -1, [(60, 60, ACKNOWLEDGED, 1)]) == "NONE"
    assert (tmp_path / LOG_NAME).stat().st_size <= 2048
    assert replayed_state(tmp_path, config) == coordinator.read(KEY)


def test_an_acknowledgement_whose_state_write_fails_changes_nothing_and_is_traced(tmp_path, faulty_disk):
    config = ShareConfig(auto_offset_reset="earliest")
    writer = TraceWriter(tmp_path / "traces", config)
    coordinator = ShareCoordinator(tmp_path / "data", config, storage=Storage(faulty_disk), trace_writer=writer)
    partition = SharePartition.load(config, coordinator, KEY, 0, 0, 0, trace_writer=writer)
    partition.on_append(0, 10, 1)
    assert partition.acquire("m1", 10, 2) == [(0, 9, 1)]
    faulty_disk.fail("sync", errno.EIO, path=LOG_NAME)
    assert partition.acknowledge("m1", [(0, 9, "accept")], 3) == "COORDINATOR_NOT_AVAILABLE"
    assert partition.states() == [(0, 9, "acquired", 1)] and partition.spso == 0
    assert partition.acknowledge("m1", [(0, 9, "accept")], 4) == "NONE"
    assert partition.spso == 10
    writer.close()
    steps = {path.name.split(".")[0]: [json.loads(line) for line in path.read_text().splitlines()[1:]]
             for path in writer.paths()}
    acknowledgements = [step["observed"] for step in steps["share-partition"] if step["op"] == "acknowledge"]
    writes = [step["observed"] for step in steps["share-state"] if step["op"] == "write"]
    assert acknowledgements == writes == [{"error": "COORDINATOR_NOT_AVAILABLE"}, {"error": "NONE"}]


def test_a_share_partition_whose_initialization_fails_is_not_loaded(tmp_path, faulty_disk):
    config = ShareConfig()
    coordinator = ShareCoordinator(tmp_path, config, storage=Storage(faulty_disk))
    faulty_disk.fail("write", path=LOG_NAME)
    with pytest.raises(PersisterError) as raised:
        SharePartition.load(config, coordinator, KEY, 0, 5, 0)
    assert raised.value.error == "COORDINATOR_NOT_AVAILABLE"
    assert SharePartition.load(config, coordinator, KEY, 0, 5, 1).spso == 5


# -- traces ------------------------------------------------------------------------------------


def test_a_trace_line_the_disk_refuses_sets_the_trace_aside_whole(tmp_path, faulty_disk):
    config = ShareConfig()
    writer = TraceWriter(tmp_path, config, Storage(faulty_disk))
    refused, kept = SharePartition(config, trace=writer.partition("g:a:0")), SharePartition(config, trace=writer.partition("g:b:0"))
    for partition in (refused, kept):
        partition.on_append(0, 5, 1)
    faulty_disk.fail("short_write", path="g%3Aa%3A0")
    faulty_disk.fail("write", path="g%3Aa%3A0")
    refused.acquire("m1", 5, 2)                 # no exception: the answer never depends on the trace
    refused.acquire("m1", 5, 3)
    kept.acquire("m1", 5, 2)
    writer.close()
    aside = tmp_path / ("share-partition.g%3Aa%3A0.jsonl" + INCOMPLETE_SUFFIX)
    assert [path.name for path in writer.paths()] == ["share-partition.g%3Ab%3A0.jsonl"]
    assert [json.loads(line).get("op") for line in aside.read_text().splitlines()] == [None, "append"]
    assert aside.read_bytes().endswith(b"\n")


# -- the checks catch broken storage -----------------------------------------------------------


class IgnoresShortCounts(AppendFile):
    """The bug found in the broker: one pwrite, its count ignored."""

    def append(self, data: bytes, sync: bool = False) -> int:
        position = self.size
        self.storage.disk.write(self._descriptor(), data, position)
        self.size += len(data)
        return position


class NeverUndoes(AppendFile):
    def _cut(self) -> None:
        self._overhang = False


class BrokenForever(AppendFile):
    """The share-state log's old rule: after one refused undo, every later write fails."""

    def append(self, data: bytes, sync: bool = False) -> int:
        if getattr(self, "broken", False):
            raise StorageError(self.path, "write", OSError(errno.EIO, "broken"))
        try:
            return super().append(data, sync)
        except StorageError:
            self.broken = self._overhang
            raise


@pytest.mark.parametrize("broken, check", [
    (IgnoresShortCounts, check_a_short_write_is_never_acknowledged),
    (NeverUndoes, check_a_failed_fsync_is_cut_back),
    (BrokenForever, check_a_refused_undo_blocks_appends_until_it_succeeds),
], ids=["short count ignored", "no undo", "undo never retried"])
def test_broken_storage_is_caught(broken, check, tmp_path, faulty_disk):
    class BrokenStorage(Storage):
        def append_file(self, path, size=None, found_size=None):
            return broken(self, Path(path), size, found_size)

    with pytest.raises((AssertionError, pytest.fail.Exception, StorageError)):
        check(BrokenStorage(faulty_disk), faulty_disk, tmp_path / "t-0")
