"""The share-partition model (spec/share-partition.md), clause by clause, under both profiles."""

import json
import random

import pytest

from kipcheck.model.share_partition import (
    ACKNOWLEDGED, ACQUIRED, ARCHIVED, AVAILABLE, SharePartition,
)
from kipcheck.model.violation import STORAGE_ERRORS, Violation
from kipcheck.oracle.check import check_lines
from kipcheck.oracle.judges.fast import share_partition as fastcheck

BOTH = ("kip", "kafka-4.2")


def partition(profile="kip", batches=(10,), **config):
    model = SharePartition(profile=profile, **config)
    for count in batches:
        model.append(count)
    return model


def violation(call, *args):
    with pytest.raises(Violation) as caught:
        call(*args)
    return caught.value.clause


def ack(model, actor, *batches, at_ms=0):
    return model.acknowledge(at_ms, actor, list(batches))


def states(model):
    return [(state, count) for _, _, state, count in model.snapshot()]


# SP-1, SP-2, SP-24: the window and the log.

@pytest.mark.parametrize("profile", BOTH)
def test_sp1_sp24_window_starts_empty_at_start_offset(profile):
    """SP-1, SP-24."""
    model = partition(profile, batches=(), start_offset=100)
    assert (model.spso, model.speo, model.log_end_offset, model.snapshot()) == (100, 100, 100, [])


def test_sp2_append_grows_the_log_not_the_window():
    """SP-2."""
    model = partition(batches=(3, 4))
    assert (model.log_end_offset, model.speo) == (7, 0)
    with pytest.raises(ValueError):
        model.append(0)


# SP-3, SP-4: what may be acquired and what acquisition does.

@pytest.mark.parametrize("profile", BOTH)
def test_sp4_acquisition_increments_count_locks_and_extends_speo(profile):
    """SP-4."""
    model = partition(profile, record_lock_duration_ms=1000)
    model.acquire(50, "c1", 10, [[0, 9, 1]])
    assert (model.speo, model.state_of(3), model.owner_of(3), model.lock_deadline_of(3)) == (10, ACQUIRED, "c1", 1050)
    assert ack(model, "c1", (0, 9, "release")).value == "NONE"
    model.acquire(60, "c2", 10, [[0, 9, 2]])
    assert model.delivery_count_of(0) == 2 and model.lock_deadline_of(0) == 1060


@pytest.mark.parametrize("profile", BOTH)
def test_sp4_wrong_delivery_counts_are_caught(profile):
    """SP-4."""
    model = partition(profile)
    assert violation(model.acquire, 0, "c1", 10, [[0, 9, 2]]) == "SP-4"
    model.acquire(0, "c1", 10, [[0, 9, 1]])
    ack(model, "c1", (0, 9, "release"))
    assert violation(model.acquire, 0, "c2", 10, [[0, 9, 1]]) == "SP-4"


@pytest.mark.parametrize("profile", BOTH)
def test_sp3_only_available_records_ascending_within_the_log(profile):
    """SP-3."""
    model = partition(profile)
    model.acquire(0, "c1", 10, [[0, 9, 1]])
    assert violation(model.acquire, 0, "c2", 10, [[5, 5, 2]]) == "SP-3"
    fresh = partition(profile, batches=(5, 5))
    assert violation(fresh.acquire, 0, "c1", 20, [[5, 9, 1], [0, 4, 1]]) == "SP-3"
    assert violation(fresh.acquire, 0, "c1", 20, [[0, 10, 1]]) == "SP-3"
    assert violation(fresh.acquire, 0, "c1", 20, [[3, 2, 1]]) == "SP-3"
    fresh.acquire(0, "c1", 20, [])  # an empty fetch is always allowed
    assert fresh.speo == 0


def test_sp3_kip_may_skip_records_which_enter_the_window_available():
    """SP-3."""
    model = partition()
    model.acquire(0, "c1", 3, [[0, 0, 1], [4, 5, 1]])
    assert model.speo == 6
    assert states(model) == [(ACQUIRED, 1), (AVAILABLE, 0), (ACQUIRED, 1)]
    model.acquire(0, "c2", 3, [[1, 3, 1]])
    assert model.owner_of(2) == "c2"


