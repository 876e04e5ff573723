"""Committed offsets on disk: replayed after a restart, torn tails dropped, failed writes answered and not applied."""

from __future__ import annotations

import pytest

from kipcheck.impl.groups import offsets as offsets_module
from kipcheck.impl.groups.config import GroupConfig
from kipcheck.impl.groups.coordinator import GroupCoordinator, OffsetCommit
from kipcheck.impl.groups.offsets import LOG_NAME, CommittedOffset, OffsetStore, StorageError
from kipcheck.impl.storage.durable_log import DurableLog


def test_offsets_survive_a_reopen_and_deletes_are_replayed_too(tmp_path):
    store = OffsetStore(tmp_path)
    store.commit("g", {("t", 0): CommittedOffset(10, 3, "meta", 1234), ("t", 1): CommittedOffset(4)})
    store.commit("g", {("t", 0): CommittedOffset(12)})
    store.commit("h", {("u", 0): CommittedOffset(1)})
    store.delete("h", [("u", 0), ("u", 9)])
    store.close()
    again = OffsetStore(tmp_path)
    assert again.offsets("g") == {("t", 0): CommittedOffset(12), ("t", 1): CommittedOffset(4)}
    assert again.groups() == ["g"] and again.truncated_bytes == 0
    again.close()


def test_a_torn_commit_is_dropped_whole_at_open(tmp_path):
    store = OffsetStore(tmp_path)
    store.commit("g", {("t", 0): CommittedOffset(1)})
    store.commit("g", {("t", 0): CommittedOffset(2), ("t", 1): CommittedOffset(2)})
    store.close()
    path = tmp_path / LOG_NAME
    path.write_bytes(path.read_bytes()[:-3])  # the crash cut the last record
    again = OffsetStore(tmp_path)
    assert again.offsets("g") == {("t", 0): CommittedOffset(1)}  # all of the torn commit is gone, none half-applied
    assert again.truncated_bytes > 0
    again.close()


def test_compaction_keeps_exactly_the_current_offsets(tmp_path):
    store = OffsetStore(tmp_path, fsync=False, compact_bytes=2000)
    for offset in range(200):
        store.commit("g", {("t", offset % 3): CommittedOffset(offset)})
    assert (tmp_path / LOG_NAME).stat().st_size < 2500
    expected = store.offsets("g")
    store.close()
    again = OffsetStore(tmp_path)
    assert again.offsets("g") == expected == {("t", 0): CommittedOffset(198), ("t", 1): CommittedOffset(199),
                                              ("t", 2): CommittedOffset(197)}
    again.close()


class FailingDisk:
    def append(self, payload):
        raise OSError(28, "No space left on device")

    def size_bytes(self):
        return 0


def test_a_failed_write_answers_not_coordinator_and_changes_nothing(tmp_path):
    coordinator = GroupCoordinator(tmp_path, GroupConfig(), lambda topic: 1, lambda: ["t"], lambda group_id: False)
    commit = OffsetCommit("g", "", None, -1, 9, {("t", 0): CommittedOffset(5)})
    assert coordinator.commit(commit, 0) == {("t", 0): "NONE"}
    healthy, coordinator.offsets._log = coordinator.offsets._log, FailingDisk()
    assert coordinator.commit(OffsetCommit("g", "", None, -1, 9, {("t", 0): CommittedOffset(9)}), 0) \
        == {("t", 0): "NOT_COORDINATOR"}
    assert coordinator.fetch("g", None, -1, [("t", 0)]) == ("NONE", {("t", 0): CommittedOffset(5)})
    assert coordinator.delete_offsets("g", [("t", 0)]) == ("NOT_COORDINATOR", {})
    with pytest.raises(StorageError):
        coordinator.offsets.commit("g", {("t", 0): CommittedOffset(9)})
    coordinator.offsets._log = healthy
    coordinator.close()
    reopened = OffsetStore(tmp_path)
    assert reopened.offsets("g") == {("t", 0): CommittedOffset(5)}
    reopened.close()


