"""Seeded bugs in individual commit and key-range sharing must fail the oracle on a live broker.

Run as a script, this module is a `kipcheck broker` launcher that first installs the seeded bug named by its
first argument, in this test-only process (the production path is untouched):
- `forgetful-compaction`: every commit compacts the IC log, and the rewrite leaves out the highest held range
  of each partition; the `replay` after a kill -9 is judged (IC-12);
- `skipping-stable-offset`: the stable offset also advances over a gap below the lowest committed range
  (IC-3): uncommitted records count as committed. Sharers commit their own keys' offsets, so such gaps
  appear whatever the timing;
- `overlapping-assignor`: the coordinator's key-range assignor gives its first sharer one hash value of the
  next share too (KR-2), judged in the coordinator's key-range-assign trace;
- `early-handover`: the coordinator's reconciliation counts only whole partitions as held, so a key share
  goes to its new owner before the previous one gave it up (IC-15), judged in the ic traces.
One more seeded bug is an assignment with an overlap given by hand: two sharers own one hash value (IC-15),
judged in the consumers' ic trace; the shares are given in this process. And a client bug, seeded in this
process too: a consumer that forgets which records it gave up commits them after the give-up (a zombie), judged
in the consumers' ic trace (IC-16).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kipcheck.oracle.conformance.scenarios import ic as ic_scenarios
from kipcheck.oracle.conformance.scenarios.ic import SCENARIOS as IC_SCENARIOS

pytestmark = pytest.mark.slow


def install_seeded_bug(name: str) -> None:
    from kipcheck.impl.groups import assignors, consumer_group
    from kipcheck.impl.ic import logs, state
    from kipcheck.impl.ic.coordinator import IcCoordinator

    if name == "forgetful-compaction":
        rewrite = logs.IcLogs.rewrite

        def forgetful_rewrite(self, states):
            forgotten = {}
            for key, (stable_offset, ranges) in states.items():
                kept = type(ranges)()
                for first, last in list(ranges)[:-1]:
                    kept.append(first, last)
                forgotten[key] = (stable_offset, kept)
            rewrite(self, forgotten)

        logs.IcLogs.rewrite = forgetful_rewrite
        IcCoordinator._maybe_compact = IcCoordinator.compact
    elif name == "skipping-stable-offset":
        plan = state.PartitionIc.plan

        def skipping_plan(self, request):
            planned = plan(self, request)
            lowest = planned.spans[0] if planned.spans else None
            if planned.folded is None and lowest is not None and lowest.first > self.stable_offset + 1:
                return state.Plan(lowest.last, planned.puts[1:], planned.tombstones, planned.spans, lowest,
                                  planned.ranges_after - 1)
            return planned

        state.PartitionIc.plan = skipping_plan
    elif name == "overlapping-assignor":
        assign = assignors.KeyRangeRoundRobinAssignor.assign

        def overlapping_assign(self, spec):
            target = assign(self, spec)
            for member_id in sorted(target):
                for topic, units in target[member_id].items():
                    shares = [unit for unit in units if isinstance(unit, assignors.KeyShare) and unit.low == 0]
                    if shares:
                        widened = shares[0]._replace(high=shares[0].high + 1)
                        target[member_id] = {**target[member_id], topic: units - {shares[0]} | {widened}}
                        return target
            return target

        assignors.KeyRangeRoundRobinAssignor.assign = overlapping_assign
    elif name == "early-handover":
        consumer_group._Step.taken = lambda self, topic, unit: (topic, unit) in self.owned_by_others
    else:
        raise SystemExit(f"unknown seeded bug {name!r}")


def launcher(bug: str) -> tuple[str, ...]:
    return sys.executable, __file__, bug, "broker"


def assert_caught(result, clause: str) -> None:
    """The scenario failed, and its ic traces broke `clause`."""
    caught = [verdict for verdict in result.violations() if verdict.machine == "ic"]
    assert caught and any(verdict.clause == clause for verdict in caught), result.summary()
    assert not result.ok


def test_a_compaction_that_forgets_a_range_is_caught(tmp_path):
    result = IC_SCENARIOS["ic-broker-killed"](tmp_path / "bug", launcher=launcher("forgetful-compaction"))
    assert_caught(result, "IC-12")


def test_a_stable_offset_skipping_an_uncommitted_record_is_caught(tmp_path):
    result = IC_SCENARIOS["ic-key-range-sharing"](tmp_path / "bug", launcher=launcher("skipping-stable-offset"))
    assert_caught(result, "IC-3")


def test_an_assignment_with_an_overlap_is_caught(tmp_path, monkeypatch):
    def overlapping(count: int) -> list[tuple[int, int]]:
        shares = ic_scenarios_split(count)
        return [(low, min(high + 2**40, 2**63 - 1)) for low, high in shares]   # each share reaches into the next

    ic_scenarios_split = ic_scenarios.split
    monkeypatch.setattr(ic_scenarios, "split", overlapping)
    result = IC_SCENARIOS["ic-key-range-sharing"](tmp_path / "bug")
    assert_caught(result, "IC-15")


def test_a_consumer_that_commits_records_it_gave_up_is_caught(tmp_path, monkeypatch):
    from kipcheck.impl.consumer.individual import IndividualCommits

    monkeypatch.setattr(IndividualCommits, "given_up", lambda self, tp, ranges: [])   # nothing is ever dropped
    result = IC_SCENARIOS["ic-late-commit"](tmp_path / "bug")
    caught = [verdict for verdict in result.violations() if verdict.machine == "ic"]
    assert [verdict.clause for verdict in caught] == ["IC-16"], result.summary()   # the consumers' trace alone
    assert Path(caught[0].name).name.startswith("ic-client."), result.summary()
    assert not result.ok


def test_a_key_range_assignment_with_an_overlap_is_caught(tmp_path):
    result = IC_SCENARIOS["ic-group-key-sharing"](tmp_path / "bug", launcher=launcher("overlapping-assignor"))
    caught = [verdict for verdict in result.violations() if verdict.machine == "key-range-assign"]
    assert caught and caught[0].clause == "KR-2", result.summary()   # the first violation, not just any
    assert not result.ok


def test_a_key_share_handed_over_before_it_was_revoked_is_caught(tmp_path):
    result = IC_SCENARIOS["ic-group-key-sharing"](tmp_path / "bug", launcher=launcher("early-handover"))
    assert_caught(result, "IC-15")


if __name__ == "__main__":
    install_seeded_bug(sys.argv.pop(1))
    from kipcheck.cli import main

    raise SystemExit(main(sys.argv[1:]))
