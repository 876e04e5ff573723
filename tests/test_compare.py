"""conform --compare: two brokers' answers to the same probe runs, compared under the rules of spec/conformance.md."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from kipcheck.oracle.conformance.compare import compare_runs
from kipcheck.oracle.kafka.runtime import KafkaRuntime, KafkaUnavailable

HEADER = {"format": "kipcheck-trace", "version": 1, "machine": "share-partition", "profile": "kafka-4.2",
          "config": {"record_lock_duration_ms": 2000}}


@dataclass
class Run:
    name: str
    paths: list[Path] = field(default_factory=list)


def run_with(directory: Path, *answers: dict) -> Run:
    """A probe run of one share-partition trace: an append, an acquire, an acknowledge and a check, answered so."""
    steps = [{"op": "append", "actor": "log", "args": {"count": 3}},
             {"op": "acquire", "actor": "alice", "args": {"max_records": 3}},
             {"op": "acknowledge", "actor": "alice", "args": {"batches": [{"first": 0, "last": 2, "type": "accept"}]}},
             {"op": "check", "actor": "check", "args": {}}]
    directory.mkdir(parents=True)
    path = directory / "late-ack.01.share-partition.jsonl"
    lines = [HEADER] + [{"step": number, "at_ms": number * 7, **step, **({"observed": observed} if observed else {})}
                        for number, (step, observed) in enumerate(zip(steps, [None, *answers]), start=1)]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    return Run("late-ack", [path])


def test_answers_that_differ_where_no_rule_allows_it_are_unexplained(tmp_path):
    left = run_with(tmp_path / "left", {"records": [[0, 2, 1]]}, {"error": "NONE"}, {"stored_spso": 0})
    right = run_with(tmp_path / "right", {"records": [[0, 2, 1]]}, {"error": "INVALID_RECORD_STATE"},
                     {"stored_spso": 0})
    comparison = compare_runs([left], [right])
    assert comparison.unexplained == 1
    assert comparison.classes == {"acknowledge answered error differently": 1}
    assert comparison.compared == 3 and comparison.equal == 2


def test_timing_records_taken_and_the_start_offset_before_any_write_are_allowed(tmp_path):
    left = run_with(tmp_path / "left", {"records": [[0, 2, 1]]}, {"error": "INVALID_RECORD_STATE"},
                    {"stored_spso": 0})
    right = run_with(tmp_path / "right", {"records": []}, {"error": "INVALID_RECORD_STATE"},
                     {"stored_spso": -1})
    comparison = compare_runs([left], [right])
    assert comparison.unexplained == 0
    assert set(comparison.classes) == {"acquired other records (each allowed by the model)",
                                       "stored start offset before the first write"}


def test_a_run_only_one_side_made_is_unexplained(tmp_path):
    left = run_with(tmp_path / "left", {"records": []}, {"error": "NONE"}, {"stored_spso": 0})
    assert compare_runs([left], []).unexplained == 1


@pytest.mark.slow
def test_the_reference_broker_against_kafka_has_no_unexplained_difference(tmp_path):
    try:
        KafkaRuntime.resolve("4.2")
    except KafkaUnavailable as reason:
        pytest.skip(f"Apache Kafka cannot run here: {reason}")
    result = subprocess.run([sys.executable, "-m", "kipcheck", "conform", "--compare", "kafka:4.2",
                             "--scenario", "hostile-acks", "--scenario", "late-ack", "--scenario", "poison-message",
                             "--scenario", "swarm:1", "--scenario", "swarm:2", "--work-dir", str(tmp_path)],
                            capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, result.stdout[-4000:]
    compared = result.stdout.split("embedded against kafka:4.2: ")[1]
    assert "UNEXPLAINED" not in compared and int(compared.split()[0]) > 50
