"""The share coordinator model, clause by clause (spec/share-state.md), in both profiles."""

import pytest

from kipcheck.model.share_state import Batch, Checkpoint, Delta, ShareCoordinator, merge, replay
from kipcheck.model.violation import Violation

BOTH = ("kip", "kafka-4.2")


def initialized(profile="kip", state_epoch=0, start_offset=0, **config):
    coordinator = ShareCoordinator(profile, **config)
    assert coordinator.initialize(state_epoch, start_offset).error == "NONE"
    return coordinator


def batches(coordinator):
    return list(coordinator.state.batches)


@pytest.mark.parametrize("profile", BOTH)
def test_st1_read_answers_the_state(profile):
    """ST-1: A read answers the persisted state."""
    coordinator = initialized(profile, state_epoch=4, start_offset=10)
    coordinator.write(4, -1, [Batch(10, 12, "available", 1)])
    assert coordinator.read() == ("NONE", "ST-1")
    assert (coordinator.state.state_epoch, coordinator.state.start_offset) == (4, 10)
    assert batches(coordinator) == [Batch(10, 12, "available", 1)]


@pytest.mark.parametrize("profile", BOTH)
def test_st2_initialize_replaces_the_state_with_a_new_checkpoint_unless_fenced(profile):
    """ST-2: InitializeShareGroupState writes a checkpoint holding a new state, unless fenced."""
    coordinator = initialized(profile, state_epoch=1)
    coordinator.write(1, -1, [Batch(0, 3, "acknowledged", 1)])
    assert coordinator.initialize(0, 50) == ("FENCED_STATE_EPOCH", "ST-2")
    assert coordinator.initialize(1, 50) == ("NONE", "ST-2"), "an equal epoch re-initializes"
    assert coordinator.initialize(2, 60) == ("NONE", "ST-2")
    assert (coordinator.state.state_epoch, coordinator.state.start_offset, batches(coordinator)) == (2, 60, [])
    assert [type(r).__name__ for r in coordinator.log()] == ["Checkpoint", "Delta", "Checkpoint", "Checkpoint"]
    assert [r.checkpoint_epoch for r in coordinator.log() if isinstance(r, Checkpoint)] == [0, 1, 2]


@pytest.mark.parametrize("profile", BOTH)
def test_st3_write_and_read_before_initialize_are_invalid(profile):
    """ST-3: Writes and reads need an initialized share-partition."""
    coordinator = ShareCoordinator(profile)
    assert coordinator.write(0, 0, []) == ("INVALID_REQUEST", "ST-3")
    assert coordinator.read() == ("INVALID_REQUEST", "ST-3")
    assert coordinator.log() == () and coordinator.state is None


@pytest.mark.parametrize("epoch", [0, 2])
def test_st4_kip_write_needs_the_stored_epoch(epoch):
    """ST-4: A write must carry the stored state epoch."""
    coordinator = initialized("kip", state_epoch=1)
    assert coordinator.write(epoch, -1, [Batch(0, 0, "acknowledged", 1)]) == ("FENCED_STATE_EPOCH", "ST-4")
    assert batches(coordinator) == [] and len(coordinator.log()) == 1
    assert coordinator.ruled("batches") == "ST-4"


def test_st5_kafka_write_is_fenced_only_by_a_higher_stored_epoch_and_never_raises_it():
    """ST-5: A write is fenced only by a higher stored state epoch, and never changes it."""
    coordinator = initialized("kafka-4.2", state_epoch=3)
    assert coordinator.write(2, -1, [Batch(0, 0, "acknowledged", 1)]) == ("FENCED_STATE_EPOCH", "ST-5")
    assert coordinator.write(-1, -1, [Batch(0, 0, "acknowledged", 1)]).error == "NONE"
    assert coordinator.write(9, -1, [Batch(1, 1, "acknowledged", 1)]).error == "NONE"
    assert coordinator.state.state_epoch == 3
    assert coordinator.ruled("state_epoch") == "ST-5"


@pytest.mark.parametrize("profile", BOTH)
def test_st6_start_offset_minus_one_keeps_it_and_a_new_one_discards_below(profile):
    """ST-6: The start offset of a write moves the SPSO, and state below it is discarded."""
    coordinator = initialized(profile, start_offset=100)
    coordinator.write(0, -1, [Batch(100, 109, "available", 1)])
    assert coordinator.state.start_offset == 100
    coordinator.write(0, 105, [])
    assert (coordinator.state.start_offset, batches(coordinator)) == (105, [Batch(105, 109, "available", 1)])
    assert coordinator.ruled("start_offset") == "ST-6"


