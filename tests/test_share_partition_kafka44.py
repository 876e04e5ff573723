"""The share-partition model under kafka-4.4 (spec/share-partition.md SP-70..SP-74), clause by clause: a group's
configs read at each transition, renewals a group refuses, a dead-letter queue's archiving state and its phase 2;
and the judge's reading of them (what the trace format extensions refuse, and the answers phase 2 may explain)."""

import json

import pytest

from kipcheck.model.errors import Error
from kipcheck.model.share_partition import (
    ACKNOWLEDGED, ARCHIVED, ARCHIVING, AVAILABLE, SharePartition, dead_letters_seen,
)
from kipcheck.model.violation import Violation
from kipcheck.oracle.check import check_lines

KAFKA44 = "kafka-4.4"


def partition(batches=(10,), **config):
    model = SharePartition(profile=KAFKA44, **config)
    for count in batches:
        model.append(count)
    return model


def delivered(model, actor, offset, count, at_ms=0):
    """`actor` acquires the record at `offset` alone, its delivery count becoming `count`."""
    model.acquire(at_ms, actor, 1, [[offset, offset, count]])


def states(model):
    return [tuple(run) for run in model.snapshot()]


def header(profile=KAFKA44, **config):
    return json.dumps({"format": "kipcheck-trace", "version": 1, "machine": "share-partition", "profile": profile,
                       "config": config})


def steps(*bodies):
    return [json.dumps({"step": number, "at_ms": number * 10, "actor": "c1", **body})
            for number, body in enumerate(bodies, 1)]


APPEND = {"op": "append", "args": {"count": 3}}


# SP-70: a group's configs, read at each transition.

def test_sp70_a_lowered_limit_archives_no_available_record_until_it_leaves_acquired_again():
    """SP-70, SP-21: a record released three times stays available when the limit drops to 2; it is delivered once
    more (count 4, past the limit) and archived when released."""
    model = partition(batches=(1,), delivery_count_limit=5)
    for count in (1, 2, 3):
        delivered(model, "c1", 0, count)
        assert model.acknowledge(0, "c1", [(0, 0, "release")]).value == Error.NONE
    model.alter_config({"delivery_count_limit": 2})
    assert states(model) == [(0, 0, AVAILABLE, 3)] and model.deciding_clause(0) == "SP-70"
    delivered(model, "c2", 0, 4)
    model.acknowledge(0, "c2", [(0, 0, "release")])
    assert (model.spso, model.speo) == (1, 1)
    with pytest.raises(Violation) as caught:
        delivered(model, "c1", 0, 5)
    assert caught.value.clause == "SP-21"


@pytest.mark.parametrize("leaves", ["lock expiry", "leave"])
def test_sp70_the_limit_in_force_decides_at_a_lock_expiry_and_a_leave(leaves):
    """SP-70, SP-20, SP-22: the limit read when the record leaves acquired, not when it was acquired."""
    model = partition(batches=(1,), delivery_count_limit=5, record_lock_duration_ms=100)
    delivered(model, "c1", 0, 1)
    model.alter_config({"delivery_count_limit": 1})
    model.advance(100) if leaves == "lock expiry" else model.leave(0, "c1")
    assert (model.spso, model.speo) == (1, 1)


def test_sp70_a_raised_limit_lets_a_record_be_delivered_more():
    """SP-70: raised from 2 to 4, a record released at count 2 is available again."""
    model = partition(batches=(1,), delivery_count_limit=2)
    delivered(model, "c1", 0, 1)
    model.acknowledge(0, "c1", [(0, 0, "release")])
    delivered(model, "c1", 0, 2)
    model.alter_config({"delivery_count_limit": 4})
    model.acknowledge(0, "c1", [(0, 0, "release")])
    assert states(model) == [(0, 0, AVAILABLE, 2)]


def test_sp70_sp8_the_in_flight_limit_in_force_bounds_new_records():
    """SP-70, SP-8: lowered below the window, no new record; raised again, new records return."""
    model = partition(batches=(4, 4, 4), max_inflight_records=100)
    model.acquire(0, "c1", 4, [[0, 3, 1]])
    model.alter_config({"max_inflight_records": 4})
    assert model.lowest_acquisition(10) == []
    with pytest.raises(Violation) as caught:
        model.acquire(0, "c2", 10, [[4, 7, 1]])
    assert caught.value.clause == "SP-8"
    model.alter_config({"max_inflight_records": 8})
    assert model.lowest_acquisition(10) == [[4, 7, 1]]


