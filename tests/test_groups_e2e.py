"""Consumer groups end to end: real confluent-kafka Consumers (classic range, roundrobin, cooperative-sticky;
KIP-848 uniform and range) on the reference broker, and two seeded bugs the same scenarios must catch.

Run as a script, this module is a `kipcheck broker` launcher that first
installs one seeded bug, named by its first argument, in this test-only
process; the production path is untouched:
- `volatile-offsets`: OffsetCommit is answered NONE but never written to disk;
- `assign-before-revoke`: a KIP-848 member is given partitions another
  member has not yet revoked.
"""

from __future__ import annotations

import sys

import pytest

from kipcheck.oracle.conformance.group_scenarios import GROUP_SCENARIOS

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("name", list(GROUP_SCENARIOS))
def test_group_scenario(name, tmp_path):
    result = GROUP_SCENARIOS[name](tmp_path / name)
    assert result.ok, result.detail
    print(result.summary(), result.detail)


def seeded(bug: str) -> tuple[str, ...]:
    return (sys.executable, __file__, bug, "broker")


def test_offsets_answered_but_not_written_are_caught_by_a_broker_kill(tmp_path):
    result = GROUP_SCENARIOS["groups-broker-killed"](tmp_path / "bug", launcher=seeded("volatile-offsets"))
    assert not result.ok and "after restart" in result.detail, result.detail


def test_partitions_given_before_their_revocation_are_caught_as_records_processed_twice(tmp_path):
    result = GROUP_SCENARIOS["groups-consumer-uniform"](tmp_path / "bug", launcher=seeded("assign-before-revoke"))
    assert not result.ok and "processed twice though committed first" in result.detail, result.detail


def install_seeded_bug(bug: str) -> None:
    if bug == "volatile-offsets":
        from kipcheck.impl.groups.offsets import OffsetStore

        OffsetStore._store = lambda self, record: self._apply(record)
    elif bug == "assign-before-revoke":
        from kipcheck.impl.groups.consumer_group import ConsumerGroup

        ConsumerGroup.owned_by_others = lambda self, member_id: set()
    else:
        raise SystemExit(f"unknown seeded bug {bug!r}")


if __name__ == "__main__":
    install_seeded_bug(sys.argv[1])
    from kipcheck.cli import main

    raise SystemExit(main(sys.argv[2:]))
