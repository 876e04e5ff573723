"""Properties of the share coordinator model: the interval merge agrees with a per-offset reference
(ST-6, ST-7, ST-8), and replaying the log always rebuilds the in-memory state (ST-11, ST-12)."""

from hypothesis import given, settings
from hypothesis import strategies as st

from kipcheck.model.share_state import STATE_IDS, Batch, ShareCoordinator, canonical, merge, replay

STATES = sorted(STATE_IDS)
batch = st.builds(
    lambda first, length, state, count: Batch(first, first + length, state, count),
    st.integers(0, 30), st.integers(0, 6), st.sampled_from(STATES), st.integers(0, 4),
)


def per_offset(batches, incoming, start_offset, profile):
    """The merge, one offset at a time: the reference the interval code must agree with."""
    offsets = {offset: (b.state, b.delivery_count) for b in batches for offset in range(b.first, b.last + 1)}
    for new in incoming:
        for offset in range(new.first, new.last + 1):
            old = offsets.get(offset)
            if profile == "kip" or old is None or (new.delivery_count, STATE_IDS[new.state]) >= (old[1], STATE_IDS[old[0]]):
                offsets[offset] = (new.state, new.delivery_count)
    return canonical(Batch(o, o, *value) for o, value in offsets.items() if o >= start_offset)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["kip", "kafka-4.2"]), st.lists(batch, max_size=5), st.lists(batch, max_size=5), st.integers(-1, 25))
def test_merge_agrees_with_the_per_offset_reference(profile, first_write, second_write, start_offset):
    current = merge((), first_write, -1, profile)
    assert merge(current, second_write, start_offset, profile) == per_offset(current, second_write, start_offset, profile)


operation = st.one_of(
    st.tuples(st.just("initialize"), st.integers(-1, 3), st.integers(0, 20)),
    st.tuples(st.just("write"), st.integers(-1, 3), st.integers(-1, 25), st.lists(batch, max_size=3)),
    st.tuples(st.just("failover")),
)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["kip", "kafka-4.2"]), st.integers(0, 3), st.lists(operation, max_size=25))
def test_replay_of_the_log_equals_the_in_memory_state(profile, deltas_per_checkpoint, operations):
    coordinator = ShareCoordinator(profile, deltas_per_checkpoint)
    for name, *args in operations:
        getattr(coordinator, name)(*args)
        assert replay(coordinator.log(), profile, deltas_per_checkpoint) == coordinator.state
        if coordinator.state is not None:
            assert coordinator.state.batches == canonical(coordinator.state.batches)
            assert all(b.first >= coordinator.state.start_offset for b in coordinator.state.batches)
