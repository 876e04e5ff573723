"""The Quint specs in tla/ are simulated with their invariants, and their ITF traces replay through the models.

Each spec is simulated once (TypeScript backend, fixed seed): the run must find
no invariant violation, and every ITF trace it writes must replay step by step
through the Python model with no difference. A deliberately broken model per
machine must make some replay fail, so the replay is known to catch bugs.

Quint comes from tla/node_modules (`make test` runs `npm ci` there). Without
it these tests fail: they are never skipped. Reproduce a run with
KIPCHECK_QUINT_SEED=<seed> (printed on failure).
"""

import os
from pathlib import Path

import pytest

from kipcheck.model import ic, revoke_delay, share_partition, share_session, share_state
from kipcheck.oracle import itf

TLA = Path(__file__).resolve().parent.parent / "tla"
SEED = int(os.environ.get("KIPCHECK_QUINT_SEED", "20261122"))
# Per spec: runs simulated (all checked against the invariants), steps per run, runs replayed.
# Sized so the whole file takes well under two minutes on a loaded two-core machine.
BUDGET = {
    "share_partition": (40, 25, 20),
    "share_session": (80, 25, 20),
    "revoke_delay": (80, 25, 20),
    "ic": (80, 25, 20),
    "share_partition_log": (300, 25, 300),   # SP-67 meets a throttled record (SP-43) in about one run in 70
    "share_state_records": (80, 25, 20),
}


@pytest.fixture(scope="module")
def simulated(tmp_path_factory):
    runs = {}

    def simulate(spec):
        if spec not in runs:
            samples, steps, traces = BUDGET[spec]
            runs[spec] = itf.run_quint(TLA / f"{spec}.qnt", tmp_path_factory.mktemp(spec), samples=samples,
                                       steps=steps, traces=traces, seed=SEED)
        return runs[spec]

    return simulate


def test_every_spec_is_simulated():
    assert sorted(BUDGET) == sorted(path.stem for path in TLA.glob("*.qnt"))
    assert set(itf.MODULES) == set(BUDGET)


@pytest.mark.parametrize("spec", sorted(BUDGET))
def test_simulation_finds_no_invariant_violation(simulated, spec):
    run = simulated(spec)
    assert run.returncode == 0 and "[ok] No violation found" in run.output, (
        f"reproduce with: {' '.join(run.command)}\n{run.output[-3000:]}")
    assert len(run.traces) == BUDGET[spec][2]


@pytest.mark.parametrize("spec", sorted(BUDGET))
def test_traces_replay_through_the_model(simulated, spec):
    steps = 0
    for path in simulated(spec).traces:
        trace = itf.load(path)
        assert trace.states[0].values[itf.ACTION] == "init"
        try:
            steps += itf.replay(trace)
        except itf.Mismatch as mismatch:
            pytest.fail(f"{path.name} of the run with seed {SEED}: {mismatch}")
    samples, steps_max, traces = BUDGET[spec]
    assert steps == traces * steps_max, "every replayed trace runs its full length"


def first_mismatch(run, machine, model=None):
    for path in run.traces:
        try:
            itf.replay(itf.load(path), machine, model)
        except itf.Mismatch as mismatch:
            return mismatch
    return None


class DeliveryCountNotIncremented(share_partition.SharePartition):
    """Bug: an acquisition leaves the stored delivery count where it was."""

    def acquire(self, at_ms, actor, max_records, records):
        super().acquire(at_ms, actor, max_records, records)
        for first, last, _ in records:
            for offset in range(first, last + 1):
                self._records[offset].delivery_count -= 1


class EpochNotChecked(share_session.ShareSessionCache):
    """Bug: any epoch of an incremental request is taken as the session's."""

    def _incremental(self, member, epoch, clause, add=frozenset(), forget=frozenset()):
        session = self.by_member.get(member)
        return super()._incremental(member, session.epoch if session else epoch, clause, add, forget)


class DelayAcceptedAfterLoss(revoke_delay.RevokeDelayConsumer):
    """Bug: delayRevoke skips the lost partitions and answers true."""

    def delay_revoke(self, partitions):
        return super().delay_revoke(set(partitions) & self.owned)


def test_replay_catches_delivery_count_not_incremented(simulated):
    mismatch = first_mismatch(simulated("share_partition"), "share-partition", DeliveryCountNotIncremented)
    assert mismatch is not None
    assert mismatch.action == "acquire" and mismatch.field in ("window", "allowed (SP-4)")
    assert f"step {mismatch.step} (acquire)" in str(mismatch)


def test_replay_catches_epoch_not_checked(simulated):
    mismatch = first_mismatch(simulated("share_session"), "share-session", EpochNotChecked)
    assert mismatch is not None
    assert mismatch.action in ("shareFetch", "shareAcknowledge") and mismatch.field == "error"
    assert mismatch.quint == "INVALID_SHARE_SESSION_EPOCH" and mismatch.model == "NONE"