# SP-5 to SP-8: count and window limits.

def test_sp5_kip_max_records_is_hard():
    """SP-5."""
    model = partition()
    assert violation(model.acquire, 0, "c1", 3, [[0, 3, 1]]) == "SP-5"
    model.acquire(0, "c1", 3, [[0, 2, 1]])


def test_sp6_kafka_acquires_whole_new_batches():
    """SP-6."""
    model = partition("kafka-4.2", batches=(5, 5, 5))
    assert violation(model.acquire, 0, "c1", 3, [[0, 2, 1]]) == "SP-6"      # a partial batch
    assert violation(model.acquire, 0, "c1", 3, [[0, 9, 1]]) == "SP-6"      # a batch too many
    assert violation(model.acquire, 0, "c1", 20, [[5, 9, 1]]) == "SP-6"     # not from SPEO
    model.acquire(0, "c1", 3, [[0, 4, 1]])                                   # soft limit: the whole batch
    model.acquire(0, "c2", 6, [[5, 14, 1]])                                  # 6 reach into 10-14: completed
    assert model.speo == 15


def test_sp6_kafka_does_not_bound_reacquired_records():
    """SP-6."""
    model = partition("kafka-4.2", batches=(10, 10))
    model.acquire(0, "c1", 10, [[0, 9, 1]])
    ack(model, "c1", (0, 9, "release"))
    assert violation(model.acquire, 0, "c2", 5, [[0, 9, 2], [10, 19, 1]]) == "SP-6"
    model.acquire(0, "c2", 5, [[0, 9, 2]])


def test_sp7_kip_window_limit_allows_reacquisition_inside():
    """SP-7."""
    model = partition(max_inflight_records=5)
    assert violation(model.acquire, 0, "c1", 10, [[0, 5, 1]]) == "SP-7"
    model.acquire(0, "c1", 10, [[0, 4, 1]])
    ack(model, "c1", (1, 1, "release"))
    model.acquire(0, "c2", 10, [[1, 1, 2]])
    assert model.acquirable_ranges() == []


def test_sp8_kafka_may_overshoot_the_window_once_then_stops():
    """SP-8."""
    model = partition("kafka-4.2", batches=(5, 5, 5), max_inflight_records=7)
    model.acquire(0, "c1", 10, [[0, 9, 1]])  # room 7 ends inside batch 5-9: completed
    assert model.speo - model.spso == 10
    assert violation(model.acquire, 0, "c2", 10, [[10, 14, 1]]) == "SP-8"


@pytest.mark.parametrize("profile", BOTH)
def test_lowest_acquisition_is_always_allowed(profile):
    rng = random.Random(3)
    model = partition(profile, batches=(), max_inflight_records=40, delivery_count_limit=3, record_lock_duration_ms=50)
    held = {"c1": [], "c2": []}
    for at_ms in range(0, 3000, 5):
        actor = rng.choice(list(held))
        if rng.random() < 0.3:
            model.append(rng.randint(1, 7))
        elif held[actor] and rng.random() < 0.5:
            first, last, _ = held[actor].pop(0)
            ack(model, actor, (first, last, rng.choice(["accept", "release", "reject"])), at_ms=at_ms)
        else:
            wanted = rng.choice([1, 3, 8])
            model.advance(at_ms)  # the answer allowed at at_ms, after its locks fired
            records = model.lowest_acquisition(wanted)
            lowest = [offset for first, last in model.acquirable_ranges() for offset in range(first, last + 1)][:wanted]
            assert [run[0] for run in records][:1] == lowest[:1]
            model.acquire(at_ms, actor, 8, records)  # raises if the answer is not allowed
            held[actor].extend(records)
    assert model.spso > 0


# SP-9 to SP-19: acknowledgements.

