"""Apache Kafka's own Java clients as scenario clients (oracle/conformance/scenarios/java.py): KafkaShareConsumer
(implicit and explicit acknowledgement, RENEW, the record_limit acquire mode, commitSync and commitAsync, close, a
JVM killed -9) and KafkaConsumer (classic and KIP-848 groups, a rebalance listener, commits).

Each runs on the reference broker, judged by what its clients saw and by the broker's traces; all of them run on
Apache Kafka 4.2 through `kipcheck conform --java-clients`, judged by what their clients saw and by the share
coordinator's records read back; and a reference broker with a seeded bug (tests/broker_bugs.py) is caught by the
Java clients' own checks, one of them a bug the broker's traces do not show. Skipped, with the reason, where
Kafka's clients cannot run (no Java 17, no Maven).
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from broker_bugs import launcher
from kipcheck.oracle.conformance.scenarios.java import CLIENT_LINE, SCENARIOS, java_unavailable

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def java_clients_available():
    reason = java_unavailable(CLIENT_LINE)
    if reason:
        pytest.skip(reason)


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_java_scenario_on_the_reference_broker(name, tmp_path, kipcheck_check):
    result = SCENARIOS[name](tmp_path / name)
    assert result.ok and not result.skipped, result.summary() + "\n" + result.detail
    traces = sorted((tmp_path / name / "traces").glob("*.jsonl"))
    assert bool(traces) == result.needs_traces, "share groups and KIP-848 groups leave traces, classic groups none"
    if traces:
        checked = kipcheck_check(traces)
        assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_java_scenarios_pass_on_kafka_beside_a_probe(tmp_path):
    """--java-clients adds every Java scenario to what is named; they run on Kafka's cluster after the probes, and
    what its share coordinator stored for their groups is judged with the probe's."""
    result = subprocess.run([sys.executable, "-m", "kipcheck", "conform", "--target", f"kafka:{CLIENT_LINE}",
                             "--java-clients", "--scenario", "late-ack", "--work-dir", str(tmp_path / "run")],
                            capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "PASSED          late-ack" in result.stdout
    for name in SCENARIOS:
        assert f"PASS  broker/kafka-{CLIENT_LINE}/{name} " in result.stdout, result.stdout[-4000:]
    read_back = {path.name.split("-")[3] for path in (tmp_path / "run" / "share-state").glob("share-state-java-*")}
    assert {"billing", "workers", "renewers", "limiters", "crew"} <= read_back, read_back


@pytest.mark.parametrize("bug, seen", [
    # A final ShareAcknowledge's records released before its acknowledgements are applied: the broker's traces
    # are consistent (a release, then acknowledgements of records no longer acquired), only a client sees it.
    ("released-before-final-acks", "accepted records delivered again"),
    ("KAFKA-19972-count-decremented-on-close", "came back without a higher delivery count"),
])
def test_a_broken_broker_is_caught_by_the_java_clients(bug, seen, tmp_path):
    result = SCENARIOS["java-share-close"](tmp_path, launcher=launcher(bug))
    assert not result.checks_ok and seen in result.detail, result.summary() + "\n" + result.detail
