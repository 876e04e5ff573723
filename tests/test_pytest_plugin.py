"""The pytest plugin (kipcheck/testing/) in test sessions of its own (pytester): assert_conforms, the judged
kipcheck_broker and kipcheck_kafka fixtures, and --kipcheck-traces pass and fail where they should, and
their failures read well. A session that uses none of it imports nothing of kipcheck's beyond the plugin
module and runs none of its hooks per test. The README's worked examples run in test_plugin_examples.py.
"""

import json
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

import kipcheck

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parent.parent
SHARE_PARTITION = ROOT / "oracle" / "examples" / "share-partition"
GOOD = SHARE_PARTITION / "kip-lock-expiry.jsonl"
SP21 = SHARE_PARTITION / "violations" / "archived-at-the-limit-delivered-again.SP-21.jsonl"
SP21_HEADLINE = 'step 6 breaks SP-21 "The delivery count limit archives a record leaving acquired"'
# What a session that never asks for the plugin must not import: kipcheck beyond the plugin, and the heavy.
NEVER_IMPORTED_UNASKED = ("kipcheck.oracle", "kipcheck.impl", "kipcheck.model", "kipcheck.commands",
                          "kipcheck.testing.targets", "kipcheck.testing.findings", "kipcheck.testing.session",
                          "kipcheck.testing.assertions", "z3", "pyspark", "confluent_kafka", "kio", "msgspec")
MODULES_AT_THE_END = """
import json, sys

def pytest_sessionfinish(session):
    plugins = session.config.pluginmanager
    with open("modules.json", "w") as out:
        json.dump({"modules": sorted(sys.modules), "plugin": plugins.has_plugin("kipcheck"),
                   "per_test": plugins.has_plugin("kipcheck-judged-calls")}, out)
"""


def copy_trace(source: Path, target: Path) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)
    return target


@pytest.mark.parametrize("arguments", [["--co"], []], ids=["collecting", "running"])
def test_a_session_that_uses_none_of_it_imports_nothing_and_hooks_nothing(pytester, arguments):
    pytester.makeconftest(MODULES_AT_THE_END)
    pytester.makepyfile(test_plain="def test_plain():\n    assert 1 + 1 == 2\n")
    result = pytester.runpytest_subprocess(*arguments)
    assert result.ret == 0, result.stdout.str()
    seen = json.loads((pytester.path / "modules.json").read_text())
    assert seen["plugin"] and "kipcheck.testing.plugin" in seen["modules"]  # loaded, so the rest means something
    imported = [name for name in seen["modules"] if name.startswith(NEVER_IMPORTED_UNASKED)]
    assert not imported and not seen["per_test"], imported


def test_pytest_rewrites_the_asserts_of_assert_conforms_and_no_others(pytester, monkeypatch):
    pytester.makepyfile(test_loaders="""
        import sys
        import kipcheck.model.share_partition, kipcheck.oracle.check, kipcheck.testing.assertions

        def test_loaders():
            print({name: type(sys.modules[name].__loader__).__name__ for name in
                   ("kipcheck.model.share_partition", "kipcheck.oracle.check", "kipcheck.testing.assertions")})
    """)
    # As in a checkout, or a wheel: pytest finds the package kipcheck and marks all of it for rewriting.
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    loaders = {}
    for plugin in ("kipcheck", "no:kipcheck"):
        result = pytester.runpytest_subprocess("-p", plugin, "-p", "no:cacheprovider", "-s")
        assert result.ret == 0, result.stdout.str()
        loaders[plugin] = next(line[line.index("{"):] for line in result.stdout.lines if "{" in line)
    rewritten = "'AssertionRewritingHook'"
    assert loaders["no:kipcheck"].count(rewritten) == 3, loaders  # so the plugin's own answer below means something
    assert loaders["kipcheck"] == ("{'kipcheck.model.share_partition': 'SourceFileLoader', 'kipcheck.oracle.check': "
                                   "'SourceFileLoader', 'kipcheck.testing.assertions': 'AssertionRewritingHook'}")