@pytest.mark.parametrize("profile", BOTH)
def test_sp9_ack_types_keep_the_count_and_clear_the_owner(profile):
    """SP-9."""
    model = partition(profile, batches=(3,))
    model.acquire(0, "c1", 10, [[0, 2, 1]])
    ruled = ack(model, "c1", (0, 0, "release"), (1, 1, "accept"), (2, 2, "reject"))
    assert ruled == ("NONE", "SP-9")
    assert states(model) == [(AVAILABLE, 1), (ACKNOWLEDGED, 1), (ARCHIVED, 1)]
    assert model.owner_of(0) is None and model.lock_deadline_of(0) is None


@pytest.mark.parametrize("profile", BOTH)
@pytest.mark.parametrize("batches", [[(5, 4, "accept")], [(5, 9, "accept"), (0, 4, "accept")], [(0, 6, "accept"), (5, 9, "accept")]])
def test_sp10_malformed_requests_are_invalid_request(profile, batches):
    """SP-10."""
    model = partition(profile)
    model.acquire(0, "c1", 10, [[0, 9, 1]])
    assert ack(model, "c1", *batches) == ("INVALID_REQUEST", "SP-10")


def test_sp10_gap_is_invalid_request_under_kip():
    """SP-10."""
    model = partition()
    model.acquire(0, "c1", 10, [[0, 9, 1]])
    assert ack(model, "c1", (0, 9, "gap")) == ("INVALID_REQUEST", "SP-10")


def test_sp11_batches_sharing_an_offset():
    """SP-11."""
    for profile, expected in (("kip", ("INVALID_REQUEST", "SP-10")), ("kafka-4.2", ("INVALID_RECORD_STATE", "SP-11"))):
        model = partition(profile)
        model.acquire(0, "c1", 10, [[0, 9, 1]])
        assert ack(model, "c1", (0, 5, "accept"), (5, 9, "accept")) == expected
        assert model.state_of(0) == ACQUIRED


@pytest.mark.parametrize("cls", (SharePartition, fastcheck.SharePartition))
def test_sp11_sp41_a_renewal_starts_no_transition_on_the_offset_it_shares(cls):
    """SP-11 does not apply after a renewal (SP-41): the shared record is still acquired, and judged as any."""
    model = cls(profile="kafka-4.2")
    model.append(10)
    model.acquire(0, "c1", 10, [[0, 9, 1]])
    assert model.acknowledge(0, "c1", [(0, 5, "renew"), (5, 9, "accept")], True) == ("NONE", "SP-41")
    assert model.state_of(0) == ACQUIRED and model.state_of(5) == ACKNOWLEDGED


@pytest.mark.parametrize("cls", (SharePartition, fastcheck.SharePartition))
def test_sp41_a_renewal_failing_on_a_record_keeps_the_records_before_it_renewed(cls):
    """SP-41: Kafka renews record by record; the failing batch's records before the failing one stay renewed,
    a batch failing its cache lookup (past the end, SP-14) renews nothing."""
    model = cls(profile="kafka-4.2", record_lock_duration_ms=1000)
    model.append(5)
    model.append(5)
    model.acquire(0, "c1", 5, [[0, 4, 1]])
    model.acquire(0, "c2", 5, [[5, 9, 1]])
    assert model.acknowledge(600, "c1", [(0, 9, "renew")], True) == ("INVALID_RECORD_STATE", "SP-15")
    assert model.acknowledge(700, "c2", [(5, 12, "renew")], True) == ("INVALID_REQUEST", "SP-14")
    model.advance(1200)
    assert [model.state_of(offset) for offset in (0, 4, 5, 9)] == [ACQUIRED, ACQUIRED, AVAILABLE, AVAILABLE]
    model.advance(1600)
    assert model.state_of(0) == AVAILABLE


@pytest.mark.parametrize("cls", (SharePartition, fastcheck.SharePartition))
def test_sp43_an_acquisition_ends_at_a_throttled_record_it_leaves(cls):
    """SP-43: a throttled record met after others ends the acquisition: nothing above it, no new records."""
    model = cls(profile="kafka-4.2", delivery_count_limit=3)
    for _ in range(3):
        model.append(3)
    model.acquire(0, "c1", 6, [[0, 5, 1]])
    model.acknowledge(1, "c1", [(3, 5, "release")])
    model.acquire(2, "c1", 3, [[3, 5, 2]])
    model.acknowledge(3, "c1", [(0, 5, "release")])
    with pytest.raises(Violation) as raised:
        model.acquire(4, "c2", 20, [[0, 2, 2], [6, 8, 1]])
    assert raised.value.clause == "SP-43"
    assert model.lowest_acquisition(20) == [[0, 2, 2]]
    model.acquire(4, "c2", 20, [[0, 2, 2]])


