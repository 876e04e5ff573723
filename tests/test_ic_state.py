"""impl/ic's RangeSet and PartitionIc against model/ic.py: the same answers, on small blocks so splits happen."""

from hypothesis import given, settings, strategies as st

from kipcheck.impl.ic import ranges as ranges_module
from kipcheck.impl.ic.ranges import RangeSet
from kipcheck.impl.ic.state import PartitionIc
from kipcheck.model import ic
from kipcheck.model.errors import Error

REQUEST = st.lists(st.tuples(st.integers(0, 300), st.integers(0, 8)).map(lambda p: (p[0], p[0] + p[1])),
                   min_size=1, max_size=4)


@settings(max_examples=300, deadline=None)
@given(st.lists(REQUEST, max_size=40), st.sampled_from([1, 2, 3, 1024]))
def test_partition_state_matches_the_model_ic_2_to_ic_6(commits, block_ranges):
    """IC-2, IC-3, IC-4, IC-5: the fast state plans the model's appends and holds the model's ranges."""
    saved, ranges_module.BLOCK_RANGES = ranges_module.BLOCK_RANGES, block_ranges
    try:
        model, state = ic.IndividualCommit(max_ranges=10**9), PartitionIc()
        for request in commits:
            expected = model.commit([list(pair) for pair in request])
            plan = state.plan(request)
            assert ic.compaction_appends((state.stable_offset, tuple(state.ranges)),
                                         (plan.stable_offset, _after(state, plan))) == expected.appends
            if expected.error == Error.NONE:
                assert plan.ranges_after == len(expected.ranges)
                state.apply(plan)
            assert (state.stable_offset, [list(pair) for pair in state.ranges]) == model.fetch()
            assert len(state.ranges) == len(expected.ranges)
    finally:
        ranges_module.BLOCK_RANGES = saved


def _after(state, plan):
    """The held ranges after `plan`, computed from the plan's puts and tombstones alone."""
    kept = [pair for pair in state.ranges if pair not in set(plan.tombstones)]
    return tuple(sorted(kept + plan.puts))


def test_range_set_touching_and_replace_across_blocks():
    saved, ranges_module.BLOCK_RANGES = ranges_module.BLOCK_RANGES, 2
    try:
        held = RangeSet()
        for first in range(0, 40, 4):
            held.insert(first, first + 1)
        assert held.touching(5, 10) == [(4, 5), (8, 9)]
        assert held.touching(2, 2) == [(0, 1)] and held.touching(3, 3) == [(4, 5)] == held.touching(6, 6)
        assert held.touching(-5, -3) == [] and held.touching(100, 200) == []
        touched = held.touching(3, 30)
        assert touched == [(4, 5), (8, 9), (12, 13), (16, 17), (20, 21), (24, 25), (28, 29)]
        held.replace(touched, (3, 30))
        assert list(held) == [(0, 1), (3, 30), (32, 33), (36, 37)] and len(held) == 4
        held.replace([(0, 1)], None)
        assert held.lowest() == (3, 30) and len(held) == 3
    finally:
        ranges_module.BLOCK_RANGES = saved
