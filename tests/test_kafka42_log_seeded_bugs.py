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

    class StrandsNothing(partition.SharePartition):
        """The reference broker before it served SP-66: the log start archives the acquired records it passes at
        once, and SPSO moves on past the terminal records at the new start without a write (SP-66 broken)."""

        def on_log_start(self, offset, now_ms):
            super().on_log_start(offset, now_ms)
            for batch in self._stranded:
                self._leave_acquired(batch, partition.ARCHIVED)
            self._stranded, self._cached_below = [], None
            self._advance_start()

    chosen = {"aborted": DeliversAbortedRecords, "log-start": IgnoresLogStart, "strands-nothing": StrandsNothing}[bug]
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


def test_a_broker_that_strands_nothing_fails_kafkas_answers_and_the_oracle(tmp_path):
    """SP-66's probe of Kafka (tests/profile_probes.py) against the reference broker with its old behaviour: the
    second write carries SPSO 15, where Kafka's carried 7 (as the reference broker's does now:
    tests/test_log_start_embedded.py)."""
    from profile_probes import over_the_wire, reference_broker, stranded_by_the_log_start

    with reference_broker(tmp_path / "broker", launcher("strands-nothing")) as broker:
        with pytest.raises(AssertionError, match=r'"stored_spso": 15'):
            stranded_by_the_log_start(over_the_wire(broker), "log-start")


if __name__ == "__main__":
    install_seeded_bug(sys.argv[1])
    from kipcheck.cli import main

    raise SystemExit(main(sys.argv[2:]))