ASSERT_CONFORMS_TESTS = """
    import shutil
    import pytest
    import kipcheck

    GOOD, SP21 = {good!r}, {sp21!r}
    STEPS = [{{"at_ms": 0, "actor": "c1", "op": "append", "args": {{"count": 2}}}},
             {{"at_ms": 5, "actor": "c1", "op": "acquire", "args": {{"max_records": 2}}, "observed": {{"records": [[0, 1, 1]]}}}},
             {{"at_ms": 9, "actor": "c2", "op": "acknowledge", "args": {{"batches": [{{"first": 0, "last": 1, "type": "accept"}}]}},
              "observed": {{"error": "NONE"}}}}]

    def test_a_file():
        kipcheck.assert_conforms(GOOD, machine="share-partition", profile="kip")

    def test_a_directory(tmp_path):
        shutil.copy(GOOD, tmp_path / "a.jsonl")
        kipcheck.assert_conforms(tmp_path)

    def test_steps():
        kipcheck.assert_conforms(STEPS[:2], machine="share-partition")

    def test_a_violating_file():
        kipcheck.assert_conforms(SP21)

    def test_violating_steps():
        kipcheck.assert_conforms(STEPS, machine="share-partition", config={{"delivery_count_limit": 3}})

    def test_a_malformed_file(tmp_path):
        (tmp_path / "bad.jsonl").write_text(open(GOOD).readline() + "{{not json\\n")
        kipcheck.assert_conforms(tmp_path / "bad.jsonl")

    def test_another_machine():
        kipcheck.assert_conforms(GOOD, machine="share-session")

    def test_another_profile():
        kipcheck.assert_conforms(GOOD, profile="kafka-4.2")

    def test_an_empty_directory(tmp_path):
        kipcheck.assert_conforms(tmp_path)
"""


def test_assert_conforms_passes_and_fails_where_it_should_with_pytests_diff(pytester):
    pytester.makepyfile(test_traces=ASSERT_CONFORMS_TESTS.format(good=str(GOOD), sp21=str(SP21)))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=3, failed=6)
    result.stdout.fnmatch_lines([
        "*test_a_violating_file*",
        f"E       AssertionError: VIOLATION  {SP21.name}  (share-partition/kip) {SP21_HEADLINE}: allowed no further "
        "delivery of record 0: archived at the delivery limit 2; observed record 0 acquired again (delivery count 3)*",
        'E             step 6: {"step": 6,*"op": "acquire"*',
        f"E             reproduce: kipcheck check {SP21}",
        "E       assert 'observed *' == 'allowed *'",
        "E         - allowed no further delivery of record 0: archived at the delivery limit 2",
        "E         + observed record 0 acquired again (delivery count 3)",
        "*test_violating_steps*",
        'E       AssertionError: VIOLATION  <steps>  (share-partition/kip) step 3 breaks SP-15 "Only the owner may '
        'acknowledge an acquired record": allowed error=INVALID_RECORD_STATE; observed error=NONE*',
        'E             step 3: {"step":3,"at_ms":9,"actor":"c2","op":"acknowledge",*}',
        "E         - allowed error=INVALID_RECORD_STATE",
        "E         + observed error=NONE",
        "*test_a_malformed_file*",
        "E       AssertionError: */bad.jsonl is malformed: line 2: *",
        "E             reproduce: kipcheck check */bad.jsonl",
        "*test_another_machine*",
        f"E       AssertionError: {GOOD} is a share-partition trace, not share-session",
        "*test_another_profile*",
        f"E       AssertionError: {GOOD} is judged under profile kip, not kafka-4.2",
        "*test_an_empty_directory*",
        "E       AssertionError: no trace files: * is a directory with no *.jsonl file under it",
    ])


@pytest.mark.parametrize("call, expected", [(f"assert_conforms({str(SP21)!r})", "SP-21"),
                                            (f"assert_conforms({str(GOOD)!r}, machine='ic')", "not ic")])
