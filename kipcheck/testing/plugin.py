"""kipcheck's pytest plugin, the `pytest11` entry point `kipcheck`: off until a test asks for it.

Loading it imports this module and pytest alone, starts nothing and adds no per-test work: the fixtures
import what they start when a test uses them, and --kipcheck-traces registers its own plugin.

    kipcheck_broker        the reference broker for one test; its traces judged when the test ends
    kipcheck_kafka         Apache Kafka for one test (skipped where it cannot run); the test's traces judged
    @pytest.mark.kipcheck  how they start: profile=, settings=, trace_dir=, refused_acknowledgements=,
                           version=, brokers= and read_back= (Kafka); or the same dict as an indirect parameter
    --kipcheck-traces DIR  every trace the session writes under DIR, judged at its end (session.py)
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

MARKER = "kipcheck"
DEFAULTS = {"profile": "kafka-4.2", "settings": {}, "trace_dir": None, "refused_acknowledgements": "fail",
            "version": "4.2", "brokers": 1, "read_back": True}
CHOICES = {"profile": ("kafka-4.2", "kip"), "refused_acknowledgements": ("fail", "allow")}
BROKERS_MAX = 9
DIRECTORY_NAME_CHARS_MAX = 120
RUN = pytest.StashKey()  # the item's JudgedRun, for the report of its call


# pytest rewrites the asserts of assert_conforms, whose diff is pytest's (see pytest_addhooks for the rest).
pytest.register_assert_rewrite("kipcheck.testing.assertions")


class KafkaTraceHooks:
    @pytest.hookspec
    def pytest_kipcheck_kafka_traces(self, cluster, trace_dir: Path) -> None:
        """Write traces of what Apache Kafka did into `trace_dir`, judged with the test's own.

        Called for a test using kipcheck_kafka when its body ends, with `cluster` (a KafkaCluster) running:
        for example the share coordinator's records read back as share-state traces."""


def pytest_addhooks(pluginmanager) -> None:
    """Add the hook above, and keep pytest from rewriting the asserts of the rest of kipcheck.

    pytest marks every module of a distribution with a pytest11 entry point for assertion rewriting. Those
    of kipcheck are invariants, not test assertions, and a suite that imports kipcheck must run as it did
    before the plugin was installed. This runs when the plugin is registered, before any test imports."""
    pluginmanager.add_hookspecs(KafkaTraceHooks)
    marked = getattr(getattr(pluginmanager, "rewrite_hook", None), "_must_rewrite", None)
    if isinstance(marked, set):
        marked.discard("kipcheck")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("kipcheck").addoption(
        "--kipcheck-traces", metavar="DIR", type=Path,
        help="judge every trace (*.jsonl) the session writes under DIR when it ends: verdicts in the terminal "
             "summary and in the JUnit XML, and a trace that is not ok fails the session")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{MARKER}(profile=, settings=, trace_dir=, refused_acknowledgements=, version=, brokers=, "
                   "read_back=): "
                   "how kipcheck_broker and kipcheck_kafka start and judge (README, 'In your tests')")
    directory = config.getoption("kipcheck_traces")
    if directory is not None:
        from kipcheck.testing.session import SessionTraces

        config.pluginmanager.register(SessionTraces(directory), "kipcheck-traces")


@pytest.fixture
def kipcheck_broker(request: pytest.FixtureRequest, tmp_path: Path):
    """The reference broker on a free loopback port, for this test: `.bootstrap`, `.trace_dir`, `.target`
    (its EmbeddedBroker). Every trace it wrote is judged when the test ends; a violation, or an
    acknowledgement it rightly refused, fails the test."""
    from kipcheck.testing.targets import TargetFailed, start_reference_broker

    options = _options(request)
    trace_dir = _trace_dir(request, options) or tmp_path / "kipcheck-broker" / "traces"
    try:
        broker = start_reference_broker(tmp_path / "kipcheck-broker", trace_dir, options["profile"],
                                        _settings(options))
    except TargetFailed as error:
        raise pytest.fail.Exception(str(error), pytrace=False) from None  # the message alone, no chain
    yield from _judged(request, broker, "the reference broker's traces", options, collect=None)


@pytest.fixture
def kipcheck_kafka(request: pytest.FixtureRequest, tmp_path: Path):
    """Apache Kafka (`version`, default 4.2; `brokers`, default 1) on free loopback ports, for this test,
    skipped with the reason where it cannot run. Kafka writes no traces: what is judged when the test ends is
    under `.trace_dir`, its share coordinator's records read back (unless `read_back=False`), the test's own
    traces, and those of pytest_kipcheck_kafka_traces hooks."""
    from kipcheck.testing.targets import TargetFailed, TargetUnavailable, read_back_share_state, start_kafka

    options = _options(request)
    trace_dir = _trace_dir(request, options) or tmp_path / "kipcheck-kafka-traces"
    try:
        kafka = start_kafka(tmp_path / "kipcheck-kafka", trace_dir, options["version"], options["brokers"],
                            _settings(options))
    except TargetUnavailable as reason:
        pytest.skip(str(reason))
    except TargetFailed as error:
        raise pytest.fail.Exception(str(error), pytrace=False) from None

    def collect() -> str | None:
        request.config.hook.pytest_kipcheck_kafka_traces(cluster=kafka.target, trace_dir=trace_dir)
        return read_back_share_state(kafka) if options["read_back"] else None

    yield from _judged(request, kafka, f"the traces of the test on Apache Kafka {options['version']}", options,
                       collect)