def test_sp70_sp43_the_throttle_threshold_follows_the_limit():
    """SP-70, SP-43: with limit 10 a record delivered 3 times is not throttled; lowered to 4 (threshold 2) it is, and
    no new record comes beside it."""
    model = partition(batches=(1, 1), delivery_count_limit=10)
    for count in (1, 2, 3):
        delivered(model, "c1", 0, count)
        model.acknowledge(0, "c1", [(0, 0, "release")])
    assert model.lowest_acquisition(2) == [[0, 0, 4], [1, 1, 1]]
    model.alter_config({"delivery_count_limit": 4})
    assert model.lowest_acquisition(2) == [[0, 0, 4]]
    with pytest.raises(Violation) as caught:
        model.acquire(0, "c1", 2, [[0, 0, 4], [1, 1, 1]])
    assert caught.value.clause == "SP-43"


@pytest.mark.parametrize("profile", ["kip", "kafka-4.2"])
def test_sp70_group_configs_are_kafka_44s_alone(profile):
    """SP-70: Kafka 4.2 refuses these group configs as unknown; under kip and kafka-4.2 the step is no trace."""
    model = SharePartition(profile=profile)
    with pytest.raises(ValueError, match="only under profile kafka-4.4"):
        model.alter_config({"delivery_count_limit": 2})
    for setting in ({"dead_letter_queue": True}, {"renew_acknowledge_enable": False}):
        with pytest.raises(ValueError, match="only under profile kafka-4.4"):
            SharePartition(profile=profile, **setting)
    lines = [header(profile), *steps({"op": "alter_config", "args": {"delivery_count_limit": 2}})]
    verdict = check_lines(lines)
    assert verdict.status == "malformed" and "kafka-4.4" in verdict.reason


@pytest.mark.parametrize("args, reason", [
    ({}, "one or more of"),
    ({"delivery_count_limit": 0}, "delivery_count_limit must be an integer >= 1"),
    ({"max_inflight_records": "100"}, "max_inflight_records must be an integer >= 1"),
    ({"dead_letter_queue": 1}, "dead_letter_queue must be true or false"),
])
def test_sp70_a_bad_alter_config_is_malformed(args, reason):
    """SP-70: alter_config takes the four group configs, each of its type; anything else is malformed (exit 2)."""
    verdict = check_lines([header(), *steps({"op": "alter_config", "args": args})])
    assert verdict.status == "malformed" and reason in verdict.reason, verdict.reason


def test_sp70_an_unknown_alter_config_key_is_malformed():
    verdict = check_lines([header(), *steps({"op": "alter_config", "args": {"record_lock_duration_ms": 5000}})])
    assert verdict.status == "malformed" and "record_lock_duration_ms" in verdict.reason


# SP-71: Kafka 4.4's ranges.

@pytest.mark.parametrize("config, step, clause", [
    ({"delivery_count_limit": 25}, None, None),
    ({"delivery_count_limit": 26}, None, "SP-71"),
    ({"max_inflight_records": 99}, None, "SP-71"),
    ({"delivery_count_limit": 11}, None, None),
    ({}, {"delivery_count_limit": 25}, None),
    ({}, {"max_inflight_records": 10001}, "SP-71"),
])
def test_sp71_kafka_44_bounds_the_header_and_every_alter_config(config, step, clause):
    """SP-71: a group's delivery limit may reach 25 (Kafka 4.2's could not pass 10, SP-45)."""
    body = [{"op": "alter_config", "args": step}] if step else []
    verdict = check_lines([header(**config), *steps(APPEND, *body)])
    assert (verdict.clause, verdict.step) == (clause, (2 if step else 0) if clause else None)
    waived = check_lines([header(**config, kafka_ranges="waive"), *steps(APPEND, *body)])
    assert waived.status == "ok"


def test_sp45_kafka_42_still_stops_at_10():
    """SP-45: the delivery limit SP-71 allows under kafka-4.4 is past Kafka 4.2's range."""
    verdict = check_lines([header("kafka-4.2", delivery_count_limit=11), *steps(APPEND)])
    assert (verdict.clause, verdict.step) == ("SP-45", 0)


# SP-72: renewals a group refuses.

def test_sp72_a_group_that_refuses_renewals_answers_invalid_record_state_and_renews_nothing():
    """SP-72: the renewal of the actor's own records is refused; the earlier renewal of the request does not
    stand (it is refused too)."""
    model = partition(batches=(4,), record_lock_duration_ms=1000, renew_acknowledge_enable=False)
    model.acquire(0, "c1", 4, [[0, 3, 1]])
    ruled = model.acknowledge(500, "c1", [(0, 1, "renew"), (2, 3, "accept")], renew=True)
    assert (ruled.value, ruled.clause) == (Error.INVALID_RECORD_STATE, "SP-72")
    assert [model.lock_deadline_of(offset) for offset in range(4)] == [1000] * 4
    model.storage_failure(600, "c1", [(0, 1, "renew")], renew=True)
    assert model.lock_deadline_of(0) == 1000, "SP-72: a refused renewal is not one a storage error lets stand"


