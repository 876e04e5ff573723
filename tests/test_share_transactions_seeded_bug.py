"""A broker that delivers aborted records under read_committed must fail the oracle at SP-63.

Run as a script, this module is a `kipcheck broker` launcher that first swaps
in a SharePartition that never sees an aborted transaction (so the records of
the aborted one are acquired and delivered). The swap happens only in this
test-only process, through ShareEngine.partition_factory.
"""

from __future__ import annotations

import sys

import pytest

from kipcheck.oracle.conformance.kafka42_log_scenarios import share_transactions

pytestmark = pytest.mark.slow


def install_seeded_bug() -> None:
    from kipcheck.impl.broker.share_engine import ShareEngine
    from kipcheck.impl.share import partition

    class DeliversAbortedRecords(partition.SharePartition):
        """Seeded bug: read_committed acquires the records of aborted transactions like any others."""

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self._transactions.aborted_in = lambda first, last: []

    ShareEngine.partition_factory = staticmethod(DeliversAbortedRecords.load)


def test_delivering_aborted_records_fails_the_clients_and_the_oracle(tmp_path):
    result = share_transactions(tmp_path / "bug", launcher=(sys.executable, __file__, "broker"))
    assert not result.checks_ok and "a1" in result.detail
    clauses = {verdict.clause for verdict in result.violations()}
    assert clauses == {"SP-63"}, "\n".join(verdict.summary() for verdict in result.violations())


if __name__ == "__main__":
    install_seeded_bug()
    from kipcheck.cli import main

    raise SystemExit(main(sys.argv[1:]))