def test_st7_kip_later_write_wins_even_with_a_lower_count():
    """ST-7: A later write wins, offset by offset."""
    coordinator = initialized("kip")
    coordinator.write(0, -1, [Batch(0, 4, "available", 2)])
    assert coordinator.write(0, -1, [Batch(2, 3, "available", 1)]) == ("NONE", "ST-7")
    assert batches(coordinator) == [Batch(0, 1, "available", 2), Batch(2, 3, "available", 1), Batch(4, 4, "available", 2)]


def test_st7_kip_later_batch_of_one_write_wins():
    """ST-7: A later write wins, offset by offset."""
    assert merge((), [Batch(0, 5, "available", 1), Batch(3, 4, "archived", 1)], 0, "kip") == (
        Batch(0, 2, "available", 1), Batch(3, 4, "archived", 1), Batch(5, 5, "available", 1))


def test_st8_kafka_higher_count_then_higher_state_wins():
    """ST-8: The higher delivery count wins, then the higher state."""
    coordinator = initialized("kafka-4.2")
    coordinator.write(0, -1, [Batch(0, 4, "available", 2)])
    assert coordinator.write(0, -1, [Batch(2, 3, "available", 1), Batch(4, 6, "archived", 2)]) == ("NONE", "ST-8")
    assert batches(coordinator) == [Batch(0, 3, "available", 2), Batch(4, 6, "archived", 2)]
    assert merge((), [Batch(0, 0, "archived", 1), Batch(0, 0, "acknowledged", 1)], 0, "kafka-4.2") == (
        Batch(0, 0, "archived", 1),), "archived (4) outranks acknowledged (2) at equal counts, in any order"


def test_st9_kip_deltas_are_numbered_then_a_checkpoint_holds_the_merged_state():
    """ST-9: A write appends a delta, or a checkpoint after `deltas_per_checkpoint` deltas."""
    coordinator = initialized("kip", deltas_per_checkpoint=2)
    for offset in range(3):
        coordinator.write(0, -1, [Batch(offset, offset, "acknowledged", 1)])
    deltas = [record for record in coordinator.log() if isinstance(record, Delta)]
    assert [(delta.delta_index, delta.checkpoint_epoch, delta.state_epoch) for delta in deltas] == [(0, 0, 0), (1, 0, 0)]
    assert coordinator.log()[-1] == Checkpoint(1, 0, 0, (Batch(0, 2, "acknowledged", 1),))
    coordinator.write(0, -1, [Batch(3, 3, "acknowledged", 1)])
    assert coordinator.log()[-1].delta_index == 0 and coordinator.log()[-1].checkpoint_epoch == 1


def test_st9_kip_default_is_256_deltas_per_checkpoint():
    """ST-9: A write appends a delta, or a checkpoint after `deltas_per_checkpoint` deltas."""
    coordinator = initialized("kip")
    for _ in range(257):
        coordinator.write(0, -1, [Batch(0, 0, "available", 1)])
    assert [type(r).__name__ for r in coordinator.log()[-2:]] == ["Delta", "Checkpoint"]
    assert coordinator.log()[-2].delta_index == 255


def test_st10_kafka_snapshot_after_exactly_the_limit_of_updates():
    """ST-10: A write appends an update, or a snapshot after 500 updates."""
    coordinator = initialized("kafka-4.2", deltas_per_checkpoint=3)
    for offset in range(8):
        coordinator.write(0, -1, [Batch(offset, offset, "acknowledged", 1)])
    kinds = "".join("S" if isinstance(r, Checkpoint) else "u" for r in coordinator.log())
    assert kinds == "SuuuSuuuS"
    assert all(r.state_epoch is None and r.delta_index is None for r in coordinator.log() if isinstance(r, Delta))


def test_st10_kafka_initialize_in_mid_cycle_does_not_reset_the_count():
    """ST-10: A write appends an update, or a snapshot after 500 updates."""
    coordinator = initialized("kafka-4.2", deltas_per_checkpoint=3)
    coordinator.write(0, -1, [])
    coordinator.write(0, -1, [])
    coordinator.initialize(1, 0)
    coordinator.write(1, -1, [])
    coordinator.write(1, -1, [])
    assert "".join("S" if isinstance(r, Checkpoint) else "u" for r in coordinator.log()) == "SuuSuS"


def test_st11_kip_replay_takes_the_latest_checkpoint_and_matching_deltas_only():
    """ST-11: Replay takes the latest checkpoint and the later deltas with its checkpoint epoch."""
    log = [Checkpoint(0, 0, 0, ()), Delta(0, 0, 0, -1, (Batch(0, 0, "available", 1),)),
           Checkpoint(1, 0, 0, (Batch(5, 5, "archived", 1),)),
           Delta(0, 0, 0, -1, (Batch(6, 6, "available", 1),)),  # epoch 0, written late by a deposed coordinator
           Delta(1, 0, 3, 2, (Batch(7, 7, "acknowledged", 1),))]
    state = replay(log, "kip")
    assert (state.start_offset, state.deltas) == (2, 4), "the next DeltaIndex follows the highest replayed"
    assert state.batches == (Batch(5, 5, "archived", 1), Batch(7, 7, "acknowledged", 1))


