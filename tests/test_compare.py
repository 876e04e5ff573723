"""conform --compare: two brokers' answers to the same probe runs, compared under the rules of spec/conformance.md."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from kipcheck.oracle.conformance import session
from kipcheck.oracle.conformance.compare import compare_runs
from kipcheck.oracle.conformance.targets import TargetOptions
from kipcheck.oracle.conformance.targets.embedded import EmbeddedTarget
from kipcheck.oracle.kafka.runtime import KafkaRuntime, KafkaUnavailable

HEADER = {"format": "kipcheck-trace", "version": 1, "machine": "share-partition", "profile": "kafka-4.2",
          "config": {"record_lock_duration_ms": 2000}}


@dataclass
class Run:
    name: str
    paths: list[Path] = field(default_factory=list)
    observations: dict[str, dict] = field(default_factory=dict)


def run_with(directory: Path, *answers: dict, late_ms: int = 0) -> Run:
    """A probe run of one share-partition trace: an append, an acquire, an acknowledge and a check, answered so;
    the acknowledgement and the check `late_ms` later."""
    steps = [{"op": "append", "actor": "log", "args": {"count": 3}},
             {"op": "acquire", "actor": "alice", "args": {"max_records": 3}},
             {"op": "acknowledge", "actor": "alice", "args": {"batches": [{"first": 0, "last": 2, "type": "accept"}]}},
             {"op": "check", "actor": "check", "args": {}}]
    directory.mkdir(parents=True)
    path = directory / "late-ack.01.share-partition.jsonl"
    lines = [HEADER] + [{"step": number, "at_ms": number * 7 + (late_ms if number > 2 else 0), **step,
                         **({"observed": observed} if observed else {})}
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
                             "--scenario", "swarm:1", "--scenario", "swarm:2", "--scenario", "explicit-acknowledgement",
                             "--scenario", "plain-fetch", "--work-dir", str(tmp_path)],
                            capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, result.stdout[-4000:]
    compared = result.stdout.split("embedded against kafka:4.2: ")[1]
    assert "UNEXPLAINED" not in compared and int(compared.split()[0]) > 50
    # What the runs and the two real-client scenarios left, read on both brokers and compared.
    outside = [json.loads(path.read_text()) for path in tmp_path.glob("**/explicit-acknowledgement/outside.json")]
    assert len(outside) == 2 and all(view["share start offset"] and view["log end offset"] for view in outside)


def test_a_second_target_that_cannot_be_reached_is_not_judged(tmp_path, capsys):
    """The first target's runs are judged; the second, never reached, makes the verdict NOT JUDGED (exit 2)."""
    from kipcheck.cli import main

    assert main(["conform", "--scenario", "wrong-epochs", "--compare", "wire://127.0.0.1:1", "--target-timeout", "0.5",
                 "--work-dir", str(tmp_path / "run")]) == 2
    captured = capsys.readouterr()
    assert "PASSED          wrong-epochs" in captured.out
    assert "verdict: NOT JUDGED" in captured.out and "wire://127.0.0.1:1 could not be reached" in captured.out
    assert "kipcheck conform: cannot probe wire://127.0.0.1:1: not reachable and ready after 0.5 s" in captured.err


def test_the_records_sent_differ_with_the_records_acquired(tmp_path):
    """N-2: the records an answer's bytes held (SP-48) differ when the acquisitions do; on their own, they are not
    explained."""
    left = run_with(tmp_path / "left", {"records": [[0, 2, 1]], "delivered": [[0, 2]]})
    right = run_with(tmp_path / "right", {"records": [], "delivered": []})
    comparison = compare_runs([left], [right])
    assert comparison.unexplained == 0 and sum(comparison.classes.values()) == 2, comparison.render("left", "right")
    comparison = compare_runs([run_with(tmp_path / "same", {"records": [[0, 2, 1]], "delivered": [[0, 2]]})],
                              [run_with(tmp_path / "fewer", {"records": [[0, 2, 1]], "delivered": [[0, 1]]})])
    assert comparison.unexplained == 1, comparison.render("same", "fewer")


def test_what_a_run_left_behind_is_compared_subject_by_subject(tmp_path):
    """The outside view after a run (probes/outside.py): each subject of each kind is one observation; the probe's
    random group id is made the same on both sides."""
    seen = {"share group state": {"kipcheck-late-ack-0123abcd": "Stable"}, "member epoch": {"alice": 3, "bob": 4},
            "log end offset": {"kipcheck-late-ack-0123abcd-t0:0": 10}}
    other = {"share group state": {"kipcheck-late-ack-89abcdef": "Stable"}, "member epoch": {"alice": 3, "bob": 4},
             "log end offset": {"kipcheck-late-ack-89abcdef-t0:0": 9}}
    comparison = compare_runs([Run("late-ack", observations=seen)], [Run("late-ack", observations=other)])
    assert (comparison.compared, comparison.equal, comparison.unexplained) == (4, 3, 1)
    assert comparison.classes == {"after the run, log end offset differs": 1}
    assert compare_runs([Run("late-ack", observations=seen)], [Run("late-ack")]).unexplained == 1