def test_sp12_kafka_gap_archives():
    """SP-12."""
    model = partition("kafka-4.2")
    model.acquire(0, "c1", 10, [[0, 9, 1]])
    assert ack(model, "c1", (0, 8, "accept"), (9, 9, "gap")).value == "NONE"
    assert model.spso == 10


def test_sp13_kip_past_the_end():
    """SP-13."""
    model = partition()
    model.acquire(0, "c1", 5, [[0, 4, 1]])
    assert ack(model, "c1", (0, 5, "accept")) == ("INVALID_REQUEST", "SP-13")


def test_sp14_kafka_past_the_end_and_the_empty_window():
    """SP-14."""
    model = partition("kafka-4.2", batches=(5, 5))
    model.acquire(0, "c1", 5, [[0, 4, 1]])
    assert ack(model, "c1", (0, 5, "accept")) == ("INVALID_REQUEST", "SP-14")
    ack(model, "c1", (0, 4, "accept"))
    assert ack(model, "c1", (5, 5, "accept")) == ("INVALID_RECORD_STATE", "SP-14")


@pytest.mark.parametrize("profile", BOTH)
def test_sp15_only_the_owner_acknowledges(profile):
    """SP-15."""
    model = partition(profile, batches=(5, 5))
    model.acquire(0, "c1", 5, [[0, 4, 1]])
    model.acquire(0, "c2", 5, [[5, 9, 1]])
    assert ack(model, "c1", (4, 5, "accept")) == ("INVALID_RECORD_STATE", "SP-15")
    ack(model, "c2", (5, 5, "release"))
    assert ack(model, "c2", (5, 5, "accept")) == ("INVALID_RECORD_STATE", "SP-15")


def test_sp15_kip_records_below_spso_are_not_acquired():
    """SP-15."""
    model = partition()
    model.acquire(0, "c1", 10, [[0, 9, 1]])
    ack(model, "c1", (0, 4, "accept"))
    assert ack(model, "c1", (3, 6, "accept")) == ("INVALID_RECORD_STATE", "SP-15")


def test_sp16_sp17_acknowledging_after_the_lock_expired():
    """SP-16, SP-17."""
    for profile, expected in (("kip", ("REQUEST_TIMED_OUT", "SP-16")), ("kafka-4.2", ("INVALID_RECORD_STATE", "SP-17"))):
        model = partition(profile, record_lock_duration_ms=100)
        model.acquire(0, "c1", 10, [[0, 9, 1]])
        assert ack(model, "c1", (0, 9, "accept"), at_ms=100) == expected
        model.acquire(100, "c2", 10, [[0, 9, 2]])
        assert ack(model, "c1", (0, 9, "accept"), at_ms=100) == ("INVALID_RECORD_STATE", "SP-15")


def test_sp16_a_record_archived_at_the_limit_did_not_revert_to_available():
    """SP-16."""
    model = partition(record_lock_duration_ms=100, delivery_count_limit=1)
    model.acquire(0, "c1", 10, [[0, 9, 1]])
    model.advance(100)
    assert model.spso == 10
    assert ack(model, "c1", (0, 9, "accept"), at_ms=100) == ("INVALID_RECORD_STATE", "SP-15")


def test_sp18_kafka_skips_offsets_below_spso():
    """SP-18."""
    model = partition("kafka-4.2")
    model.acquire(0, "c1", 10, [[0, 9, 1]])
    ack(model, "c1", (0, 4, "accept"))
    assert ack(model, "c1", (0, 3, "accept")).value == "NONE"       # wholly below: ignored
    assert ack(model, "c1", (2, 9, "accept")).value == "NONE"       # 2-4 skipped, 5-9 accepted
    assert model.spso == 10


