"""Kafka 4.2's share coordinator records in a share-state trace (ST-30..ST-35): leader epochs, reads that
write, tombstones, cold-partition snapshots, pruning. Expected answers are read from ShareCoordinatorShard.java."""

import json

import pytest

from kipcheck.model.share_state import Batch, Checkpoint, Delta, ShareCoordinator, Tombstone, replay
from kipcheck.oracle.check import check_lines


def lines(profile, *steps):
    header = {"format": "kipcheck-trace", "version": 1, "machine": "share-state", "profile": profile}
    return [json.dumps(header)] + [json.dumps({"step": number, "at_ms": 0, "actor": "a", **step})
                                   for number, step in enumerate(steps, 1)]


INITIALIZE = {"op": "initialize", "args": {"state_epoch": 0, "start_offset": 0}}


@pytest.mark.parametrize("step", [
    {"op": "write", "args": {"state_epoch": 0, "start_offset": -1, "batches": [], "leader_epoch": 1}},
    {"op": "read", "args": {"leader_epoch": 1}},
    {"op": "initialize", "args": {"state_epoch": 0, "start_offset": 0}, "observed": {"record": "snapshot"}},
    {"op": "delete"},
    {"op": "cold_snapshot"},
    {"op": "prune"},
])
def test_st30_kip_has_none_of_the_coordinators_own_records(step):
    verdict = check_lines(lines("kip", INITIALIZE, step))
    assert verdict.status == "malformed" and "ST-30" in verdict.reason and verdict.line == 3


def test_st30_the_same_steps_are_judged_under_kafka_4_2():
    steps = [INITIALIZE, {"op": "read", "args": {"leader_epoch": 1}, "observed": {"record": "update"}},
             {"op": "cold_snapshot", "observed": {"record": "none"}}, {"op": "prune"},
             {"op": "delete", "observed": {"error": "NONE", "record": "tombstone"}}]
    assert check_lines(lines("kafka-4.2", *steps)).status == "ok"


def test_st31_an_unknown_record_kind_is_malformed():
    verdict = check_lines(lines("kafka-4.2", {**INITIALIZE, "observed": {"record": "checkpoint"}}))
    assert verdict.status == "malformed" and "observed.record" in verdict.reason


def test_st32_a_write_never_stores_its_leader_epoch_and_a_read_does():
    coordinator = ShareCoordinator("kafka-4.2")
    coordinator.initialize(0, 0)
    assert coordinator.write(0, -1, [Batch(0, 0, "acknowledged", 1)], leader_epoch=7).error == "NONE"
    assert coordinator.state.leader_epoch == 0  # an initialize records 0; a write stores none
    assert coordinator.write(0, -1, [], leader_epoch=1).error == "NONE"  # not fenced: only 0 is recorded
    coordinator.read(leader_epoch=5)
    assert (coordinator.appended, coordinator.state.leader_epoch) == ("update", 5)
    assert coordinator.write(0, -1, [], leader_epoch=4).error == "FENCED_LEADER_EPOCH"
    assert coordinator.write(0, -1, [], leader_epoch=-1).error == "NONE"  # -1 skips the check on write
    assert coordinator.read(leader_epoch=-1).error == "FENCED_LEADER_EPOCH"  # but not on read (Kafka 4.2)
    coordinator.read(leader_epoch=5)
    assert coordinator.appended == "none"
    coordinator.initialize(1, 0)  # a new state keeps the highest leader epoch recorded
    assert coordinator.state.leader_epoch == 5
    coordinator.failover()
    assert coordinator.state.leader_epoch == 5


def test_st33_a_tombstone_removes_the_state_and_replay_honours_it():
    coordinator = ShareCoordinator("kafka-4.2")
    coordinator.initialize(2, 0)
    coordinator.read(leader_epoch=3)
    coordinator.delete()
    assert coordinator.state is None and isinstance(coordinator.log()[-1], Tombstone)
    assert coordinator.read().clause == "ST-33"
    coordinator.initialize(1, 5)  # no state epoch left to fence it; snapshot epoch restarts at 0
    assert (coordinator.state.checkpoint_epoch, coordinator.state.state_epoch, coordinator.state.leader_epoch) == (0, 1, 0)
    assert replay(coordinator.log(), "kafka-4.2") == coordinator.state


def test_st34_a_cold_snapshot_needs_the_interval_and_does_not_reset_the_update_count():
    coordinator = ShareCoordinator("kafka-4.2", deltas_per_checkpoint=3, cold_snapshot_interval_ms=100)
    coordinator.initialize(0, 0)
    coordinator.write(0, -1, [Batch(0, 0, "acknowledged", 1)])
    coordinator.advance(99)
    coordinator.cold_snapshot()
    assert coordinator.appended == "none"
    coordinator.advance(100)
    coordinator.cold_snapshot()
    assert coordinator.appended == "snapshot" and coordinator.state.deltas == 1 and coordinator.state.cold
    coordinator.advance(1000)
    coordinator.cold_snapshot()
    assert coordinator.appended == "none"


def test_st35_pruning_keeps_what_replay_needs_and_restarts_the_update_count():
    coordinator = ShareCoordinator("kafka-4.2", deltas_per_checkpoint=3, cold_snapshot_interval_ms=0)
    coordinator.initialize(0, 0)
    coordinator.write(0, -1, [Batch(0, 0, "acknowledged", 1)])
    coordinator.cold_snapshot()
    before = coordinator.state
    coordinator.prune()
    assert [type(record) for record in coordinator.log()] == [Checkpoint]
    coordinator.failover()
    assert (coordinator.state.batches, coordinator.state.deltas) == (before.batches, 0)
    assert before.deltas == 1
    coordinator.write(0, -1, [])
    assert isinstance(coordinator.log()[-1], Delta) and coordinator.update_count_clause == "ST-35"