def test_sp72_ownership_is_checked_before_the_refusal():
    """SP-72, SP-15: another member's records are not the actor's: the refusal is SP-15's, not SP-72's."""
    model = partition(batches=(2,), renew_acknowledge_enable=False)
    model.acquire(0, "c1", 2, [[0, 1, 1]])
    ruled = model.acknowledge(0, "c2", [(0, 1, "renew")], renew=True)
    assert (ruled.value, ruled.clause) == (Error.INVALID_RECORD_STATE, "SP-15")
    assert model.acknowledge(0, "c1", [(0, 1, "renew")]).clause == "SP-41", "IsRenewAck comes first (SP-41)"


def test_sp72_renewals_come_back_when_the_group_allows_them_again():
    """SP-72, SP-70: the switch is read at each request."""
    model = partition(batches=(1,), record_lock_duration_ms=1000, renew_acknowledge_enable=False)
    delivered(model, "c1", 0, 1)
    model.alter_config({"renew_acknowledge_enable": True})
    assert model.acknowledge(500, "c1", [(0, 0, "renew")], renew=True).value == Error.NONE
    assert model.lock_deadline_of(0) == 1500


# SP-73: rejected and exhausted records wait in archiving.

@pytest.mark.parametrize("leaves", ["release", "lock expiry", "leave"])
def test_sp73_a_record_at_the_limit_waits_in_archiving(leaves):
    """SP-73, SP-21: release, lock expiry and leave at the limit make the record archiving, with no owner or lock."""
    model = partition(batches=(2,), delivery_count_limit=1, record_lock_duration_ms=100, dead_letter_queue=True)
    model.acquire(0, "c1", 2, [[0, 1, 1]])
    if leaves == "release":
        model.acknowledge(0, "c1", [(0, 1, "release")])
    else:
        model.advance(100) if leaves == "lock expiry" else model.leave(0, "c1")
    assert states(model) == [(0, 1, ARCHIVING, 1)] and (model.spso, model.speo) == (0, 2)
    assert (model.owner_of(0), model.lock_deadline_of(0), model.deciding_clause(0)) == (None, None, "SP-73")


def test_sp73_a_rejected_record_waits_in_archiving_a_gap_does_not():
    """SP-73, SP-9, SP-12: reject becomes archiving; a gap is archived at once; SPSO stops at the archiving one."""
    model = partition(batches=(3,), dead_letter_queue=True)
    model.acquire(0, "c1", 3, [[0, 2, 1]])
    assert model.acknowledge(0, "c1", [(0, 0, "gap"), (1, 1, "reject"), (2, 2, "accept")]).value == Error.NONE
    assert states(model) == [(1, 1, ARCHIVING, 1), (2, 2, ACKNOWLEDGED, 1)] and model.spso == 1


def test_sp73_an_archiving_record_is_neither_acquired_nor_acknowledged():
    """SP-73, SP-15: not acquirable (SP-73 names the refusal), an acknowledgement of it is INVALID_RECORD_STATE."""
    model = partition(batches=(2,), dead_letter_queue=True)
    model.acquire(0, "c1", 2, [[0, 1, 1]])
    model.acknowledge(0, "c1", [(0, 0, "reject"), (1, 1, "release")])
    assert model.acquirable_ranges() == [(1, 1)] and model.lowest_acquisition(2) == [[1, 1, 2]]
    with pytest.raises(Violation) as caught:
        model.acquire(0, "c2", 2, [[0, 1, 2]])
    assert caught.value.clause == "SP-73"
    assert model.acknowledge(0, "c1", [(0, 0, "reject")]).value == Error.INVALID_RECORD_STATE


def test_sp73_without_a_dead_letter_queue_kafka_44_archives_at_once():
    """SP-73, SP-70: the queue is read at each transition: turned off, the next reject archives."""
    model = partition(batches=(2,), dead_letter_queue=True)
    model.acquire(0, "c1", 2, [[0, 1, 1]])
    model.acknowledge(0, "c1", [(0, 0, "reject")])
    model.alter_config({"dead_letter_queue": False})
    model.acknowledge(0, "c1", [(1, 1, "reject")])
    assert states(model) == [(0, 0, ARCHIVING, 1), (1, 1, ARCHIVED, 1)]


