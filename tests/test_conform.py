"""kipcheck conform: arguments refused before anything runs, the pieces of the verdict, and seeded broker bugs caught.

The slow tests start the reference broker with a bug from tests/broker_bugs.py patched in (a test-only
launcher) and show the probe that must catch it does, while the clean broker passes the same probes;
bench/bench_conform_bugs.py runs the whole table.
"""

from __future__ import annotations

import datetime
import io
import json
import socket
import subprocess
import sys
import time
import xml.etree.ElementTree as ElementTree

import crafted_batches
import pytest
from kio.records.schema import NewRecordBatch, Record
from kio.records.writers import write_new_batch
from kio.static.primitive import i8, i16, i32, i64

from broker_bugs import BUGS, launcher
from kipcheck.impl.wire.batches import COMMIT, marker_batch
from kipcheck.cli import main
from kipcheck.model.cross_machine import reloaded_window
from kipcheck.oracle.check import check_lines
from kipcheck.oracle.share_traces import delivered_runs
from kipcheck.oracle.conformance.probes.runner import run_probes
from kipcheck.oracle.conformance.probes.tolerance import Timers
from kipcheck.oracle.conformance.shrink import shrink_lines
from kipcheck.oracle.conformance.targets import (TARGET_MODULES, TargetError, TargetOptions, forms, resolve,
                                                 target_classes)
from kipcheck.oracle.conformance.targets.embedded import (
    DEFAULT_LAUNCHER, EmbeddedBroker, EmbeddedTarget, embedded_settings,
)

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
    (["--target", "wire://h:9092", "--java-clients"], "--java-clients: --target wire://h:9092 runs no client"),
    (["--target", "reference", "--java-clients"], "--java-clients: a python or reference target runs no client"),
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
    assert (target.client_scenarios() != []) == (text == "embedded"), "only the runner's own brokers run client scenarios"


def test_the_kafka_target_runs_the_portable_client_scenarios_on_its_own_cluster():
    from kipcheck.oracle.conformance import scenarios

    target = resolve("kafka:4.2", TargetOptions("kafka-4.2"))
    assert target.clients_on_target and target.client_scenarios() == scenarios.portable_names()
    confluent = {"share-groups", "explicit-acknowledgement", "plain-fetch", "groups-broker-killed"}
    assert set(scenarios.portable_names()) == {*scenarios.java_names(), *confluent}
    with pytest.raises(TargetError, match=r"client scenarios \(delivery-limit\) start their own"):
        target.scenarios(["delivery-limit", "java-share-explicit"])
    assert target.scenarios(["java-share-explicit"]) == ([], ["java-share-explicit"])
    assert target.scenarios([])[1] == sorted(confluent, key=scenarios.names().index)


@pytest.mark.parametrize("text", ["embedded", "kafka:4.2"])
def test_the_java_client_scenarios_run_when_named_or_with_java_clients(text):
    """A JVM each and Kafka's jars: out of the default selection (`make conformance`), in it with --java-clients."""
    from kipcheck.oracle.conformance import scenarios

    java = scenarios.java_names()
    assert {"java-share-explicit", "java-share-renew", "java-groups-classic", "java-groups-consumer"} <= set(java)
    plain = resolve(text, TargetOptions("kafka-4.2"))
    probes, clients = plain.scenarios([])
    assert "late-ack" in probes and not set(clients) & set(java)
    assert ("delivery-limit" in clients) == (text == "embedded") and "share-groups" in clients
    with_java = resolve(text, TargetOptions("kafka-4.2", java_clients=True))
    assert with_java.scenarios([])[1] == [*clients, *java]
    assert with_java.scenarios(["late-ack"]) == (["late-ack"], java)
    assert plain.scenarios(["java-share-renew"]) == ([], ["java-share-renew"])


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


def probe_over_wire(bug: str | None, scenarios: list[str], tmp_path, settings: dict[str, str] | None = None):
    """Probe runs against the reference broker (with `bug` patched in) over the wire, the runner told only
    `settings` (--set): the rest it reads from the broker."""
    profile = "kafka-4.2"
    with EmbeddedBroker(tmp_path / "broker", embedded_settings(profile), profile=profile,
                        launcher=launcher(bug) if bug else DEFAULT_LAUNCHER, traced=False) as broker:
        target = resolve(f"wire://{broker.bootstrap}", TargetOptions(profile, settings or {}))
        target.contact(timeout_s=30)
        return target, run_probes(target, scenarios, tmp_path / "probes", seed=1, budget_s=60, tolerance_ms=300)