def test_assert_conforms_fails_without_pytest_and_without_asserts(call, expected):
    """python -O strips assert statements: a trace that does not conform must fail all the same."""
    for flags in ([], ["-O"]):
        done = subprocess.run([sys.executable, *flags, "-c", f"import kipcheck; kipcheck.{call}"], capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 1 and "AssertionError: " in done.stderr and expected in done.stderr, done.stderr


def test_assert_conforms_refuses_what_it_cannot_judge():
    with pytest.raises(TypeError, match="with machine="):
        kipcheck.assert_conforms([{"at_ms": 0, "actor": "c1", "op": "tick"}])
    with pytest.raises(TypeError, match="config is for steps"):
        kipcheck.assert_conforms(GOOD, config={"delivery_count_limit": 3})


BROKER_TESTS = """
    from pathlib import Path
    import pytest
    from confluent_kafka import Producer, ShareConsumer

    pytestmark = pytest.mark.kipcheck(profile="kip", trace_dir="kept",
                                      settings={{"share.auto.offset.reset": "latest",
                                                "group.share.record.lock.duration.ms": 2000}})

    def consume(bootstrap, count):
        producer = Producer({{"bootstrap.servers": bootstrap}})
        consumer = ShareConsumer({{"bootstrap.servers": bootstrap, "group.id": "g"}})
        consumer.subscribe(["t"])
        received = []
        for _ in range(30):
            for number in range(count - len(received)):
                producer.produce("t", value=b"v")
            producer.flush(30)
            received += [message for message in consumer.poll(1.0) if message.error() is None]
            if len(received) >= count:
                break
        consumer.close()
        return received

    @pytest.mark.kipcheck(settings={{"share.auto.offset.reset": "earliest"}})
    def test_marked(kipcheck_broker):
        assert kipcheck_broker.trace_dir == Path.cwd() / "kept" / "test_broker.py_test_marked"
        assert len(consume(kipcheck_broker.bootstrap, 3)) >= 3

    @pytest.mark.parametrize("kipcheck_broker", [{{"profile": "kafka-4.2",
                                                  "settings": {{"group.share.record.lock.duration.ms": 15000}}}}],
                             indirect=True)
    def test_parametrized(kipcheck_broker):
        assert kipcheck_broker.target.profile == "kafka-4.2"
        assert kipcheck_broker.target.settings == {{"share.auto.offset.reset": "latest",
                                                   "group.share.record.lock.duration.ms": "15000"}}
        shutil_copy = __import__("shutil").copy
        shutil_copy({sp21!r}, kipcheck_broker.trace_dir / "copied.jsonl")
"""


def test_the_judged_broker_takes_its_options_and_keeps_its_traces(pytester):
    pytester.makepyfile(test_broker=BROKER_TESTS.format(sp21=str(SP21)))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    kept = pytester.path / "kept" / "test_broker.py_test_marked"
    header = json.loads(next(kept.glob("share-partition.*.jsonl")).read_text().splitlines()[0])
    assert header["profile"] == "kip" and header["config"]["record_lock_duration_ms"] == 2000, header
    copied = pytester.path / "kept" / "test_broker.py_test_parametrized_kipcheck_broker0_" / "copied.jsonl"
    result.stdout.fnmatch_lines([
        "*_ test_parametrized?kipcheck_broker0? _*",
        f"kipcheck: 1 violation in the reference broker's traces ({copied.parent})",
        f"VIOLATION  copied.jsonl  (share-partition/kip) {SP21_HEADLINE}: *",
        '    step 6: {"step": 6, *',
        f"    reproduce: kipcheck check {copied}",
    ])
    replayed = subprocess.run([sys.executable, "-m", "kipcheck", "check", str(copied)], capture_output=True, text=True,
                              timeout=120)
    assert replayed.returncode == 1 and SP21_HEADLINE in replayed.stdout


FINDINGS_TESTS = """
    import os
    import shutil
    import signal
    import pytest

    @pytest.fixture
    def writes_late(kipcheck_broker):
        yield
        shutil.copy({sp21!r}, kipcheck_broker.trace_dir / "late.jsonl")

    def test_found_after_the_body(writes_late):
        pass

    def test_failing_on_its_own(kipcheck_broker):
        (kipcheck_broker.trace_dir / "torn.jsonl").write_text(open({good!r}).readline() + "{{\\"step\\": 1,\\n")
        assert 1 == 2

    def test_killing_its_broker(kipcheck_broker):
        kipcheck_broker.target.kill()

    def test_whose_broker_dies(kipcheck_broker):
        os.kill(kipcheck_broker.target.process.pid, signal.SIGKILL)
        kipcheck_broker.target.process.wait()
"""


def test_findings_after_the_body_error_at_teardown_and_join_a_failure(pytester):
    """And a broker that died on its own is one; a broker the test killed is not."""
    pytester.makepyfile(test_findings=FINDINGS_TESTS.format(sp21=str(SP21), good=str(GOOD)))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=3, failed=1, errors=2)
    result.stdout.fnmatch_lines([
        "*_ ERROR at teardown of test_whose_broker_dies _*",
        "kipcheck: the broker ended on its own before the test did, exit code -9:",
        "--- start 1: * -m kipcheck broker *",
    ])
    result.stdout.fnmatch_lines([
        "*_ ERROR at teardown of test_found_after_the_body _*",
        "kipcheck: 1 violation in the reference broker's traces (*)",
        f"VIOLATION  late.jsonl  (share-partition/kip) {SP21_HEADLINE}: *",
        "*_ test_failing_on_its_own _*",
        "E       assert 1 == 2",
        "*- Captured kipcheck call -*",
        "kipcheck: 1 malformed trace in the reference broker's traces (*)",
        "MALFORMED  torn.jsonl  line 2: *",
        "    reproduce: kipcheck check */torn.jsonl",
    ])