def _judged(request: pytest.FixtureRequest, running, what: str, options: dict, collect):
    """Give the test its target; judge its traces when the test's body ends (JudgedCalls) and, once
    stopped, what was written after (a finding then is an error at teardown, pytest's way)."""
    from kipcheck.testing.findings import JudgedRun

    run = JudgedRun(running.trace_dir, options["refused_acknowledgements"] == "fail", what, collect)
    request.node.stash[RUN] = run
    if not request.config.pluginmanager.has_plugin(JudgedCalls.name):
        request.config.pluginmanager.register(JudgedCalls(), JudgedCalls.name)
    yield running
    stopped = running.stop()
    findings = run.findings(running=False)
    problems = [f"kipcheck: {stopped}"] if stopped else []
    if findings:
        problems.append(run.explain(findings))
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


class JudgedCalls:
    """Fails a test whose traces are found wanting when its body ends (if the body failed on its own, the
    findings are a section of its report). Registered when a judged fixture is first used, so a session
    that uses none runs no hook of the plugin per test."""

    name = "kipcheck-judged-calls"

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item):
        run = item.stash.get(RUN, None)
        if run is None:
            return (yield)
        try:
            result = yield
        except BaseException:
            findings = run.findings(running=True)
            if findings:
                item.add_report_section("call", "kipcheck", run.explain(findings))
            raise
        findings = run.findings(running=True)
        if findings:
            pytest.fail(run.explain(findings), pytrace=False)
        return result


def _options(request: pytest.FixtureRequest) -> dict:
    """The kipcheck marker's options, the closest marker winning (settings merge by name), then the
    fixture's indirect parameter."""
    chosen = dict(DEFAULTS)
    given = [(f"@pytest.mark.{MARKER}", marker.args, marker.kwargs)
             for marker in reversed(list(request.node.iter_markers(MARKER)))]
    if hasattr(request, "param"):
        parameter = request.param
        if not isinstance(parameter, dict):
            pytest.fail(f"{request.fixturename}'s parameter must be a dict of kipcheck options, not {parameter!r}",
                        pytrace=False)
        given.append((f"{request.fixturename}'s parameter", (), parameter))
    for source, args, options in given:
        if args:
            pytest.fail(f"{source} takes options by name ({', '.join(DEFAULTS)}), not {args!r}", pytrace=False)
        for name, value in options.items():
            _check_option(source, name, value)
            chosen[name] = {**chosen["settings"], **value} if name == "settings" else value
    return chosen


def _check_option(source: str, name: str, value) -> None:
    if name not in DEFAULTS:
        pytest.fail(f"{source}: unknown option {name!r} (known: {', '.join(DEFAULTS)})", pytrace=False)
    if name in CHOICES and value not in CHOICES[name]:
        pytest.fail(f"{source}: {name} must be one of {', '.join(CHOICES[name])}, not {value!r}", pytrace=False)
    if name == "settings" and not isinstance(value, dict):
        pytest.fail(f"{source}: settings must be a dict of broker settings by Kafka's names, not {value!r}",
                    pytrace=False)
    if name == "brokers" and (type(value) is not int or not 1 <= value <= BROKERS_MAX):
        pytest.fail(f"{source}: brokers must be 1 to {BROKERS_MAX}, not {value!r}", pytrace=False)
    if name == "version" and not isinstance(value, str):
        pytest.fail(f"{source}: version must be a release line such as '4.2', not {value!r}", pytrace=False)
    if name == "read_back" and type(value) is not bool:
        pytest.fail(f"{source}: read_back must be True or False, not {value!r}", pytrace=False)
    if name == "trace_dir" and not isinstance(value, (str, Path)):
        pytest.fail(f"{source}: trace_dir must be a path, not {value!r}", pytrace=False)


def _settings(options: dict) -> dict[str, str]:
    return {name: str(value).lower() if isinstance(value, bool) else str(value)
            for name, value in options["settings"].items()}


def _trace_dir(request: pytest.FixtureRequest, options: dict) -> Path | None:
    """The test's own directory under the trace_dir asked for (relative to where pytest was started), named
    after the test and emptied first; None when none was asked for."""
    if options["trace_dir"] is None:
        return None
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", request.node.nodeid)[-DIRECTORY_NAME_CHARS_MAX:]
    directory = request.config.invocation_params.dir / Path(options["trace_dir"]) / name
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    return directory