@pytest.mark.parametrize("profile", BOTH)
def test_sp19_a_failed_request_changes_nothing(profile):
    """SP-19."""
    model = partition(profile, batches=(5, 5))
    model.acquire(0, "c1", 5, [[0, 4, 1]])
    model.acquire(0, "c2", 5, [[5, 9, 1]])
    before = model.snapshot()
    assert ack(model, "c1", (0, 4, "accept"), (5, 9, "accept")).value == "INVALID_RECORD_STATE"
    assert model.snapshot() == before and model.spso == 0


# SP-20 to SP-22: locks, the delivery limit, leaving.

@pytest.mark.parametrize("profile", BOTH)
def test_sp20_locks_fire_at_the_deadline_not_before(profile):
    """SP-20."""
    model = partition(profile, record_lock_duration_ms=100)
    model.acquire(10, "c1", 10, [[0, 9, 1]])
    model.advance(109)
    assert model.state_of(0) == ACQUIRED
    model.advance(110)
    assert (model.state_of(0), model.delivery_count_of(0), model.owner_of(0)) == (AVAILABLE, 1, None)


def test_sp20_a_released_and_reacquired_record_keeps_its_new_lock():
    """SP-20."""
    model = partition(record_lock_duration_ms=100)
    model.acquire(0, "c1", 10, [[0, 9, 1]])
    ack(model, "c1", (0, 0, "release"), at_ms=50)
    model.acquire(50, "c1", 1, [[0, 0, 2]])
    model.advance(100)
    assert model.state_of(0) == ACQUIRED and model.state_of(1) == AVAILABLE


@pytest.mark.parametrize("profile", BOTH)
def test_sp21_the_limit_archives_on_release_expiry_and_leave(profile):
    """SP-21."""
    model = partition(profile, batches=(3,), delivery_count_limit=2, record_lock_duration_ms=100)
    model.acquire(0, "c1", 10, [[0, 2, 1]])
    ack(model, "c1", (0, 2, "release"))
    model.acquire(0, "c2", 10, [[0, 2, 2]])
    ack(model, "c2", (2, 2, "release"))
    model.leave(0, "c2")  # 0 and 1 leave acquired at count 2: archived too
    assert states(model) == []
    assert model.spso == 3
    expiring = partition(profile, batches=(1,), delivery_count_limit=1, record_lock_duration_ms=100)
    expiring.acquire(0, "c1", 1, [[0, 0, 1]])
    expiring.advance(100)
    assert expiring.spso == 1


@pytest.mark.parametrize("profile", BOTH)
def test_sp22_leave_releases_only_the_actors_records(profile):
    """SP-22."""
    model = partition(profile, batches=(2, 2))
    model.acquire(0, "c1", 2, [[0, 1, 1]])
    model.acquire(0, "c2", 2, [[2, 3, 1]])
    model.leave(0, "c1")
    assert [(s[0], s[1], s[2]) for s in model.snapshot()] == [(0, 1, AVAILABLE), (2, 3, ACQUIRED)]
    assert model.delivery_count_of(0) == 1


# SP-23 to SP-25: SPSO, SPEO and the snapshot.

@pytest.mark.parametrize("profile", BOTH)
def test_sp23_spso_passes_terminal_records_and_stops_at_the_first_other(profile):
    """SP-23."""
    model = partition(profile)
    model.acquire(0, "c1", 10, [[0, 9, 1]])
    ack(model, "c1", (1, 3, "accept"))
    assert model.spso == 0
    ack(model, "c1", (0, 0, "reject"), (5, 5, "accept"))
    assert model.spso == 4
    ack(model, "c1", (4, 4, "accept"), (6, 9, "accept"))
    assert (model.spso, model.speo, model.snapshot()) == (10, 10, [])


def test_sp25_compare_snapshot_ignores_run_splitting_and_names_the_deciding_clause():
    """SP-25."""
    model = partition(record_lock_duration_ms=100)
    model.acquire(0, "c1", 10, [[0, 9, 1]])
    model.compare_snapshot([(0, 4, ACQUIRED, 1), (5, 9, ACQUIRED, 1)])
    assert violation(model.compare_snapshot, [(0, 8, ACQUIRED, 1)]) == "SP-25"
    assert violation(model.compare_snapshot, [(0, 9, ACQUIRED, 2)]) == "SP-4"
    model.advance(100)
    assert violation(model.compare_snapshot, [(0, 9, ACQUIRED, 1)]) == "SP-20"