# What only a client speaking as real clients do sees, each caught over the wire with no --set.
CAUGHT_OVER_WIRE = {
    "piggyback-acquired-dropped": "piggybacked-acks",
    "piggyback-acks-ignored": "piggybacked-acks",
    "forget-ignored": "forgotten-partition",
    "renew-ignored": "renewed-locks",
    "record-limit-ignored": "record-limit",
    "last-batch-not-sent": "final-fetch-with-acks",
    "next-batch-sent": "hostile-acks",
    "lock-misreported": "lock-kept",
}


@pytest.mark.slow
@pytest.mark.parametrize("bug", sorted(CAUGHT_OVER_WIRE))
def test_what_real_clients_send_and_read_is_probed_over_the_wire_with_no_settings_given(tmp_path, bug):
    """SS-19, SP-48 and the clauses of version 2 and of piggybacked acknowledgements, judged from the wire; the
    settings are the broker's own word (a lie about the lock duration is caught by what the broker does)."""
    assert bug in BUGS
    _, [run] = probe_over_wire(bug, [CAUGHT_OVER_WIRE[bug]], tmp_path)
    assert run.outcome == "failed", f"{bug} was not caught by {run.name}: {run.outcome} {run.detail}"
    print("\n".join(verdict.summary() for verdict in run.verdicts if verdict.status != "ok"))
    assert any(verdict.status == "violation" for verdict in run.verdicts), "caught without a clause: not a catch"


@pytest.mark.slow
def test_the_clean_broker_passes_them_over_the_wire_and_describes_its_settings(tmp_path):
    names = sorted(set(CAUGHT_OVER_WIRE.values()))
    target, runs = probe_over_wire(None, names, tmp_path, {"group.share.delivery.count.limit": "5"})
    assert [(run.name, run.outcome) for run in runs] == [(name, "passed") for name in names], \
        [(run.name, run.detail, [verdict.summary() for verdict in run.verdicts if verdict.status != "ok"]) for run in runs]
    report = target.settings_report()
    assert "group.share.record.lock.duration.ms=2000 (described by the broker)" in report
    assert "group.share.delivery.count.limit=5 (--set; the broker describes 3)" in report, "--set wins, and is doubted"