def test_replay_catches_delay_revoke_accepted_after_loss(simulated):
    mismatch = first_mismatch(simulated("revoke_delay"), "revoke-delay", DelayAcceptedAfterLoss)
    assert mismatch is not None
    assert (mismatch.action, mismatch.field, mismatch.quint, mismatch.model) == ("delayRevoke", "delay_result", False, True)


def test_replay_catches_stable_offset_not_advanced(simulated, monkeypatch):
    def without_advance(stable_offset, ranges):  # Bug: IC-3 never folds the lowest range in.
        return stable_offset, ic.merge((max(first, stable_offset + 1), last) for first, last in ranges if last > stable_offset)

    monkeypatch.setattr(ic, "normal_form", without_advance)
    mismatch = first_mismatch(simulated("ic"), "ic")
    assert mismatch is not None
    assert mismatch.action == "commit" and mismatch.field in ("appends", "ranges", "stable_offset")


class AbortedRecordsAcquired(share_partition.SharePartition):
    """Bug: read_committed never sees an aborted transaction (SP-63), so it expects its records acquired."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.log.aborted_in = lambda first, last: []


def test_replay_catches_aborted_records_acquired(simulated):
    mismatch = first_mismatch(simulated("share_partition_log"), itf.SHARE_PARTITION_LOG, AbortedRecordsAcquired)
    assert mismatch is not None
    assert mismatch.action == "acquire" and mismatch.field.startswith("allowed (SP-"), str(mismatch)


class SpsoMovedByCompaction(share_partition.SharePartition):
    """Bug: compaction moves SPSO past the records it archived at once, though it writes no state (SP-66)."""

    def compact(self, at_ms, first, last):
        super().compact(at_ms, first, last)
        self._advance_start()


def test_replay_catches_spso_moved_by_compaction(simulated):
    mismatch = first_mismatch(simulated("share_partition_log"), itf.SHARE_PARTITION_LOG, SpsoMovedByCompaction)
    assert mismatch is not None
    assert (mismatch.action, mismatch.field) == ("compact", "spso"), str(mismatch)
    assert mismatch.model > mismatch.quint


class NothingAcquiredBelowTheLogStart(share_partition.SharePartition):
    """Bug: new records never start below the log start offset, whatever Kafka caches below it (SP-64)."""

    def start_below(self):
        return None


def test_replay_catches_records_below_the_log_start_refused(simulated):
    mismatch = first_mismatch(simulated("share_partition_log"), itf.SHARE_PARTITION_LOG, NothingAcquiredBelowTheLogStart)
    assert mismatch is not None
    assert (mismatch.action, mismatch.field) == ("acquire", "allowed (SP-64)"), str(mismatch)


class ReleasedBesideAvailable(share_partition.SharePartition):
    """Bug: the records a ShareFetch's own acknowledgements released count as available to its acquisition (SP-67)."""

    def acquire(self, *args, released_beside=frozenset(), **kwargs):
        super().acquire(*args, **kwargs)


def test_replay_catches_released_records_counted_available(simulated):
    mismatch = first_mismatch(simulated("share_partition_log"), itf.SHARE_PARTITION_LOG, ReleasedBesideAvailable)
    assert mismatch is not None
    assert mismatch.action == "fetchReleasing" and mismatch.field.startswith("allowed (SP-"), str(mismatch)


class ReadsNeverWrite(share_state.ShareCoordinator):
    """Bug: a read with a new leader epoch answers but records nothing (ST-32)."""

    def read(self, leader_epoch=None):
        stored = self.state.leader_epoch if self.state is not None else None
        if leader_epoch is not None and stored is not None and leader_epoch > stored:
            leader_epoch = stored  # answered, but the new epoch is never recorded
        return super().read(leader_epoch)


def test_replay_catches_reads_that_never_write(simulated):
    mismatch = first_mismatch(simulated("share_state_records"), "share-state", ReadsNeverWrite)
    assert mismatch is not None
    assert mismatch.action == "read" and mismatch.field in ("appended", "state", "error"), str(mismatch)


def test_missing_mbt_metadata_is_a_clear_error(tmp_path):
    path = tmp_path / "plain.itf.json"
    path.write_text('{"#meta": {"source": "ic.qnt"}, "vars": ["x"], "states": [{"x": 1}]}')
    with pytest.raises(ValueError, match="quint run --mbt"):
        itf.load(path)


def test_unknown_source_or_machine_is_a_clear_error(tmp_path):
    path = tmp_path / "other.itf.json"
    path.write_text('{"#meta": {"source": "other.qnt"}, "vars": [], "states": []}')
    with pytest.raises(ValueError, match="expected one of"):
        itf.replay(itf.load(path))
    with pytest.raises(ValueError, match="no Quint replay for machine 'expansion'"):
        itf.replay(itf.load(path), "expansion")


def test_missing_quint_fails_loudly(tmp_path):
    with pytest.raises(FileNotFoundError, match="npm ci"):
        itf.run_quint(TLA / "ic.qnt", tmp_path / "out", samples=1, steps=1, traces=1, seed=SEED, tla_dir=tmp_path)
