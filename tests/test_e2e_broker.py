"""End-to-end: real confluent-kafka clients against the reference broker, every trace judged.

Runs the scenarios of kipcheck.oracle.conformance (the same ones `kipcheck
conformance` runs), so the tests and the main job cannot drift apart. Each
test asserts what the clients saw AND that `kipcheck check` accepts every
trace the broker wrote.
"""

from __future__ import annotations

import pytest

from kipcheck.oracle.conformance import scenarios
from kipcheck.oracle.conformance.scenarios.groups import SCENARIOS as GROUP_SCENARIOS
from kipcheck.oracle.conformance.scenarios.ic import SCENARIOS as IC_SCENARIOS
from kipcheck.oracle.conformance.scenarios.java import SCENARIOS as JAVA_SCENARIOS
from kipcheck.oracle.conformance.scenarios.revoke import SCENARIOS as REVOKE_SCENARIOS

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("profile", ["kafka-4.2", "kip"])
@pytest.mark.parametrize("name", [name for name in scenarios.names()  # others: tests/test_{groups,revoke,ic,java}_*.py
                                  if name not in {**GROUP_SCENARIOS, **REVOKE_SCENARIOS, **IC_SCENARIOS,
                                                  **JAVA_SCENARIOS}])
def test_scenario(name, profile, tmp_path, kipcheck_check):
    result = scenarios.scenario(name)(tmp_path / name, profile=profile)
    assert result.checks_ok, result.detail
    assert result.traces_ok, "\n".join(verdict.summary() for verdict in result.violations()) or "no traces written"
    traces = sorted((tmp_path / name / "traces").glob("*.jsonl"))
    if result.needs_traces:
        assert any(path.name.startswith("share-partition.") for path in traces)
        assert any(path.name.startswith("share-session.") for path in traces)
    if traces:
        checked = kipcheck_check(traces)
        assert checked.returncode == 0, checked.stdout + checked.stderr
        assert checked.stdout.count("ok ") == len(traces)
