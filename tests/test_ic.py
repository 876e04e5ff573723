"""The individual-commit model (model/ic.py), clause by clause, and its judge."""

import json
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from kipcheck.model.ic import IndividualCommit, live_ic_ranges, merge, normal_form, replay
from kipcheck.oracle.check import check_lines


def seed_state(stable_offset=42, ranges=((45, 47), (50, 50))):
    """The seed's starting state for both compaction bullets."""
    model = IndividualCommit()
    model.commit([[0, stable_offset]])
    model.commit([list(pair) for pair in ranges])
    return model


def test_ic_1_stable_offset_is_inclusive_and_starts_at_minus_one():
    """IC-1: stable offset is inclusive and starts at minus one."""
    model = IndividualCommit()
    assert model.fetch() == (-1, [])
    assert model.commit([[0, 40]]).stable_offset == 40
    assert model.uncommitted(40, 41) == [[41, 41]]


def test_ic_2_ranges_are_held_merged_sorted_and_above_the_stable_offset():
    """IC-2: ranges are held merged sorted and above the stable offset."""
    model = seed_state()
    result = model.commit([[48, 49]])
    assert result.ranges == [[45, 50]]
    assert merge([(5, 6), (1, 2), (3, 4), (9, 9)]) == ((1, 6), (9, 9))
    assert merge([(5, 6), (1, 2), (9, 9)]) == ((1, 2), (5, 6), (9, 9))


def test_ic_3_stable_offset_advances_while_the_lowest_range_touches_it():
    """IC-3: stable offset advances while the lowest range touches it."""
    result = seed_state().commit([[43, 44]])
    assert (result.stable_offset, result.ranges) == (47, [[50, 50]])
    assert normal_form(-1, [(0, 3), (4, 9), (11, 12)]) == (9, ((11, 12),))


def test_ic_4_appends_for_the_two_seed_bullets():
    """IC-4: appends for the two seed bullets."""
    assert seed_state().commit([[48, 49]]).appends == [
        {"log": "ic", "put": [45, 50]}, {"log": "ic", "tombstone": [45, 47]}, {"log": "ic", "tombstone": [50, 50]},
    ]
    assert seed_state().commit([[43, 44]]).appends == [
        {"log": "primary", "stable_offset": 47}, {"log": "ic", "tombstone": [45, 47]},
    ]


def test_ic_4_a_commit_that_changes_nothing_appends_nothing():
    """IC-4: a commit that changes nothing appends nothing."""
    model = seed_state()
    assert model.commit([[46, 47]]).appends == []


def test_ic_5_wholly_below_is_too_old_and_straddling_is_trimmed():
    """IC-5: wholly below is too old and straddling is trimmed."""
    model = seed_state()
    too_old = model.commit([[10, 20], [42, 42]])
    assert (too_old.error, too_old.stable_offset, too_old.appends) == ("INDIVIDUAL_COMMIT_TOO_OLD", 42, [])
    straddling = model.commit([[40, 44]])
    assert (straddling.error, straddling.stable_offset, straddling.ranges) == ("NONE", 47, [[50, 50]])


def test_ic_6_cap_refuses_growth_but_not_gap_filling():
    """IC-6: cap refuses growth but not gap filling."""
    model = IndividualCommit(max_ranges=2)
    model.commit([[1, 1], [3, 3]])
    refused = model.commit([[5, 5]])
    assert (refused.error, refused.ranges, refused.appends) == ("MAX_INDIVIDUAL_COMMIT_REACHED", [[1, 1], [3, 3]], [])
    assert model.commit([[2, 2]]).error == "NONE"
    assert model.commit([[5, 5]]).error == "NONE"


def test_ic_7_coordinator_without_ic_refuses_everything():
    """IC-7: coordinator without ic refuses everything."""
    model = IndividualCommit(accept_individual_commit=False)
    assert model.commit([[0, 1]]).error == "INDIVIDUAL_COMMIT_NOT_ALLOWED"
    assert model.commit([]).error == "INDIVIDUAL_COMMIT_NOT_ALLOWED"
    assert model.fetch() == (-1, [])


def test_ic_8_empty_backwards_or_negative_ranges_are_invalid():
    """IC-8: empty backwards or negative ranges are invalid."""
    model = IndividualCommit()
    for request in ([], [[5, 4]], [[-1, 3]]):
        assert model.commit(request).error == "INVALID_REQUEST"
    assert model.fetch() == (-1, [])