@pytest.mark.slow
def test_a_broker_whose_log_end_offset_is_wrong_differs_after_the_run(tmp_path):
    """A reference broker whose ListOffsets answers the log's last offset for its end offset (tests/broker_bugs.py)
    passes the probes, which never ask for it; compared with a correct reference broker, the outside view after the
    run shows the difference, unexplained. Two correct brokers differ in nothing seen from outside."""
    from broker_bugs import launcher

    def probed(name: str, bug: str | None = None):
        options = TargetOptions("kafka-4.2", launcher=launcher(bug) if bug else None)
        return session.run(EmbeddedTarget("embedded", options), ["wrong-epochs"], [], tmp_path / name, seed=1,
                           budget_s=60, tolerance_ms=None)

    correct, again, broken = probed("correct"), probed("again"), probed("broken", "log-end-is-last-offset")
    assert broken.failures == 0 and correct.failures == 0, broken.render(False, "embedded")
    comparison = compare_runs(broken.probe_runs, correct.probe_runs)
    assert comparison.classes["after the run, log end offset differs"] == 1, comparison.render("broken", "correct")
    assert comparison.unexplained >= 1
    same = compare_runs(again.probe_runs, correct.probe_runs)
    assert not [name for name in same.classes if name.startswith("after the run")], same.render("again", "correct")
    seen = correct.probe_runs[0].observations
    assert {"share group state", "share member epoch", "share member assignment", "log end offset"} <= set(seen)


def test_answers_after_a_lock_expired_before_them_on_one_side_only_are_allowed(tmp_path):
    """N-5: the records' lock (2000 ms) expired before the acknowledgement on the right side only, as the model
    replays each side on its own clock: the acknowledgement and the start offset stored after may differ there."""
    left = run_with(tmp_path / "left", {"records": [[0, 2, 1]]}, {"error": "NONE"}, {"stored_spso": 0})
    right = run_with(tmp_path / "right", {"records": [[0, 2, 1]]}, {"error": "INVALID_RECORD_STATE"},
                     {"stored_spso": 1}, late_ms=2500)
    comparison = compare_runs([left], [right])
    assert comparison.classes == {"answered differently after a lock expired before it on one side only": 2}
    assert comparison.unexplained == 0
    on_time = run_with(tmp_path / "on-time", {"records": [[0, 2, 1]]}, {"error": "INVALID_RECORD_STATE"},
                       {"stored_spso": 1}, late_ms=500)
    assert compare_runs([left], [on_time]).unexplained == 2, "no lock expired: the same differences are unexplained"


def test_epochs_are_compared_as_differences_from_their_group_epoch(tmp_path):
    """N-6: Kafka moves a share group's epoch also for its own bookkeeping; a member one epoch behind its group is
    compared, how often the epoch moved is not."""
    ours = {"share group epoch": {"g": 3}, "share group assignment epoch": {"g": 3},
            "share member epoch": {"g alice": 2, "g bob": 3}}
    kafka = {"share group epoch": {"g": 6}, "share group assignment epoch": {"g": 6},
             "share member epoch": {"g alice": 5, "g bob": 6}}
    comparison = compare_runs([Run("wrong-epochs", observations=ours)], [Run("wrong-epochs", observations=kafka)])
    assert comparison.classes == {"after the run, an epoch differs by what the group epoch does": 4}
    assert comparison.unexplained == 0
    caught_up = {**kafka, "share member epoch": {"g alice": 6, "g bob": 6}}
    comparison = compare_runs([Run("wrong-epochs", observations=ours)], [Run("wrong-epochs", observations=caught_up)])
    assert comparison.classes["after the run, share member epoch differs"] == 1 and comparison.unexplained == 1


def test_a_groups_membership_after_a_restart_is_explained_by_the_finding_and_only_then(tmp_path):
    """Kafka keeps a share group's members over a restart (spec/kafka-findings.md); without a restart the same
    difference is unexplained."""
    ours = {"broker restarts": {"g": 1}, "share group size": {"g": 3}, "log end offset": {"g-t0:0": 6}}
    kafka = {"broker restarts": {"g": 1}, "share group size": {"g": 4}, "log end offset": {"g-t0:0": 6}}
    comparison = compare_runs([Run("broker-restart", observations=ours)], [Run("broker-restart", observations=kafka)])
    assert comparison.classes == {"after a broker restart, the share group's members differ": 1}
    assert comparison.unexplained == 0 and "finding" in comparison.render("embedded", "kafka:4.2")
    unrestarted = [Run("late-ack", observations={**ours, "broker restarts": {"g": 0}}),
                   Run("late-ack", observations={**kafka, "broker restarts": {"g": 0}})]
    assert compare_runs(unrestarted[:1], unrestarted[1:]).unexplained == 1


def test_which_member_holds_a_partition_may_differ_but_not_which_partitions_are_held(tmp_path):
    """N-7: the assignor places partitions by (random) member id: the group's assigned partitions are compared."""
    ours = {"share member assignment": {"g m1": ["g-t0:1"], "g m2": ["g-t0:0"]}}
    kafka = {"share member assignment": {"g m1": ["g-t0:0"], "g m2": ["g-t0:0", "g-t0:1"]}}
    comparison = compare_runs([Run("swarm:6", observations=ours)], [Run("swarm:6", observations=kafka)])
    assert comparison.classes == {"after the run, another member was assigned a partition": 2}
    one_unassigned = {"share member assignment": {"g m1": ["g-t0:0"], "g m2": ["g-t0:0"]}}
    comparison = compare_runs([Run("swarm:6", observations=ours)], [Run("swarm:6", observations=one_unassigned)])
    assert comparison.unexplained == 1, "t0:1 assigned to no member on one side"