def test_the_per_record_lists_follow_the_window_not_the_trace():
    model = partition(batches=())
    for at_ms in range(20000):
        model.append(5)
        model.acquire(at_ms, "c1", 5, [[at_ms * 5, at_ms * 5 + 4, 1]])
        ack(model, "c1", (at_ms * 5, at_ms * 5 + 4, "accept"), at_ms=at_ms)
    assert model.spso == 100000 and len(model._records) < 5000


# The judge: the trace format's share-partition ops.

def trace(*steps, profile="kip", config=None):
    header = {"format": "kipcheck-trace", "version": 1, "machine": "share-partition", "profile": profile,
              "config": config or {}}
    return [json.dumps(header)] + [json.dumps({"step": n, "at_ms": s.pop("at_ms", 0), "actor": s.pop("actor", "c1"), **s})
                                   for n, s in enumerate(steps, start=1)]


@pytest.mark.parametrize("step, reason", [
    ({"op": "acquire", "args": {"max_records": 5}}, "needs observed.records"),
    ({"op": "acquire", "args": {"max_records": 0}, "observed": {"records": []}}, "must be >= 1"),
    ({"op": "acquire", "args": {"max_records": 5}, "observed": {"records": [[0, 1]]}}, "[first, last, delivery_count]"),
    ({"op": "acknowledge", "args": {"batches": [{"first": 0, "last": 1, "type": "extend"}]}}, "type one of"),
    ({"op": "acknowledge", "args": {"batches": [], "renew": 1}}, "args.renew of 'acknowledge' must be a boolean"),
    ({"op": "acknowledge", "args": {"batches": [], "in_fetch": "yes"}}, "args.in_fetch of 'acknowledge' must be"),
    ({"op": "append", "args": {"count": "3"}}, "must be an integer"),
    ({"op": "acknowledge", "args": {"batches": []}, "observed": {"error": ["NONE"]}}, "observed.error"),
    ({"op": "check", "observed": {"states": [[0, 0, "locked", 1]]}}, "state one of"),
])
def test_judge_rejects_malformed_steps(step, reason):
    verdict = check_lines(trace(step))
    assert verdict.status == "malformed" and reason in verdict.reason, verdict.summary()


def test_judge_fires_locks_before_the_steps_op_and_judges_the_error():
    steps = [
        {"op": "append", "args": {"count": 2}},
        {"op": "acquire", "args": {"max_records": 2}, "observed": {"records": [[0, 1, 1]]}},
        {"at_ms": 100, "op": "acknowledge", "args": {"batches": [{"first": 0, "last": 1, "type": "accept"}]},
         "observed": {"error": "NONE"}},
    ]
    verdict = check_lines(trace(*steps, config={"record_lock_duration_ms": 100}))
    assert (verdict.status, verdict.step, verdict.clause) == ("violation", 3, "SP-16")
    assert verdict.allowed == "error=REQUEST_TIMED_OUT"


def test_judge_rejects_an_unknown_config_key():
    verdict = check_lines(trace(config={"max_inflight": 3}))
    assert verdict.status == "malformed" and "unknown config key" in verdict.reason


# SP-26: a share-partition reloaded after a restart.

LOADED = [[10, 11, "acknowledged", 1], [12, 13, "available", 2], [15, 15, "archived", 5], [16, 17, "available", 1]]


@pytest.mark.parametrize("profile", BOTH)
def test_sp26_the_window_starts_from_the_loaded_runs_and_holes_are_available(profile):
    """SP-26, SP-23: SPSO passes the leading acknowledged run; the hole at 14 is available, count 0."""
    model = partition(profile, batches=(), start_offset=10, initial_state=LOADED)
    assert (model.spso, model.speo, model.log_end_offset) == (12, 18, 18)
    assert model.snapshot() == [[12, 13, AVAILABLE, 2], [14, 14, AVAILABLE, 0], [15, 15, ARCHIVED, 5],
                                [16, 17, AVAILABLE, 1]]
    assert model.acquirable_ranges() == [(12, 14), (16, 17)]
    assert [model.deciding_clause(offset) for offset in (12, 14, 15)] == ["SP-26"] * 3