def test_ic_9_fetch_answers_the_held_state():
    """IC-9: fetch answers the held state."""
    assert seed_state().fetch() == (42, [[45, 47], [50, 50]])


def test_ic_10_poll_returns_only_uncommitted_offsets():
    """IC-10: poll returns only uncommitted offsets."""
    model = seed_state(40, ((43, 45), (48, 49)))
    assert model.uncommitted(38, 52) == [[41, 42], [46, 47], [50, 52]]


def test_ic_11_gap_amending_seed_example():
    """IC-11: gap amending seed example."""
    model = seed_state(40, ((43, 45), (48, 49)))
    assert model.amend([40, 50], [[40, 50]]) == [[41, 42], [46, 47], [50, 50]]
    assert model.amend([40, 50], [[40, 46], [60, 70]]) == [[41, 42], [46, 46]]
    assert model.amend([43, 45], [[43, 45]]) == []


def test_ic_12_replay_rebuilds_the_seed_states():
    """IC-12: replay rebuilds the seed states."""
    for commit, expected in (([[48, 49]], (42, [[45, 50]])), ([[43, 44]], (47, [[50, 50]]))):
        model = IndividualCommit()
        appends = []
        for request in ([[0, 42]], [[45, 47], [50, 50]], commit):
            appends += model.commit(request).appends
        assert replay(appends) == expected == model.fetch()
        assert live_ic_ranges(appends) == {tuple(pair) for pair in expected[1]}


offsets = st.integers(min_value=0, max_value=40)
requests = st.lists(st.tuples(offsets, st.integers(min_value=0, max_value=6)).map(lambda p: [p[0], p[0] + p[1]]), min_size=1, max_size=3)


@settings(max_examples=200, deadline=None)
@given(st.lists(requests, max_size=12), st.randoms(use_true_random=False))
def test_ic_2_ic_12_commits_are_order_independent_and_the_logs_replay(commits, shuffler):
    """IC-2, IC-12: commits are order independent and every prefix of the logs replays safely."""
    model, appends = IndividualCommit(), []
    for request in commits:
        before = model.fetch()
        result = model.commit(request)
        # IC-12: every prefix of a commit's appends replays to a state between before and after.
        for cut in range(len(result.appends) + 1):
            partial_stable, partial_ranges = replay(appends + result.appends[:cut])
            assert before[0] <= partial_stable <= result.stable_offset
            assert _offsets(before) <= _offsets((partial_stable, partial_ranges)) <= _offsets(model.fetch())
        appends += result.appends
        assert live_ic_ranges(appends) == {tuple(pair) for pair in result.ranges}
        assert replay(appends) == model.fetch()
    shuffled = list(commits)
    shuffler.shuffle(shuffled)
    other = IndividualCommit()
    for request in shuffled:
        other.commit(request)
    assert other.fetch() == model.fetch()


def _offsets(state):
    stable_offset, ranges = state
    return set(range(stable_offset + 1)).union(*(range(first, last + 1) for first, last in ranges))


def _trace(*steps, config=None):
    header = {"format": "kipcheck-trace", "version": 1, "machine": "ic", "config": config or {}}
    return [json.dumps(header)] + [json.dumps({"step": n, "at_ms": 0, "actor": "c1", **s}) for n, s in enumerate(steps, 1)]


def test_judge_rejects_ill_shaped_ranges_as_malformed():
    verdict = check_lines(_trace({"op": "commit", "args": {"ranges": [[1, 2, 3]]}}))
    assert verdict.status == "malformed" and "[first, last]" in verdict.reason
    verdict = check_lines(_trace({"op": "amend", "args": {"fetched": [5, 1], "processed": []}}))
    assert verdict.status == "malformed" and "fetched" in verdict.reason
    verdict = check_lines(_trace(config={"max_ranges": -1}))
    assert verdict.status == "malformed"


def test_judge_names_the_clause_of_a_wrongly_answered_error():
    verdict = check_lines(_trace({"op": "commit", "args": {"ranges": [[0, 1]]}, "observed": {"error": "MAX_INDIVIDUAL_COMMIT_REACHED"}}))
    assert (verdict.status, verdict.clause) == ("violation", "IC-6")


