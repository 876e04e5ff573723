"""IC-2..IC-12: random commits; normal form, committed set = union of accepted commits, order-independence,
idempotence, the cap, the poll filter and gap amending, and the compacted log's live keys = the held ranges."""

from hypothesis import settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kipcheck.model import ic
from kipcheck.model.errors import Error

OFFSETS_MAX = 60
RANGES_MAX = 5  # IC-6: a small cap, so that commits meet it
RANGES = st.lists(st.tuples(st.integers(0, OFFSETS_MAX), st.integers(0, 5)).map(lambda pair: (pair[0], pair[0] + pair[1])),
                  min_size=1, max_size=3)


def committed_offsets(stable_offset, ranges):
    return set(range(stable_offset + 1)) | {offset for first, last in ranges for offset in range(first, last + 1)}


def as_runs(offsets):
    """Sorted offsets as [first, last] runs."""
    runs = []
    for offset in sorted(offsets):
        if runs and runs[-1][1] == offset - 1:
            runs[-1][1] = offset
        else:
            runs.append([offset, offset])
    return runs


def runs_above(stable_offset, offsets):
    """The number of maximal runs of `offsets` once the run from 0 (the stable prefix) is removed."""
    stable = -1
    while stable + 1 in offsets:
        stable += 1
    above = sorted(offset for offset in offsets if offset > max(stable, stable_offset))
    return sum(1 for index, offset in enumerate(above) if index == 0 or above[index - 1] != offset - 1)


def replayed(commits):
    coordinator = ic.IndividualCommit()
    for ranges in commits:
        coordinator.commit(ranges)
    return coordinator.fetch()


class IndividualCommitMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.coordinator = ic.IndividualCommit(max_ranges=RANGES_MAX)
        self.accepted = []
        self.union = set()
        self.appends = []

    @rule(ranges=RANGES)
    def commit(self, ranges):
        before = self.coordinator.fetch()
        result = self.coordinator.commit([list(pair) for pair in ranges])
        if all(last <= before[0] for _, last in ranges):  # IC-5: wholly at or below the stable offset
            assert result.error == Error.INDIVIDUAL_COMMIT_TOO_OLD, \
                f"IC-5: {ranges} at or below stable offset {before[0]} answered {result.error}"
        valid = result.error not in (Error.INDIVIDUAL_COMMIT_TOO_OLD, Error.INVALID_REQUEST,
                                     Error.INDIVIDUAL_COMMIT_NOT_ALLOWED)
        held_after = runs_above(before[0], self.union | {o for first, last in ranges for o in range(first, last + 1)})
        if valid:  # IC-6: refused exactly when the state after it would hold more than the cap
            assert (result.error == Error.MAX_INDIVIDUAL_COMMIT_REACHED) == (held_after > RANGES_MAX), (
                f"IC-6: {held_after} ranges after the commit, cap {RANGES_MAX}, answered {result.error}")
        if result.error == Error.NONE:
            self.accepted.append(ranges)
            self.union |= {offset for first, last in ranges for offset in range(first, last + 1)}
            self.appends += result.appends
        else:
            assert self.coordinator.fetch() == before, f"{result.clause}: a refused commit changed the state"

    @precondition(lambda self: self.accepted)
    @rule(data=st.data())
    def recommit_is_idempotent(self, data):
        before = self.coordinator.fetch()
        result = self.coordinator.commit(data.draw(st.sampled_from(self.accepted)))
        assert result.error in (Error.NONE, Error.INDIVIDUAL_COMMIT_TOO_OLD) and self.coordinator.fetch() == before, \
            "IC-2: a repeated commit changed the state"
        self.appends += result.appends

    @precondition(lambda self: len(self.accepted) > 1)
    @rule(order=st.randoms(use_true_random=False))
    def commits_are_order_independent(self, order):
        shuffled = list(self.accepted)
        order.shuffle(shuffled)
        assert replayed(shuffled) == self.coordinator.fetch(), f"IC-2: commit order changed the state: {shuffled}"

    @rule(first=st.integers(0, OFFSETS_MAX), length=st.integers(0, 12), processed=RANGES)
    def poll_and_amend(self, first, length, processed):
        last = first + length
        fetched = set(range(first, last + 1))
        # IC-10: a poll returns exactly the fetched offsets not yet committed.
        assert self.coordinator.uncommitted(first, last) == as_runs(fetched - self.union), "IC-10: poll filter"
        done = {offset for low, high in processed for offset in range(low, high + 1)}
        # IC-11: the amended commit is what was processed of the fetched range, less what is committed.
        amended = self.coordinator.amend([first, last], [list(pair) for pair in processed])
        assert amended == as_runs((done & fetched) - self.union), f"IC-11: amend gives {amended}"

    @invariant()
    def normal_form(self):
        # IC-2: sorted, disjoint, non-adjacent, all above the stable offset (and not touching it: IC-3).
        stable_offset, ranges = self.coordinator.fetch()
        previous_last = stable_offset
        for first, last in ranges:
            assert previous_last + 1 < first <= last, f"IC-2: ranges {ranges} above stable offset {stable_offset}"
            previous_last = last

    @invariant()
    def committed_set_is_the_union_of_accepted_commits(self):
        assert committed_offsets(*self.coordinator.fetch()) == self.union, "IC-2: committed set != union of accepted commits"

    @invariant()
    def compacted_log_keys_are_the_held_ranges(self):
        # IC-4/IC-12: after compaction the live IC keys are the ranges held, and the logs replay to the state.
        stable_offset, ranges = self.coordinator.fetch()
        live = ic.live_ic_ranges(self.appends)
        assert live == {tuple(pair) for pair in ranges}, f"IC-4: live IC log keys {sorted(live)} != held {ranges}"
        assert ic.replay(self.appends) == (stable_offset, ranges), "IC-12: the logs do not replay to the held state"


TestIndividualCommitMachine = IndividualCommitMachine.TestCase
TestIndividualCommitMachine.settings = settings.get_profile("kipcheck-machines")