def test_metadata_above_the_limit_is_refused_per_partition(tmp_path):
    coordinator = GroupCoordinator(tmp_path, GroupConfig(offset_metadata_max_bytes=4), lambda topic: 2, lambda: ["t"],
                                   lambda group_id: False, fsync=False)
    commit = OffsetCommit("g", "", None, -1, 9, {("t", 0): CommittedOffset(1, -1, "12345"),
                                                  ("t", 1): CommittedOffset(1, -1, "1234")})
    assert coordinator.commit(commit, 0) == {("t", 0): "OFFSET_METADATA_TOO_LARGE", ("t", 1): "NONE"}
    assert coordinator.fetch("g", None, -1, None) == ("NONE", {("t", 1): CommittedOffset(1, -1, "1234")})
    assert coordinator.commit(OffsetCommit("", "", None, -1, 9, {("t", 0): CommittedOffset(1)}), 0) \
        == {("t", 0): "INVALID_GROUP_ID"}
    assert coordinator.commit(OffsetCommit("new", "m", None, 3, 9, {("t", 0): CommittedOffset(1)}), 0) \
        == {("t", 0): "GROUP_ID_NOT_FOUND"}
    assert coordinator.commit(OffsetCommit("new", "m", None, 3, 8, {("t", 0): CommittedOffset(1)}), 0) \
        == {("t", 0): "ILLEGAL_GENERATION"}
    coordinator.close()


def test_offset_delete_refuses_share_groups_unknown_groups_and_subscribed_topics(tmp_path):
    coordinator = GroupCoordinator(tmp_path, GroupConfig(), lambda topic: 2, lambda: ["t"],
                                   lambda group_id: group_id == "share", fsync=False)
    assert coordinator.delete_offsets("nothing", [("t", 0)]) == ("GROUP_ID_NOT_FOUND", {})
    assert coordinator.delete_offsets("share", [("t", 0)]) == ("GROUP_ID_NOT_FOUND", {})
    assert coordinator.commit(OffsetCommit("share", "", None, -1, 9, {("t", 0): CommittedOffset(1)}), 0) \
        == {("t", 0): "GROUP_ID_NOT_FOUND"}
    coordinator.commit(OffsetCommit("g", "", None, -1, 9, {("t", 0): CommittedOffset(1), ("u", 0): CommittedOffset(2)}), 0)
    assert coordinator.delete_offsets("g", [("t", 0)]) == ("NONE", {("t", 0): "NONE"})
    assert coordinator.fetch("g", None, -1, None) == ("NONE", {("u", 0): CommittedOffset(2)})
    coordinator.close()


def test_a_commit_too_large_for_one_record_is_refused_whole(tmp_path, monkeypatch):
    monkeypatch.setattr(offsets_module, "MAX_RECORD_BYTES", 400)
    coordinator = GroupCoordinator(tmp_path, GroupConfig(), lambda topic: 100, lambda: ["t"], lambda group_id: False,
                                   fsync=False)
    huge = {("t", partition): CommittedOffset(partition, -1, "x" * 30) for partition in range(20)}
    assert set(coordinator.commit(OffsetCommit("g", "", None, -1, 9, huge), 0).values()) == {"UNKNOWN_SERVER_ERROR"}
    assert coordinator.fetch("g", None, -1, None) == ("NONE", {})
    coordinator.close()


def test_compaction_splits_a_large_group_into_records_that_replay_to_the_same_offsets(tmp_path, monkeypatch):
    monkeypatch.setattr(offsets_module, "MAX_RECORD_BYTES", 400)
    store = OffsetStore(tmp_path, fsync=False, compact_bytes=3000)
    for partition in range(60):
        store.commit("g", {("t", partition): CommittedOffset(partition, -1, "meta")})
    expected = store.offsets("g")
    store.close()
    payloads = list(DurableLog(tmp_path / LOG_NAME).replay())
    assert len(payloads) > 1 and max(len(payload) for payload in payloads) <= 400
    again = OffsetStore(tmp_path)
    assert again.offsets("g") == expected and len(expected) == 60
    again.close()
