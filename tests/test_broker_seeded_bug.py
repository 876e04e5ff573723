"""A broker with one seeded bug must fail the oracle: the check that the e2e traces are judged for real.

Run as a script, this module is a `kipcheck broker` launcher that first swaps
in a SharePartition which forgets to count redeliveries (a re-acquired record
keeps its old delivery count). The swap happens only in this test-only
process, through ShareEngine.partition_factory; the production path is
untouched.
"""

from __future__ import annotations

import sys

import pytest

from kipcheck.oracle.conformance.scenarios.share import explicit_acknowledgement

pytestmark = pytest.mark.slow


def install_seeded_bug() -> None:
    from kipcheck.impl.broker.share_engine import ShareEngine
    from kipcheck.impl.share import partition

    class UncountedRedelivery(partition.SharePartition):
        """Seeded bug: re-acquiring an available record does not increment its delivery count."""

        def _acquire_cached(self, member_id, budget, lock_id, acquired, record_limit=False):
            start = len(acquired)
            remaining = super()._acquire_cached(member_id, budget, lock_id, acquired, record_limit)
            for position in range(start, len(acquired)):
                first, last, count = acquired[position]
                acquired[position] = (first, last, count - 1)
                for batch in self._batches:
                    if batch[partition.FIRST] == first:
                        batch[partition.COUNT] -= 1
            return remaining

    ShareEngine.partition_factory = staticmethod(UncountedRedelivery.load)


def test_seeded_delivery_count_bug_fails_the_oracle(tmp_path):
    result = explicit_acknowledgement(tmp_path / "bug", launcher=(sys.executable, __file__, "broker"))
    violations = result.violations()
    assert violations, "the oracle accepted a broker that does not count redeliveries"
    assert any(verdict.machine == "share-partition" and verdict.status == "violation" for verdict in violations)
    assert not result.ok
    print("\n".join(verdict.summary() for verdict in violations))


if __name__ == "__main__":
    install_seeded_bug()
    from kipcheck.cli import main

    raise SystemExit(main(sys.argv[1:]))