def test_sp73_sp26_a_reloaded_partition_may_start_archiving_only_under_kafka_44():
    """SP-73, SP-26: Kafka 4.4 persists archiving (DeliveryState 3); Kafka 4.2 has no such state."""
    model = SharePartition(profile=KAFKA44, initial_state=[[0, 0, "archiving", 1], [1, 1, "acknowledged", 1]])
    assert (model.spso, states(model), model.deciding_clause(0)) == (0, [(0, 0, ARCHIVING, 1), (1, 1, ACKNOWLEDGED, 1)],
                                                                    "SP-26")
    with pytest.raises(ValueError, match="available, acknowledged, archived"):
        SharePartition(profile="kafka-4.2", initial_state=[[0, 0, "archiving", 1]])
    verdict = check_lines([header("kafka-4.2"), *steps({"op": "check", "observed": {"states": [[0, 0, "archiving", 1]]}})])
    assert verdict.status == "malformed" and "one of available, acquired, acknowledged, archived;" in verdict.reason


# SP-74: phase 2 archives them later.

def test_sp74_dead_lettered_archives_and_spso_moves():
    """SP-74, SP-23."""
    model = partition(batches=(3,), dead_letter_queue=True)
    model.acquire(0, "c1", 3, [[0, 2, 1]])
    model.acknowledge(0, "c1", [(0, 1, "reject"), (2, 2, "accept")])
    model.dead_lettered(0, 0)
    assert (model.spso, states(model)) == (1, [(1, 1, ARCHIVING, 1), (2, 2, ACKNOWLEDGED, 1)])
    model.dead_lettered(1, 1)
    assert (model.spso, model.speo) == (3, 3)


@pytest.mark.parametrize("first, last", [(0, 1), (2, 2), (5, 5)])
def test_sp74_dead_lettering_a_record_not_archiving_is_a_violation(first, last):
    """SP-74: an accepted, an acquired or a never-seen record was not on its way to the dead-letter queue."""
    model = partition(batches=(3,), dead_letter_queue=True)
    model.acquire(0, "c1", 3, [[0, 2, 1]])
    model.acknowledge(0, "c1", [(0, 0, "reject"), (1, 1, "accept")])
    with pytest.raises(Violation) as caught:
        model.dead_lettered(first, last)
    assert caught.value.clause == "SP-74"
    assert model.state_of(0) == ARCHIVING, "a refused dead_lettered changes nothing"


def test_sp74_a_dead_lettered_may_repeat_what_an_earlier_step_showed():
    """SP-74: phase 2 seen by a check (SPSO past the record), then reported by a writer that read the dead-letter
    topic later; or sent there twice (Kafka resumes phase 2 after a reload)."""
    lines = [*REJECTED, *steps(*[{}] * 3, {"op": "check", "observed": {"stored_spso": 2}},
                               {"op": "dead_lettered", "args": {"first": 0, "last": 1}},
                               {"op": "dead_lettered", "args": {"first": 1, "last": 1}})[3:]]
    assert check_lines(lines).status == "ok"
    twice = [*REJECTED, *steps(*[{}] * 3, {"op": "dead_lettered", "args": {"first": 0, "last": 1}},
                               {"op": "dead_lettered", "args": {"first": 0, "last": 2}})[3:]]
    assert check_lines(twice).clause == "SP-74", "record 2 is acquired, not on its way to the dead-letter queue"


def test_sp74_dead_lettered_is_kafka_44s_alone():
    lines = [header("kafka-4.2"), *steps(APPEND, {"op": "dead_lettered", "args": {"first": 0, "last": 0}})]
    verdict = check_lines(lines)
    assert verdict.status == "malformed" and "only under profile kafka-4.4" in verdict.reason
    backwards = check_lines([header(), *steps(APPEND, {"op": "dead_lettered", "args": {"first": 1, "last": 0}})])
    assert backwards.status == "malformed" and "first <= last" in backwards.reason


def test_sp74_what_a_check_shows_of_phase_2():
    """SP-74: records below a check's SPSO, or shown archived, finished phase 2; others did not."""
    model = partition(batches=(4,), dead_letter_queue=True)
    model.acquire(0, "c1", 4, [[0, 3, 1]])
    model.acknowledge(0, "c1", [(0, 1, "reject"), (2, 2, "accept"), (3, 3, "reject")])
    assert dead_letters_seen(model, 1, None, None) == [(0, 0)]
    shown = [[0, 1, "archiving", 1], [2, 2, "acknowledged", 1], [3, 3, "archived", 1]]
    assert dead_letters_seen(model, None, None, shown) == [(3, 3)]
    assert dead_letters_seen(model, 0, None, [[0, 1, "archiving", 1]]) == []
    assert dead_letters_seen(model, None, 2, None) == [(0, 1)], "SP-47: the stored SPSO passed them"


