"""Brokers with one seeded bug in Kafka 4.2's log handling must fail the oracle at the clause they break.

Run as a script (`python this-file BUG broker ...`), this module is a `kipcheck broker` launcher that first
swaps in a SharePartition with the named bug. The swap happens only in this test-only process, through
ShareEngine.partition_factory; the production path is untouched.
"""

from __future__ import annotations

import sys

import pytest

from kipcheck.oracle.conformance.scenarios.kafka42_log import share_log_start, share_transactions

pytestmark = pytest.mark.slow


def install_seeded_bug(bug: str) -> None:
    from kipcheck.impl.broker.share_engine import ShareEngine
    from kipcheck.impl.share import partition

    class DeliversAbortedRecords(partition.SharePartition):
        """read_committed acquires the records of aborted transactions like any others (SP-63 broken)."""

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self._transactions.aborted_in = lambda first, last: []

    class IgnoresLogStart(partition.SharePartition):
        """The log start offset moves, and SPSO stays: deleted records are delivered again (SP-64 broken)."""

        def on_log_start(self, offset, now_ms):
            self._tick(now_ms)
            self._record(now_ms, "log", "log_start", {"offset": offset})

    chosen = {"aborted": DeliversAbortedRecords, "log-start": IgnoresLogStart}[bug]
    ShareEngine.partition_factory = staticmethod(chosen.load)


def launcher(bug: str) -> tuple[str, ...]:
    return sys.executable, __file__, bug, "broker"


def test_delivering_aborted_records_fails_the_clients_and_the_oracle(tmp_path):
    result = share_transactions(tmp_path / "bug", launcher=launcher("aborted"))
    assert not result.checks_ok and "a1" in result.detail
    clauses = {verdict.clause for verdict in result.violations()}
    assert clauses == {"SP-63"}, "\n".join(verdict.summary() for verdict in result.violations())


def test_ignoring_the_log_start_offset_fails_the_oracle(tmp_path):
    result = share_log_start(tmp_path / "bug", launcher=launcher("log-start"))
    clauses = {verdict.clause for verdict in result.violations()}
    assert clauses == {"SP-64"}, result.summary()


if __name__ == "__main__":
    install_seeded_bug(sys.argv[1])
    from kipcheck.cli import main

    raise SystemExit(main(sys.argv[2:]))