REFUSAL_TESTS = """
    import time
    import pytest
    from confluent_kafka import Producer, ShareConsumer

    pytestmark = pytest.mark.kipcheck(settings={{"share.auto.offset.reset": "earliest",
                                                "group.share.min.record.lock.duration.ms": 1000,
                                                "group.share.record.lock.duration.ms": 1000}})

    def acknowledge_late(bootstrap):
        producer = Producer({{"bootstrap.servers": bootstrap}})
        producer.produce("t", value=b"v")
        producer.flush(30)
        consumer = ShareConsumer({{"bootstrap.servers": bootstrap, "group.id": "g",
                                  "share.acknowledgement.mode": "explicit"}})
        consumer.subscribe(["t"])
        for _ in range(30):
            messages = [message for message in consumer.poll(1.0) if message.error() is None]
            if messages:
                break
        time.sleep(2.5)  # past the lock
        for message in messages:
            consumer.acknowledge(message)
        consumer.close()

    def test_refused(kipcheck_broker):
        acknowledge_late(kipcheck_broker.bootstrap)

    @pytest.mark.kipcheck(refused_acknowledgements="allow")
    def test_allowed(kipcheck_broker):
        acknowledge_late(kipcheck_broker.bootstrap)
"""


def test_a_refused_acknowledgement_fails_the_test_unless_allowed(pytester):
    pytester.makepyfile(test_refusals=REFUSAL_TESTS.format())
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "*_ test_refused _*",
        "kipcheck: 1 refused acknowledgement in the reference broker's traces (*)",
        "REFUSED    share-partition.g%3At%3A0.jsonl  (share-partition/kafka-4.2) step 3: * asked to acknowledge 0 "
        'accept and was refused INVALID_RECORD_STATE, as SP-17 "Acknowledging after the lock expired (Kafka 4.2): '
        'INVALID_RECORD_STATE" demands',
        "    the trace conforms (the target was right; kipcheck spec --show SP-17): */share-partition.g%3At%3A0.jsonl",
        'A test whose client is meant to be refused: @pytest.mark.kipcheck(refused_acknowledgements="allow")',
    ])


