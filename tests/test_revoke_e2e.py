"""Revoke-delay end to end: the conformance scenarios where KIP-983 consumers and confluent-kafka consumers share
a KIP-848 group (oracle/conformance/scenarios/revoke.py), each trace checked by `kipcheck check` as a user runs it.

The seeded bugs these traces catch are in tests/test_consumer_wire.py (the consumer's) and
tests/test_revoke_delay.py (the judge's examples).
"""

from __future__ import annotations

import pytest

from kipcheck.oracle.conformance.scenarios.revoke import SCENARIOS as REVOKE_SCENARIOS

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("name", list(REVOKE_SCENARIOS))
def test_revoke_scenario(name, tmp_path, kipcheck_check):
    result = REVOKE_SCENARIOS[name](tmp_path / name)
    assert result.ok, result.summary() + "\n" + result.detail
    traces = sorted((tmp_path / name / "traces").glob("revoke-delay.*.jsonl"))
    assert any(".consumer." in path.name for path in traces) and any(".coordinator." in path.name for path in traces)
    checked = kipcheck_check(traces)
    assert checked.returncode == 0, checked.stdout + checked.stderr
