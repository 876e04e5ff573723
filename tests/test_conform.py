"""kipcheck conform: arguments refused before anything runs, the pieces of the verdict, and seeded broker bugs caught.

The slow tests start the reference broker with a bug from tests/broker_bugs.py patched in (a test-only
launcher) and show the probe that must catch it does, while the clean broker passes the same probes;
bench/bench_conform_bugs.py runs the whole table.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ElementTree

import pytest

from broker_bugs import BUGS, launcher
from kipcheck.cli import main
from kipcheck.model.cross_machine import reloaded_window
from kipcheck.oracle.check import check_lines
from kipcheck.oracle.conformance.probes.runner import run_probes
from kipcheck.oracle.conformance.probes.tolerance import Timers
from kipcheck.oracle.conformance.shrink import shrink_lines
from kipcheck.oracle.conformance.targets import TARGET_MODULES, TargetOptions, forms, resolve, target_classes
from kipcheck.oracle.conformance.targets.embedded import EmbeddedTarget

HEADER = {"format": "kipcheck-trace", "version": 1, "machine": "share-partition", "profile": "kafka-4.2",
          "config": {"record_lock_duration_ms": 1000}}


def trace(*steps) -> list[str]:
    return [json.dumps(HEADER)] + [json.dumps({"step": number, **step}) for number, step in enumerate(steps, 1)]


@pytest.mark.parametrize("arguments, message", [
    (["--scenario", "no-such", "--scenario", "swarm:x"], "unknown scenarios 'no-such', 'swarm:x' (known: "),
    (["--target", "wire://nohost"], "unknown target 'wire://nohost' (accepted: embedded, kafka:LINE[x3], wire://HOST:PORT, librdkafka-mock, reference, python:MODULE:FACTORY)"),
    (["--target", "wire://h:70000"], "is not a TCP port"),
    (["--set", "group.share.delivery.count.limit=zero"], "must be a positive integer, found 'zero'"),
    (["--set", "log.dirs=/tmp"], "expected NAME=VALUE with NAME one of"),
    (["--target", "wire://h:9092", "--scenario", "share-groups"], "client scenarios (share-groups) start their own"),
    (["--target", "embedded", "--profile", "kafka-4.4"], "--target embedded: profile kafka-4.4 is a judging profile"),
    (["--target", "reference", "--profile", "kafka-4.4"], "--target reference: profile kafka-4.4 is a judging profile"),
])
def test_bad_arguments_exit_2_before_anything_runs(capsys, arguments, message):
    assert main(["conform", *arguments]) == 2
    captured = capsys.readouterr()
    assert captured.out == "", "nothing ran"
    assert message in captured.err


@pytest.mark.parametrize("text, name, restarts", [
    ("embedded", "embedded", True),
    ("wire://broker.example:09092", "wire://broker.example:9092", False),
    ("librdkafka-mock", "librdkafka-mock", False),
    ("reference", "reference", False),
    ("python:kipcheck.oracle.conformance.adapter_example:make_partition",
     "python:kipcheck.oracle.conformance.adapter_example:make_partition", False),
])
def test_each_target_says_what_it_cannot_show_and_how_its_failure_replays(text, name, restarts):
    """Nothing is started: a target is opened by the session only."""
    target = resolve(text, TargetOptions("kip"))
    assert target.can_restart == restarts
    assert ({"XM-1", "SP-26"} <= set(target.unobservable)) != restarts, "a restart shows XM-1 and SP-26"
    assert target.replay("late-ack") == f"kipcheck conform --target {name} --profile kip --scenario late-ack"
    assert (target.client_scenarios() != []) == (text == "embedded"), "only the embedded target runs client scenarios"


def test_the_kafka_44_profile_judges_kafka_44_and_the_examples():
    """kafka-4.4 is a judging profile (spec/README.md): kafka:4.4 is judged by it unless told otherwise, it is the
    target `--profile kafka-4.4` probes unless told otherwise, and the examples are judged under any profile."""
    from kipcheck.oracle.conformance.targets import default_profile, default_target

    assert [default_profile(text) for text in ("kafka:4.4", "kafka:4.4x3", "kafka:4.2", "embedded", "wire://h:1")] == \
        ["kafka-4.4", "kafka-4.4", "kafka-4.2", "kafka-4.2", "kafka-4.2"]
    assert [default_target(profile) for profile in ("kafka-4.4", "kafka-4.2", "kip", None)] == \
        ["kafka:4.4", "embedded", "embedded", "embedded"]
    for text in ("wire://h:9092", "python:kipcheck.oracle.conformance.adapter_example:make_partition"):
        assert resolve(text, TargetOptions("kafka-4.4")).profile == "kafka-4.4"
    assert main(["conform", "--profile", "kafka-4.4", "--no-broker"]) == 0


def test_the_embedded_target_replays_with_its_launcher_and_the_registry_names_every_form():
    target = resolve("embedded", TargetOptions("kafka-4.2", launcher=("python", "bug.py")))
    assert target.replay("swarm:3").endswith("--scenario swarm:3 --launcher 'python bug.py'")
    assert list(forms()) == ["embedded", "kafka:LINE[x3]", "wire://HOST:PORT", "librdkafka-mock", "reference", "python:MODULE:FACTORY"]
    assert list(TARGET_MODULES) == [target_class.__module__.rpartition(".")[2]
                                    for target_class in target_classes()]


def test_conformance_is_an_alias_and_junit_lists_every_example(tmp_path, capsys):
    report = tmp_path / "report.xml"
    assert main(["conformance", "--no-broker", "--junit", str(report)]) == 0
    assert "verdict: PASS" in capsys.readouterr().out
    cases = ElementTree.parse(report).getroot().iter("testcase")
    assert len(list(cases)) > 50
    assert not list(ElementTree.parse(report).getroot().iter("failure"))


def test_a_lone_fetcher_sent_away_empty_breaks_sp_28_and_only_when_records_were_there():
    appended = {"at_ms": 0, "actor": "log", "op": "append", "args": {"count": 2}}
    held = {"at_ms": 1, "actor": "a", "op": "acquire", "args": {"max_records": 2}, "observed": {"records": [[0, 1, 1]]}}
    waited = {"at_ms": 2, "actor": "b", "op": "acquire", "args": {"max_records": 2, "wait_ms": 500},
              "observed": {"records": []}}
    assert check_lines(trace(appended, held, waited)).status == "ok", "nothing was acquirable: empty is right"
    after_leave = [appended, held, {"at_ms": 2, "actor": "a", "op": "leave", "args": {}}, {**waited, "at_ms": 3}]
    verdict = check_lines(trace(*after_leave))
    assert (verdict.status, verdict.clause, verdict.step) == ("violation", "SP-28", 4)
    no_wait = {**waited, "at_ms": 3, "args": {"max_records": 2}}
    assert check_lines(trace(appended, held, after_leave[2], no_wait)).status == "ok", "without wait_ms, SP-3 allows it"


def test_shrinking_keeps_the_fault_and_drops_the_rest():
    steps = [{"at_ms": 0, "actor": "log", "op": "append", "args": {"count": 1}} for _ in range(3)]
    steps += [{"at_ms": 1, "actor": f"m{index}", "op": "acquire", "args": {"max_records": 1},
               "observed": {"records": [[index, index, 1]]}} for index in range(3)]
    steps += [{"at_ms": 2, "actor": "m0", "op": "acknowledge", "args": {"batches": [{"first": 1, "last": 1, "type": "accept"}]},
               "observed": {"error": "NONE"}}]  # m1 holds offset 1: INVALID_RECORD_STATE (SP-15)
    lines = trace(*steps)
    verdict = check_lines(lines)
    assert verdict.clause == "SP-15"
    shrunk = shrink_lines(lines)
    again = check_lines(shrunk)
    assert (again.clause, again.allowed) == (verdict.clause, verdict.allowed)
    assert len(shrunk) < len(lines)
    assert [json.loads(line)["step"] for line in shrunk[1:]] == list(range(1, len(shrunk)))


def test_xm_1_a_restart_makes_acquired_records_available_with_the_count_of_their_last_write():
    """XM-1: the window a restarted share-partition must serve."""
    window = [[0, 1, "acknowledged", 1], [2, 3, "acquired", 2], [4, 4, "available", 1], [5, 6, "acquired", 1]]
    assert reloaded_window(window) == [[0, 1, "acknowledged", 1], [2, 3, "available", 1], [4, 4, "available", 1]]
    assert reloaded_window([[0, 2, "acquired", 1]]) == [], "never written: past the reloaded SPEO"


def test_a_request_is_never_sent_into_a_deadline_window():
    timers = Timers(tolerance_ms=100)
    assert timers.fit(500, 50) == 500, "no lock taken: the whole wait"
    now = timers.now_ms()
    timers.lock_taken(now, now, 10_000)  # a deadline in [now + 9900, now + 10100]
    assert timers.fit(500, 50) == 500
    timers.windows.append((now + 600, now + 700))
    assert 200 <= timers.fit(500, 50) < 550, "shortened to end before the window"


def probe(bug: str | None, scenarios: list[str], tmp_path):
    target = EmbeddedTarget("embedded", TargetOptions("kafka-4.2", launcher=launcher(bug) if bug else None))
    try:
        target.open(tmp_path)
        return run_probes(target, scenarios, tmp_path / "probes", seed=1, budget_s=60, tolerance_ms=300)
    finally:
        target.close()


CAUGHT_BY = {
    "speo-inclusive": "hostile-acks",
    "session-epoch-unchecked": "wrong-epochs",
    "KAFKA-18084-reacquired-without-timer": "late-ack",
    "merge-keeps-lower-count": "broker-restart",
    "session-limit-off-by-one": "session-limit",   # the sessions spread over two groups (Kafka 4.2's group size)
}


@pytest.mark.slow
@pytest.mark.parametrize("bug", sorted(CAUGHT_BY))
def test_a_seeded_broker_bug_is_caught_from_the_wire(tmp_path, bug):
    assert bug in BUGS
    [run] = probe(bug, [CAUGHT_BY[bug]], tmp_path)
    assert run.outcome == "failed", f"{bug} was not caught by {run.name}: {run.outcome} {run.detail}"
    assert any(verdict.status == "violation" for verdict in run.verdicts), "caught without a clause: not a catch"
    print("\n".join(verdict.summary() for verdict in run.verdicts if verdict.status != "ok"))


@pytest.mark.slow
def test_the_clean_broker_passes_the_same_probes(tmp_path):
    runs = probe(None, sorted(set(CAUGHT_BY.values())), tmp_path)
    assert [(run.name, run.outcome) for run in runs] == [(name, "passed") for name in sorted(set(CAUGHT_BY.values()))], \
        [(run.name, run.detail, [verdict.summary() for verdict in run.verdicts if verdict.status != "ok"]) for run in runs]


def test_librdkafka_mock_is_probed_and_its_known_difference_found(tmp_path, capsys):
    """spec/librdkafka-mock.md: the mock acquires new records up to max_records exactly (SP-6 of kafka-4.2).
    The HTML report draws the counterexample, the member that acquired in red."""
    report = tmp_path / "report.html"
    code = main(["conform", "--target", "librdkafka-mock", "--scenario", "hostile-acks", "--work-dir", str(tmp_path),
                 "--html", str(report)])
    out = capsys.readouterr().out
    assert code == 1
    assert "FAILED          SP-6" in out and "hostile-acks" in out
    assert "NOT OBSERVABLE  XM-1" in out, "the runner cannot restart the mock"
    assert "replay:    kipcheck conform --target librdkafka-mock --profile kafka-4.2 --scenario hostile-acks" in out
    page = report.read_text()
    assert page.count("<svg") >= 1 and "breaks SP-6: " in page and "stroke='#d62728'" in page


def test_reference_target_passes_and_a_seeded_partition_bug_behind_the_adapter_is_caught(tmp_path):
    """The python:MODULE:FACTORY path on impl/share's SharePartition (the worked example) and on copies with a bug."""
    import broker_bugs
    from kipcheck.impl.share.partition import SharePartition
    from kipcheck.oracle.conformance.adapter_example import make_partition
    from kipcheck.oracle.conformance.targets.in_process import load_factory, run_seeds

    assert load_factory("reference") is make_partition
    seeds = list(range(1, 61))
    clean = run_seeds(make_partition, "kafka-4.2", tmp_path / "clean", 1, 60, seeds=seeds)
    assert [run.outcome for run in clean] == ["passed"] * len(seeds), [run.verdicts[0].summary() for run in clean if run.failed]
    for make_bug in (broker_bugs._expired_count_kept, broker_bugs._spso_moves_while_pending, broker_bugs._foreign_ack):
        bug = make_bug(SharePartition)
        factory = lambda config, bug=bug: bug(make_partition(config).config)  # noqa: E731
        runs = run_seeds(factory, "kafka-4.2", tmp_path / make_bug.__name__, 1, 60, seeds=seeds)
        assert any(run.outcome == "failed" for run in runs), f"{bug.__doc__} survived {len(seeds)} seeded runs"


def test_the_adapter_target_is_checked_before_anything_runs(capsys):
    assert main(["conform", "--target", "python:no_such_module:make"]) == 2
    assert "cannot load 'python:no_such_module:make'" in capsys.readouterr().err
    assert main(["conform", "--target", "reference", "--scenario", "late-ack"]) == 2