REJECTED = [header(dead_letter_queue=True, delivery_count_limit=2), *steps(
    APPEND,
    {"op": "acquire", "args": {"max_records": 3}, "observed": {"records": [[0, 2, 1]]}},
    {"op": "acknowledge", "args": {"batches": [{"first": 0, "last": 1, "type": "reject"}]},
     "observed": {"error": "NONE"}})]


@pytest.mark.parametrize("observed, status", [
    ({"spso": 2}, "ok"),                                                   # phase 2 finished for both
    ({"spso": 1, "states": [[1, 1, "archiving", 1], [2, 2, "acquired", 1]]}, "ok"),
    ({"spso": 0, "states": [[0, 0, "archived", 1], [1, 1, "archiving", 1], [2, 2, "acquired", 1]]}, "violation"),
    ({"spso": 3}, "violation"),                                            # past the acquired record 2
    ({"spso": 0, "states": [[0, 1, "archiving", 1], [2, 2, "acquired", 1]]}, "ok"),
])
def test_sp74_a_check_may_see_phase_2_finished(observed, status):
    """SP-74: a check that sees phase 2 finished is allowed; one showing an archived record below SPSO is not (SP-23:
    SPSO passes it), nor one whose SPSO passes a non-archiving record."""
    verdict = check_lines([*REJECTED, *steps(*[{}] * 3, {"op": "check", "observed": observed})[3:]])
    assert verdict.status == status, verdict.summary()


def test_sp74_an_acknowledgement_may_meet_phase_2_finished():
    """SP-74, SP-18: a second reject of a record phase 2 archived below SPSO is skipped (NONE); before phase 2 it is
    INVALID_RECORD_STATE; both are allowed, as the trace cannot tell when phase 2 ran. Other answers are not."""
    again = {"op": "acknowledge", "args": {"batches": [{"first": 0, "last": 0, "type": "reject"}]}}
    for error, status in ((Error.NONE, "ok"), (Error.INVALID_RECORD_STATE, "ok"), (Error.INVALID_REQUEST, "violation")):
        verdict = check_lines([*REJECTED, *steps(*[{}] * 3, {**again, "observed": {"error": error}})[3:]])
        assert verdict.status == status, (error, verdict.summary())
    refused = check_lines([*REJECTED, *steps(*[{}] * 3, {**again, "observed": {"error": Error.INVALID_REQUEST}})[3:]])
    assert refused.clause == "SP-15", "the refusal is explained by the window before phase 2"


def test_sp74_an_acquisition_may_meet_a_window_phase_2_shortened():
    """SP-74, SP-8: at the in-flight limit with the first record archiving, new records may come only if phase 2
    finished; an acquisition refused either way is explained by the window before phase 2."""
    lines = [header(dead_letter_queue=True, max_inflight_records=2, kafka_ranges="waive"), *steps(
        {"op": "append", "args": {"count": 1}}, {"op": "append", "args": {"count": 1}},
        {"op": "append", "args": {"count": 2}},
        {"op": "acquire", "args": {"max_records": 2}, "observed": {"records": [[0, 1, 1]]}},
        {"op": "acknowledge", "args": {"batches": [{"first": 0, "last": 0, "type": "reject"}]},
         "observed": {"error": "NONE"}})]
    new = steps(*[{}] * 5, {"op": "acquire", "args": {"max_records": 2}, "observed": {"records": [[2, 3, 1]]}})[5:]
    assert check_lines(lines + new).status == "ok"
    # Half a log batch: SP-6 after phase 2, and before it SP-8, the refusal reported.
    partial = steps(*[{}] * 5, {"op": "acquire", "args": {"max_records": 2}, "observed": {"records": [[2, 2, 1]]}})[5:]
    assert check_lines(lines + partial).clause == "SP-8"


def test_sp74_a_kafka_42_trace_gets_no_phase_2():
    """SP-74 is Kafka 4.4's: under kafka-4.2 nothing is archiving, and a check is judged as ever."""
    model = SharePartition(profile="kafka-4.2")
    model.append(1)
    model.acquire(0, "c1", 1, [[0, 0, 1]])
    model.acknowledge(0, "c1", [(0, 0, "reject")])
    assert (model.spso, model.archiving_runs()) == (1, [])