@pytest.mark.parametrize("profile", BOTH)
def test_sp26_loaded_records_are_reacquired_one_by_one_with_count_plus_one(profile):
    """SP-26, SP-3, SP-4: terminal loaded records are never acquired again; appends start at SPEO."""
    model = partition(profile, batches=(), start_offset=10, initial_state=LOADED)
    assert violation(model.acquire, 0, "c1", 10, [[15, 15, 6]]) == "SP-3"
    assert violation(model.acquire, 0, "c1", 10, [[12, 13, 2]]) == "SP-4"
    model.acquire(0, "c1", 1, [[13, 13, 3]])  # one record of a loaded run: no batch boundary applies
    model.append(3)
    assert model.lowest_acquisition(10) == [[12, 12, 3], [14, 14, 1], [16, 17, 2], [18, 20, 1]]
    model.compare_snapshot([(12, 12, AVAILABLE, 2), (13, 13, ACQUIRED, 3), (14, 14, AVAILABLE, 0),
                            (15, 15, ARCHIVED, 5), (16, 17, AVAILABLE, 1)])


def test_sp26_a_snapshot_that_forgets_the_loaded_state_names_sp26():
    """SP-26, SP-25: a loaded record not acquired since is decided by SP-26."""
    model = partition(batches=(), start_offset=10, initial_state=LOADED)
    assert violation(model.compare_snapshot, [(12, 13, AVAILABLE, 0), (14, 17, AVAILABLE, 0)]) == "SP-26"
    assert violation(model.compare_snapshot, [(12, 13, AVAILABLE, 2), (14, 14, AVAILABLE, 0),
                                              (15, 15, ACKNOWLEDGED, 5), (16, 17, AVAILABLE, 1)]) == "SP-26"


@pytest.mark.parametrize("profile", BOTH)
def test_sp26_a_loaded_window_over_the_limit_takes_no_new_records(profile):
    """SP-26, SP-7, SP-8: re-acquisition inside the oversized window is allowed, new records are not."""
    model = partition(profile, batches=(), max_inflight_records=2, initial_state=[[0, 3, AVAILABLE, 1]])
    model.append(2)
    first, last = model.acquirable_new_records()
    assert first == 4 and last < first
    model.acquire(0, "c1", 4, [[0, 3, 2]])
    assert violation(model.acquire, 0, "c2", 2, [[4, 5, 1]]) == ("SP-8" if profile == "kafka-4.2" else "SP-7")


@pytest.mark.parametrize("initial_state, reason", [
    ([[0, 1, "acquired", 1]], "acquired is never persisted"),
    ([[3, 1, "available", 0]], "first must be <= last"),
    ([[0, 2, "available", 0], [2, 3, "archived", 1]], "ascending, non-overlapping"),
    ([[4, 5, "available", 0]], "start at or above start_offset 5"),
    ([[5, 6, "available"]], "[first, last, state, delivery_count]"),
    ([[5, 6, "available", -1]], "delivery_count >= 0"),
    ("5-6 available", "must be list"),
])
def test_sp26_judge_rejects_a_malformed_initial_state(initial_state, reason):
    """SP-26: a malformed initial_state makes the trace malformed (exit 2), with the reason."""
    verdict = check_lines(trace(config={"start_offset": 5, "initial_state": initial_state}))
    assert verdict.status == "malformed" and reason in verdict.reason, verdict.summary()


# SP-27: storage errors.