def test_a_source_of_traces_that_could_not_be_read_is_a_finding(tmp_path):
    from kipcheck.testing.findings import JudgedRun

    copy_trace(GOOD, tmp_path / "good.jsonl")
    run = JudgedRun(tmp_path, refusals=False, what="the traces", collect=lambda: "the records could not be read")
    findings = run.findings(running=True)
    assert run.explain(findings).splitlines() == [f"kipcheck: 1 source of traces not read in the traces ({tmp_path})",
                                                  "UNREAD     the records could not be read"]
    assert run.findings(running=False) == []  # reported once; read only while the target runs


@pytest.mark.parametrize("given, message", [
    ('@pytest.mark.kipcheck(profile="kafka-9")', "@pytest.mark.kipcheck: profile must be one of kafka-4.2, kip, "
                                                 "not 'kafka-9'"),
    ('@pytest.mark.kipcheck(lock_ms=5)', "@pytest.mark.kipcheck: unknown option 'lock_ms' (known: profile, settings, "
                                         "trace_dir, refused_acknowledgements, version, brokers, read_back)"),
    ('@pytest.mark.kipcheck("kip")', "@pytest.mark.kipcheck takes options by name (*), not ('kip',)"),
    ('@pytest.mark.kipcheck(settings=["a=b"])', "@pytest.mark.kipcheck: settings must be a dict of broker settings by "
                                                "Kafka's names, not ['a=b']"),
    ('@pytest.mark.parametrize("kipcheck_broker", ["kip"], indirect=True)',
     "kipcheck_broker's parameter must be a dict of kipcheck options, not 'kip'"),
    ('@pytest.mark.kipcheck(settings={"group.share.delivery.count.limit": 1})',
     "the reference broker did not start: broker did not start within 60 s*"),  # and the broker's log says why
])
def test_options_it_cannot_take_are_errors_that_say_why(pytester, given, message):
    pytester.makepyfile(test_options=f"import pytest\n\n{given}\ndef test_it(kipcheck_broker):\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*_ ERROR at setup of test_it*", message])
    assert "Traceback" not in result.stdout.str()


SESSION_TESTS = """
    import shutil
    import pytest

    DIR = {directory!r}

    @pytest.fixture(scope="session")
    def writes_when_the_session_ends():
        yield
        shutil.copy({good!r}, DIR + "/sub/at-the-end.jsonl")

    def test_writes_a_good_trace(writes_when_the_session_ends):
        shutil.copy({good!r}, DIR + "/good.jsonl")

    def test_writes_a_violation():
        shutil.copy({sp21!r}, DIR + "/bad.jsonl")
"""


def test_session_traces_are_judged_into_the_summary_and_the_junit_xml(pytester):
    directory = pytester.path / "traces"
    old = copy_trace(SP21, directory / "old.jsonl")  # from an earlier run: not the session's
    (directory / "sub").mkdir()
    pytester.makepyfile(test_session=SESSION_TESTS.format(directory=str(directory), good=str(GOOD), sp21=str(SP21)))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--kipcheck-traces", str(directory),
                                "--junitxml", str(pytester.path / "report.xml"))
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([
        "*_ kipcheck-traces::bad.jsonl _*",
        f"VIOLATION  bad.jsonl  (share-partition/kip) {SP21_HEADLINE}: *",
        f"    reproduce: kipcheck check {directory / 'bad.jsonl'}",
        "*= kipcheck traces =*",
        f"judged 3 traces written under {directory} in this session: 2 ok, 1 violation",
        f"VIOLATION  {directory / 'bad.jsonl'}  (share-partition/kip) {SP21_HEADLINE}: *",
        "(1 trace there from before the session, unchanged, not judged)",
        "FAILED kipcheck-traces::bad.jsonl*",
        "*1 failed, 2 passed*",
    ])
    assert str(old) not in result.stdout.str()
    cases = ElementTree.parse(pytester.path / "report.xml").getroot().iter("testcase")
    traces = {case.get("name"): case.find("failure") for case in cases if case.get("classname") == "kipcheck-traces"}
    assert sorted(traces) == ["bad.jsonl", "good.jsonl", "sub/at-the-end.jsonl"]
    assert traces["good.jsonl"] is None and traces["sub/at-the-end.jsonl"] is None
    assert SP21_HEADLINE in traces["bad.jsonl"].get("message")


