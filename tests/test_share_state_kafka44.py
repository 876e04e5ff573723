"""The share coordinator under kafka-4.4 (spec/share-state.md ST-40, ST-41, and ST-8/ST-16 with the archiving state of
a dead-letter queue), and the share session cache, whose kafka-4.4 rules are Kafka 4.2's."""

import json

import pytest

from kipcheck.model import share_session as ss
from kipcheck.model import share_state as sst
from kipcheck.model.errors import Error
from kipcheck.oracle.check import check_lines

KAFKA44 = "kafka-4.4"


def coordinator(profile=KAFKA44, **config):
    model = sst.ShareCoordinator(profile, **config)
    assert model.initialize(0, 0).error == Error.NONE
    return model


def header(profile):
    return json.dumps({"format": "kipcheck-trace", "version": 1, "machine": "share-state", "profile": profile})


def batch(first, last, state="available", delivery_count=1):
    return sst.Batch(first, last, state, delivery_count)


# ST-40: negative epochs.

@pytest.mark.parametrize("request_, kafka_42", [
    (lambda model: model.write(-1, 5, []), (Error.NONE, "ST-8")),
    (lambda model: model.write(0, 5, [], leader_epoch=-1), (Error.NONE, "ST-8")),
    (lambda model: model.read(leader_epoch=-1), (Error.FENCED_LEADER_EPOCH, "ST-32")),
    (lambda model: model.initialize(-1, 5), (Error.NONE, "ST-2")),
])
def test_st40_kafka_44_refuses_every_negative_epoch_where_kafka_42_took_it_as_not_given(request_, kafka_42):
    """ST-40 (ST-2, ST-5, ST-32 under kafka-4.2): INVALID_REQUEST, nothing appended, nothing changed."""
    model = coordinator()
    before, records = model.state, len(model.log())
    assert tuple(request_(model)) == (Error.INVALID_REQUEST, "ST-40")
    assert (model.state, len(model.log()), model.appended) == (before, records, "none")
    assert tuple(request_(coordinator("kafka-4.2"))) == kafka_42


def test_st40_epochs_are_checked_before_the_key_is_looked_up():
    """ST-40 before ST-3: an uninitialized key's negative-epoch write is INVALID_REQUEST for its epoch."""
    model = sst.ShareCoordinator(KAFKA44)
    assert tuple(model.write(-1, 0, [])) == (Error.INVALID_REQUEST, "ST-40")
    assert tuple(model.write(0, 0, [])) == (Error.INVALID_REQUEST, "ST-3")
    assert model.write(0, 0, [], leader_epoch=None) == model.write(0, 0, []), "a leader epoch not given is not judged"


def test_st40_a_stale_state_epoch_is_still_fenced():
    """ST-2, ST-5 under kafka-4.4: fencing holds for non-negative epochs, -1 no longer excepted."""
    model = sst.ShareCoordinator(KAFKA44)
    model.initialize(3, 0)
    assert tuple(model.initialize(2, 0)) == (Error.FENCED_STATE_EPOCH, "ST-2")
    assert tuple(model.write(2, 0, [])) == (Error.FENCED_STATE_EPOCH, "ST-5")


# ST-41: the start offset never goes back.

@pytest.mark.parametrize("deltas_per_checkpoint", [500, 0])
def test_st41_a_lower_start_offset_does_not_move_the_spso_back(deltas_per_checkpoint):
    """ST-41: Kafka 4.4.0 answered start 10 with [10..12] after writes of 10 then 5 with [5..12]; Kafka 4.2.2
    answered start 5 with [5..12] (ST-6). Whether the write appends an update or a snapshot (ST-10)."""
    for profile, start, batches in ((KAFKA44, 10, (batch(10, 12),)), ("kafka-4.2", 5, (batch(5, 12),))):
        model = coordinator(profile, deltas_per_checkpoint=deltas_per_checkpoint)
        model.write(0, 10, [])
        model.write(0, 5, [batch(5, 12)])
        assert (model.state.start_offset, model.state.batches) == (start, batches)
        assert model.ruled("start_offset") == ("ST-41" if profile == KAFKA44 else "ST-6")
        model.failover()
        assert (model.state.start_offset, model.state.batches) == (start, batches), "ST-12: replay agrees"


def test_st41_the_record_carries_the_start_offset_in_force():
    """ST-41: an update of a write with start offset -1, or a lower one, holds the stored start offset."""
    model = coordinator()
    model.write(0, 7, [])
    model.write(0, -1, [batch(8, 9)])
    model.write(0, 3, [])
    assert [record.start_offset for record in model.log()[1:]] == [7, 7, 7]


# ST-8, ST-16: the archiving state (DeliveryState 3).

def test_st8_archiving_ranks_between_acknowledged_and_archived():
    """ST-8, ST-16: phase 2's archived is not overwritten by a late archiving at an equal count; archiving
    overwrites acknowledged at an equal count, and a higher count wins whatever the state."""
    model = coordinator()
    model.write(0, -1, [batch(0, 0, "archiving"), batch(1, 1, "acknowledged"), batch(2, 2, "archiving")])
    model.write(0, -1, [batch(0, 0, "archived"), batch(1, 1, "archiving"), batch(2, 2, "available", 2)])
    model.write(0, -1, [batch(0, 0, "archiving")])
    assert model.state.batches == (batch(0, 0, "archived"), batch(1, 1, "archiving"), batch(2, 2, "available", 2))


@pytest.mark.parametrize("profile", ["kip", "kafka-4.2"])
def test_st16_archiving_is_no_state_of_the_other_profiles(profile):
    """ST-16: only Kafka 4.4 has DeliveryState 3; elsewhere a batch in state archiving is malformed (exit 2)."""
    steps = [json.dumps({"step": 1, "at_ms": 0, "actor": "c", "op": "initialize",
                         "args": {"state_epoch": 0, "start_offset": 0}, "observed": {"error": "NONE"}}),
             json.dumps({"step": 2, "at_ms": 0, "actor": "l", "op": "write",
                         "args": {"state_epoch": 0, "start_offset": -1, "batches": [
                             {"first": 0, "last": 0, "state": "archiving", "delivery_count": 1}]},
                         "observed": {"error": "NONE"}})]
    verdict = check_lines([header(profile), *steps])
    assert verdict.status == "malformed" and "state in available, acquired, acknowledged, archived," in verdict.reason
    assert check_lines([header(KAFKA44), *steps]).status == "ok"


# The share session cache: Kafka 4.4's is Kafka 4.2's.

def test_kafka_44_session_cache_is_kafka_42s():
    """SS-4, SS-11, SS-31 under kafka-4.4: the same answers as under kafka-4.2, from the same rules."""
    assert type(ss.RULES[KAFKA44]) is type(ss.RULES["kafka-4.2"])
    answers = {}
    for profile in ("kafka-4.2", KAFKA44):
        cache = ss.ShareSessionCache(profile, max_sessions=1)
        answers[profile] = [cache.share_fetch("m1", 0, add=("t:0",)), cache.share_fetch("m1", 0, add=("t:0",)),
                            cache.share_fetch("m2", 0), cache.share_fetch("m1", -1, forget=("t:0",)),
                            cache.share_fetch("m2", 0), cache.disconnect("m2")]
    assert answers[KAFKA44] == answers["kafka-4.2"]
    clauses = [answer.clause for answer in answers[KAFKA44]]
    assert (clauses[1], clauses[2], clauses[3]) == ("SS-4", "SS-5", "SS-11"), clauses
    assert answers[KAFKA44][-1].group_empty, "SS-31"