@pytest.mark.parametrize("profile", BOTH)
def test_sp27_a_failed_acknowledgement_changes_nothing_but_locks_still_expire(profile):
    """SP-27: an acknowledgement failing on storage changes no record; expired locks fire as at every step."""
    model = partition(profile, batches=(4,), record_lock_duration_ms=100)
    model.acquire(0, "c1", 4, [[0, 3, 1]])
    model.storage_failure(10, "c1", [(0, 3, "accept")])
    assert states(model) == [(ACQUIRED, 1)] and model.deciding_clause(0) == "SP-27"
    assert ack(model, "c1", (0, 1, "accept"), at_ms=20).value == "NONE", "the client retries"
    model.storage_failure(150, "c1", [(2, 3, "accept")])
    assert (model.spso, states(model)) == (2, [(AVAILABLE, 1)])
    assert violation(model.compare_snapshot, [(2, 3, ACKNOWLEDGED, 1)]) == "SP-20"


@pytest.mark.parametrize("fast", [False, True], ids=["reference", "fast"])
@pytest.mark.parametrize("error", sorted(STORAGE_ERRORS))
def test_sp27_every_storage_error_is_allowed_and_judged_unchanged(error, fast):
    """SP-27: the judge allows each storage error and keeps judging from the unchanged state."""
    steps = [{"op": "append", "args": {"count": 2}},
             {"op": "acquire", "args": {"max_records": 2}, "observed": {"records": [[0, 1, 1]]}},
             {"op": "acknowledge", "args": {"batches": [{"first": 0, "last": 1, "type": "accept"}]},
              "observed": {"error": error}},
             {"op": "check", "observed": {"spso": 0, "speo": 2, "states": [[0, 1, "acquired", 1]]}}]
    assert check_lines(trace(*steps), reference=not fast).status == "ok"
    steps[-1]["observed"] = {"states": [[0, 1, "acknowledged", 1]]}
    assert check_lines(trace(*steps), reference=not fast).clause == "SP-27"


def released_beside_a_fetch(*between: dict, profile: str = "kafka-4.2") -> list[str]:
    """Record 3, delivered twice (limit 3: throttled, SP-43), is released by an acknowledgement riding on a
    ShareFetch (`in_fetch`), whose acquisition takes 6 to 8 and leaves 3 out, as Kafka 4.2.2 did while the
    release was still being written (spec/kafka-findings.md)."""
    steps = [{"op": "append", "args": {"count": 3}} for _ in range(3)] + [
        {"op": "acquire", "args": {"max_records": 6}, "observed": {"records": [[0, 5, 1]]}},
        {"op": "acknowledge", "args": {"batches": [{"first": 0, "last": 2, "type": "accept"},
                                                   {"first": 3, "last": 5, "type": "release"}]}},
        {"op": "acquire", "args": {"max_records": 3}, "observed": {"records": [[3, 5, 2]]}},
        {"op": "acknowledge", "args": {"batches": [{"first": 3, "last": 3, "type": "release"},
                                                   {"first": 4, "last": 5, "type": "accept"}], "in_fetch": True}},
        *between,
        {"op": "acquire", "at_ms": 1, "args": {"max_records": 3}, "observed": {"records": [[6, 8, 1]]}}]
    return trace(*steps, profile=profile, config={"delivery_count_limit": 3, "record_lock_duration_ms": 1000})


@pytest.mark.parametrize("reference", (False, True))
def test_sp67_the_acquisition_of_a_sharefetch_may_leave_out_what_its_acknowledgements_released(reference):
    """SP-67: Kafka acquires for a ShareFetch while its acknowledgements are written: a record they released may
    still be in transition, so leaving it out, throttled or not, is no SP-43 violation. The same acquisition in a
    later request (any step between), by another member, or after an acknowledgement not riding on the fetch is
    judged by SP-43 as before."""
    assert check_lines(released_beside_a_fetch(), reference=reference).status == "ok"
    later = released_beside_a_fetch({"op": "tick", "at_ms": 1})
    assert check_lines(later, reference=reference).clause == "SP-43"
    plain = [line.replace(', "in_fetch": true', "") for line in released_beside_a_fetch()]
    assert check_lines(plain, reference=reference).clause == "SP-43"
    other_actor = [line.replace('"at_ms": 1, "actor": "c1"', '"at_ms": 1, "actor": "c2"')
                   for line in released_beside_a_fetch()]
    assert check_lines(other_actor, reference=reference).clause == "SP-43"