def test_an_unreachable_target_is_one_line_and_exit_2(capsys):
    assert main(["conform", "--target", "wire://127.0.0.1:1", "--target-timeout", "0.5"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "", "nothing was judged"
    assert captured.err.count("\n") == 1
    assert captured.err.startswith("kipcheck conform: cannot probe wire://127.0.0.1:1: not reachable and ready after")


@pytest.mark.slow
def test_a_target_not_listening_yet_is_waited_for(tmp_path):
    port = free_port()
    command = [sys.executable, "-m", "kipcheck", "conform", "--target", f"wire://127.0.0.1:{port}", "--scenario",
               "wrong-epochs", "--target-timeout", "60", "--work-dir", str(tmp_path / "conform")]
    runner = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    time.sleep(3)
    broker = EmbeddedBroker(tmp_path / "broker", embedded_settings("kafka-4.2"), traced=False)
    broker.port = port
    with broker:
        output, _ = runner.communicate(timeout=300)
    assert runner.returncode == 0, output
    assert "PASSED          wrong-epochs" in output


@pytest.mark.slow
def test_a_target_that_goes_away_mid_run_is_not_judged_and_exits_2(tmp_path):
    """A broker that dies during a run makes it inconclusive, never failed; probing stops; exit status 2."""
    broker = EmbeddedBroker(tmp_path / "broker", embedded_settings("kafka-4.2"), launcher=launcher("exits-mid-run"),
                            traced=False)
    broker.start()
    try:
        command = ["conform", "--target", f"wire://{broker.bootstrap}", "--work-dir", str(tmp_path / "conform"),
                   "--scenario", "hostile-acks", "--scenario", "late-ack", "--scenario", "partial-ack-then-expiry",
                   "--scenario", "interleaved-release", "--scenario", "swarm", "--budget", "300"]
        result = subprocess.run([sys.executable, "-m", "kipcheck", *command], capture_output=True, text=True,
                                timeout=600)
    finally:
        broker.kill()
    assert result.returncode == 2, result.stdout + result.stderr
    assert "FAILED" not in result.stdout
    assert "INCONCLUSIVE" in result.stdout and "the target went away" in result.stdout
    assert "verdict: NOT JUDGED" in result.stdout
    runs = [line.split()[0] for line in result.stdout.splitlines()
            if line.startswith("  ") and line.split()[0] in ("PASSED", "INCONCLUSIVE")]
    assert runs[-1] == "INCONCLUSIVE" and runs.count("INCONCLUSIVE") == 1, "probing stopped once the target was gone"


def test_the_records_of_an_answer_are_read_as_sent():
    """SP-48: data records by their offsets, a transaction marker as the one record of its control batch, a
    record sent twice as overlapping runs, a batch that does not read as nothing."""
    def data(base: int, count: int) -> bytes:
        buffer = io.BytesIO()
        stamp = datetime.datetime.now(datetime.timezone.utc)
        write_new_batch(buffer, NewRecordBatch(producer_id=i64(-1), producer_epoch=i16(-1), base_sequence=i32(-1),
                                               attributes=i16(0), records=tuple(
            Record(attributes=i8(0), timestamp=stamp, offset=i64(base + index), key=None, value=b"v", headers=())
            for index in range(count))))
        return buffer.getvalue()

    marker = bytearray(marker_batch(7, 0, COMMIT))
    marker[0:8] = (5).to_bytes(8, "big")   # the base offset is not under the CRC
    assert delivered_runs(data(0, 3) + data(3, 2) + bytes(marker)) == [[0, 5]]
    assert delivered_runs(data(0, 3) + data(2, 2)) == [[0, 2], [2, 3]]
    corrupt = bytearray(data(3, 2))
    corrupt[-1] ^= 0xFF
    assert delivered_runs(data(0, 3) + bytes(corrupt)) == [[0, 2]]
    assert delivered_runs(None) == delivered_runs(b"") == []


@pytest.mark.parametrize("codec", crafted_batches.CODECS)
def test_the_records_of_a_compressed_answer_are_read_as_sent(codec):
    """SP-48 on every codec Kafka has: the records of compressed batches by their offsets, a payload that does not
    decompress as nothing; what cannot be known (a compression type Kafka does not have) is None, not judged."""
    from crafted_batches import batch, good_records

    first, second = batch(good_records(3), 3, codec=codec), batch(good_records(2), 2, codec=codec, base_offset=3)
    assert delivered_runs(first + second) == [[0, 4]]
    if codec != crafted_batches.NONE:
        garbled = batch(good_records(2), 2, codec=codec, compressed=b"\x00not compressed", base_offset=3)
        assert delivered_runs(first + garbled) == [[0, 2]]
    unknown = batch(good_records(2), 2, compressed=b"whatever", attributes=6, base_offset=3)
    assert delivered_runs(first + unknown) is None


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


def free_port() -> int:
    with socket.socket() as probe_socket:
        probe_socket.bind(("127.0.0.1", 0))
        return probe_socket.getsockname()[1]


def test_the_probes_traces_of_the_reference_broker_say_how_it_answers_a_straddling_batch():
    """SP-40: the reference broker answers INVALID_RECORD_STATE where Kafka 4.2 throws (`straddle_npe: flag` in its
    own traces); the probes' traces of it say so too (swarm seed 11 sends such a batch), those of another broker
    expect Kafka's answer."""
    embedded = resolve("embedded", TargetOptions("kafka-4.2", {}))
    assert embedded.partition_trace_config()["straddle_npe"] == "flag"
    assert "straddle_npe" not in resolve("wire://127.0.0.1:9092", TargetOptions("kafka-4.2", {})).partition_trace_config()
    assert "straddle_npe" not in resolve("embedded", TargetOptions("kip", {})).partition_trace_config()
