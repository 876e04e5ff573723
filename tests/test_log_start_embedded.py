"""SP-66 and SP-64 on the reference broker under kafka-4.2: the probes that reproduced them on a live Apache Kafka
4.2.2 (tests/test_kafka42_profile_live.py), run against the reference broker over the wire (tests/profile_probes.py),
asserting what Kafka answered there, and its own traces judged too.

SP-66: alice holds 0-4 when the log start moves to 7; carol's accepts of 7-14 and 15-19 are both written with SPSO
7, as alice's records, stranded below SPSO, hold it; once their lock expired the next write carries 20.
SP-64: with alice's 0-4 stranded, a fetch from SPSO 12 inside the log batch 10-14 acquires 10-14, as Kafka does;
where nothing is cached below, 12-14. A broker with the old behaviour fails the first
(tests/test_kafka42_log_seeded_bugs.py), and the differential test of impl/share moves the log start at random
(tests/test_differential_share.py).
"""

from __future__ import annotations

import json
from pathlib import Path

from profile_probes import (
    below_the_log_start, judged, over_the_wire, reference_broker, stored_from_subscription, stranded_by_the_log_start,
    while_a_lock_holds,
)

from kipcheck.oracle.check import check_file
from kipcheck.oracle.conformance.targets.embedded import EmbeddedBroker


def judged_broker_traces(broker: EmbeddedBroker) -> None:
    """The broker's own traces (its share-partitions, sessions and share state), each judged ok."""
    paths = sorted(broker.trace_dir.glob("*.jsonl"))
    assert any("share-partition" in path.name for path in paths)
    for path in paths:
        verdict = check_file(path)
        assert verdict.status == "ok", verdict.summary()


def test_a_record_the_log_start_stranded_holds_spso_until_its_lock_expires(tmp_path):
    """SP-66: the scenario asserts Kafka's answers, among them the stored SPSO 7, 7, 7, then 20."""
    with reference_broker(tmp_path / "broker") as broker:
        probe = while_a_lock_holds(lambda name: stranded_by_the_log_start(over_the_wire(broker), name), "log-start")
        judged(probe, tmp_path / "probe")
    judged_broker_traces(broker)


def test_records_below_the_log_start_are_acquired_while_records_below_it_are_cached(tmp_path):
    """SP-64: the scenario asserts Kafka's answers: 10-14 acquired where alice's 0-4 are stranded, 12-14 where
    nothing is cached, the stored SPSO 12 then 15. Before the first write the share coordinator holds no start
    offset (-1), as Kafka's, though the log start moved before the first fetch (ST-2: the reset is the leader's,
    in memory)."""
    with reference_broker(tmp_path / "broker") as broker:
        probe = while_a_lock_holds(lambda name: below_the_log_start(over_the_wire(broker), name), "below-log-start")
        paths = probe.finish(tmp_path / "probe")
    judged_broker_traces(broker)
    stranded, plain = [path for path in paths if "share-partition" in path.name]
    assert [step["observed"]["stored_spso"] for step in _checks_before_the_first_write(plain)] == [-1]
    for path in paths:
        for reference in (False, True):
            verdict = check_file(path, reference=reference)
            assert verdict.status == "ok", verdict.summary()


def _checks_before_the_first_write(path: Path) -> list[dict]:
    steps = [json.loads(line) for line in path.read_text().splitlines()[1:]]
    first_write = next(index for index, step in enumerate(steps) if step["op"] == "acknowledge")
    return [step for step in steps[:first_write] if step["op"] == "check"]


def test_the_share_state_is_initialized_at_subscription_without_a_start_offset(tmp_path):
    """ST-2: the scenario asserts Kafka's answers: -1 stored (and the partition listed) from the subscription until
    the first write, though the log start moved before the first fetch; then 12."""
    with reference_broker(tmp_path / "broker") as broker:
        judged(stored_from_subscription(over_the_wire(broker), "from-subscription"), tmp_path / "probe")
    judged_broker_traces(broker)