def test_a_session_that_writes_no_trace_passes_and_says_so(pytester):
    pytester.makepyfile(test_nothing="def test_nothing():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--kipcheck-traces", str(pytester.path / "none"), "-v")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*= kipcheck traces =*", f"judged 0 traces written under {pytester.path / 'none'} "
                                 "in this session: none", "no trace was written there: nothing judged"])


def test_kafka_is_skipped_with_the_reason_where_java_is_missing(pytester, monkeypatch):
    monkeypatch.setenv("JAVA_HOME", str(pytester.path / "no-java"))
    pytester.makepyfile(test_kafka="def test_kafka(kipcheck_kafka):\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["SKIPPED [[]1[]] *: Apache Kafka cannot run here: Apache Kafka needs Java 17 or "
                                 "later: none found*"])


KAFKA_TESTS = """
    import shutil
    import pytest
    from confluent_kafka import Producer, ShareConsumer
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

    pytestmark = pytest.mark.kipcheck(trace_dir="kept")

    def share(bootstrap):
        admin = AdminClient({{"bootstrap.servers": bootstrap}})
        earliest = ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
        resource = ConfigResource("group", "g", incremental_configs=[earliest])
        admin.incremental_alter_configs([resource])[resource].result(60)
        producer = Producer({{"bootstrap.servers": bootstrap}})
        producer.produce("t", value=b"v")
        assert producer.flush(60) == 0
        consumer = ShareConsumer({{"bootstrap.servers": bootstrap, "group.id": "g"}})
        consumer.subscribe(["t"])
        for _ in range(60):
            if [message for message in consumer.poll(1.0) if message.error() is None]:
                break
        consumer.close()

    def test_on_kafka(kipcheck_kafka):
        share(kipcheck_kafka.bootstrap)
        shutil.copy({good!r}, kipcheck_kafka.trace_dir / "the-tests-own.jsonl")

    @pytest.mark.kipcheck(read_back=False)
    def test_without_reading_back(kipcheck_kafka):
        share(kipcheck_kafka.bootstrap)
"""
KAFKA_HOOK = """
    import shutil

    def pytest_kipcheck_kafka_traces(cluster, trace_dir):
        assert cluster.alive()
        shutil.copy({sp21!r}, trace_dir / "from-a-hook.jsonl")
"""


@pytest.mark.slow
def test_kafka_judges_its_share_state_the_tests_traces_and_those_its_hooks_write(pytester):
    pytester.makeconftest(KAFKA_HOOK.format(sp21=str(SP21)))
    pytester.makepyfile(test_kafka=KAFKA_TESTS.format(good=str(GOOD)))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rs")
    if result.parseoutcomes().get("skipped"):
        pytest.skip("Apache Kafka cannot run here: " + result.stdout.str().splitlines()[-2])
    result.assert_outcomes(failed=2)
    # The test's own trace conforms, but shows an acknowledgement refused (kip-lock-expiry: SP-16).
    result.stdout.fnmatch_lines([
        "*_ test_on_kafka _*",
        "kipcheck: 1 violation, 1 refused acknowledgement in the traces of the test on Apache Kafka 4.2 (*)",
        f"VIOLATION  from-a-hook.jsonl  (share-partition/kip) {SP21_HEADLINE}: *",
        "REFUSED    the-tests-own.jsonl  (share-partition/kip) step 4: consumer-1 asked to acknowledge 0-2 accept and "
        'was refused REQUEST_TIMED_OUT, as SP-16 "Acknowledging after the lock expired (kip): REQUEST_TIMED_OUT" demands',
    ])
    read_back = list((pytester.path / "kept" / "test_kafka.py_test_on_kafka" / "share-state").glob("*.jsonl"))
    assert len(read_back) == 1 and "ok " in subprocess.run(
        [sys.executable, "-m", "kipcheck", "check", str(read_back[0])], capture_output=True, text=True).stdout
    assert not (pytester.path / "kept" / "test_kafka.py_test_without_reading_back" / "share-state").exists()