def test_st12_kafka_replay_applies_every_record_in_order():
    """ST-12: Replay applies every record in order."""
    log = [Checkpoint(0, 0, 0, (Batch(0, 0, "available", 2),)), Delta(7, None, None, -1, (Batch(0, 1, "available", 1),))]
    state = replay(log, "kafka-4.2")
    assert state.batches == (Batch(0, 0, "available", 2), Batch(1, 1, "available", 1)), "no epoch matching; ST-8 merge"


@pytest.mark.parametrize("profile", BOTH)
def test_st11_st12_failover_rebuilds_the_same_state(profile):
    """ST-11, ST-12: whichever the replay rule, failover rebuilds the state held before it."""
    coordinator = initialized(profile, start_offset=100, deltas_per_checkpoint=2)
    for first in range(100, 110, 2):
        coordinator.write(0, first, [Batch(first, first + 3, "available", 1), Batch(first, first, "acknowledged", 1)])
    before = coordinator.state
    coordinator.failover()
    assert coordinator.state == before
    assert coordinator.ruled("batches") == ("ST-11" if profile == "kip" else "ST-12")


@pytest.mark.parametrize("profile", BOTH)
def test_st13_load_in_progress_only_while_loading(profile):
    """ST-13: COORDINATOR_LOAD_IN_PROGRESS is allowed only while the coordinator loads."""
    coordinator = ShareCoordinator(profile)
    coordinator.still_loading()
    coordinator.initialize(0, 0)
    with pytest.raises(Violation) as caught:
        coordinator.still_loading()
    assert caught.value.clause == "ST-13"
    coordinator.failover()
    coordinator.still_loading()
    assert coordinator.ruled("batches") == "ST-13"
    coordinator.read()
    with pytest.raises(Violation):
        coordinator.still_loading()


@pytest.mark.parametrize("profile", BOTH)
def test_st14_the_drafts_available_count_zero_is_stored_as_given(profile):
    """ST-14: The coordinator stores the batches it is given."""
    coordinator = initialized(profile, start_offset=110)
    coordinator.write(0, -1, [Batch(111, 118, "available", 0), Batch(119, 119, "acknowledged", 1)])
    assert batches(coordinator) == [Batch(111, 118, "available", 0), Batch(119, 119, "acknowledged", 1)]


def test_st15_kip_refuses_to_persist_acquired():
    """ST-15: A write cannot persist the Acquired state."""
    coordinator = initialized("kip")
    assert coordinator.write(0, 5, [Batch(0, 0, "acquired", 1)]) == ("INVALID_REQUEST", "ST-15")
    assert coordinator.state.start_offset == 0 and len(coordinator.log()) == 1


def test_st16_kafka_stores_acquired_with_state_id_one():
    """ST-16: Kafka 4.2 stores any state it is given, Acquired included."""
    coordinator = initialized("kafka-4.2")
    coordinator.write(0, -1, [Batch(0, 1, "acquired", 1)])
    coordinator.write(0, -1, [Batch(0, 0, "available", 1), Batch(1, 1, "acknowledged", 1)])
    assert batches(coordinator) == [Batch(0, 0, "acquired", 1), Batch(1, 1, "acknowledged", 1)]


def test_st17_kip_negative_state_epoch_is_invalid():
    """ST-17: A state epoch is never negative."""
    assert ShareCoordinator("kip").initialize(-1, 0) == ("INVALID_REQUEST", "ST-17")
    assert ShareCoordinator("kafka-4.2").initialize(-1, 0).error == "NONE"


@pytest.mark.parametrize("profile", BOTH)
@pytest.mark.parametrize("error", ["COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR", "KAFKA_STORAGE_ERROR"])
def test_st18_a_request_failing_on_storage_changes_nothing(profile, error):
    """ST-18: A request that fails on storage changes nothing."""
    coordinator = initialized(profile, start_offset=10)
    state, log = coordinator.state, coordinator.log()
    coordinator.storage_failure(error)
    assert (coordinator.state, coordinator.log(), coordinator.ruled("batches")) == (state, log, "ST-18")
    coordinator.failover()
    coordinator.storage_failure(error)
    assert coordinator.loading, "a storage error is no answer from the loaded state: loading goes on"


def test_st18_load_in_progress_after_loading_is_a_storage_error_only_under_kafka():
    """ST-18, ST-13: under kafka-4.2 COORDINATOR_LOAD_IN_PROGRESS also answers a failed append."""
    initialized("kafka-4.2").storage_failure("COORDINATOR_LOAD_IN_PROGRESS")
    with pytest.raises(Violation) as caught:
        initialized("kip").storage_failure("COORDINATOR_LOAD_IN_PROGRESS")
    assert caught.value.clause == "ST-13"