def test_random_long_run_replays(seed=7):
    generator = random.Random(seed)
    model, appends = IndividualCommit(max_ranges=50), []
    for _ in range(2000):
        first = generator.randrange(0, 500)
        appends += model.commit([[first, first + generator.randrange(0, 4)]]).appends
    assert replay(appends) == model.fetch()


def test_ic_14_ic_15_ic_16_key_handoff_judged_across_a_rebalance():
    """IC-14, IC-15, IC-16: the judge follows ownership and in-flight records over a rebalance."""
    upper, lower = [[2**62, 2**63 - 1]], [[0, 2**62 - 1]]
    a, b = 5 << 32, 3 << 61
    steps = [
        {"actor": "m1", "op": "own", "args": {"ranges": [[0, 2**63 - 1]]}},
        {"actor": "m1", "op": "deliver", "args": {"records": [[0, a], [1, b]]}},
        {"actor": "m1", "op": "own", "args": {"ranges": lower}},
        {"actor": "m2", "op": "own", "args": {"ranges": upper}},
        {"actor": "m2", "op": "deliver", "args": {"records": [[1, b]]}},
        {"actor": "m2", "op": "commit", "args": {"ranges": [[1, 1]]}, "observed": {"error": "NONE"}},
        {"actor": "m1", "op": "commit", "args": {"ranges": [[0, 0]]}, "observed": {"error": "NONE", "stable_offset": 1}},
    ]
    assert check_lines(_trace(*steps)).status == "ok"
    early = check_lines(_trace(*steps[:2], steps[3]))
    assert (early.status, early.clause) == ("violation", "IC-15")
    zombie = check_lines(_trace(*steps[:5], {"actor": "m1", "op": "commit", "args": {"ranges": [[0, 1]]}}))
    assert (zombie.status, zombie.clause) == ("violation", "IC-16")
    outside = check_lines(_trace(steps[0], steps[2], {"actor": "m1", "op": "deliver", "args": {"records": [[2, b]]}}))
    assert (outside.status, outside.clause) == ("violation", "IC-14")
    committed = check_lines(_trace(*steps, {"actor": "m1", "op": "deliver", "args": {"records": [[0, a]]}}))
    assert (committed.status, committed.clause) == ("violation", "IC-10")
    malformed = check_lines(_trace({"actor": "m1", "op": "deliver", "args": {"records": [[0, -1]]}}))
    assert malformed.status == "malformed"


def test_ic_16_a_drop_leaves_uncommitted_only_records_given_up():
    """IC-16: a member drops (leaves uncommitted) what it processed of records it gave up, or of committed ones;
    a drop of a record it still owns would lose it, and a drop of a record delivered to it again is one too."""
    lower = [[0, 2**62 - 1]]
    a, b = 5 << 32, 3 << 61   # a's hash is in the lower half, b's in the upper
    steps = [
        {"actor": "m1", "op": "own", "args": {"ranges": [[0, 2**63 - 1]]}},
        {"actor": "m1", "op": "deliver", "args": {"records": [[0, a], [1, b], [2, a]]}},
        {"actor": "m1", "op": "commit", "args": {"ranges": [[2, 2]]}, "observed": {"error": "NONE"}},
        {"actor": "m1", "op": "own", "args": {"ranges": lower}},
    ]
    assert check_lines(_trace(*steps, {"actor": "m1", "op": "drop", "args": {"ranges": [[1, 2]]}})).status == "ok"
    owned = check_lines(_trace(*steps, {"actor": "m1", "op": "drop", "args": {"ranges": [[0, 1]]}}))
    assert (owned.status, owned.clause) == ("violation", "IC-16")
    back = [{"actor": "m1", "op": "own", "args": {"ranges": [[0, 2**63 - 1]]}},
            {"actor": "m1", "op": "deliver", "args": {"records": [[1, b]]}}]
    again = check_lines(_trace(*steps, *back, {"actor": "m1", "op": "drop", "args": {"ranges": [[1, 1]]}}))
    assert (again.status, again.clause) == ("violation", "IC-16")
    huge = check_lines(_trace(*steps, {"actor": "m1", "op": "drop", "args": {"ranges": [[1, 2**62]]}}))
    assert (huge.status, huge.clause) == ("violation", "IC-16")
    backwards = check_lines(_trace(*steps, {"actor": "m1", "op": "drop", "args": {"ranges": [[2, 1]]}}))
    assert backwards.status == "malformed"
