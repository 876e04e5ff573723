"""--kipcheck-traces DIR: every trace a test session writes under DIR, judged when the session ends.

The traces are judged after the last test's teardown (so a session-scoped broker has stopped and written
everything) and before the JUnit XML is written. Each trace is a testcase there (classname
`kipcheck-traces`); one that is not ok is a failure in the terminal's counts and fails the session; and the
terminal summary has a section with every verdict. Traces under DIR that the session did not write or
change (left by an earlier run) are not judged.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

SECTION = "kipcheck traces"
NODE_PREFIX = "kipcheck-traces::"


def written(directory: Path) -> dict[Path, tuple[int, int]]:
    """Every *.jsonl file under `directory`, with its modification time and size."""
    stamps = {}
    for path in directory.rglob("*.jsonl") if directory.is_dir() else ():
        try:
            status = path.stat()
        except OSError:  # removed as we looked: not a trace the session leaves
            continue
        stamps[path] = (status.st_mtime_ns, status.st_size)
    return stamps


class SessionTraces:
    """The plugin of --kipcheck-traces, registered only when the option is given."""

    def __init__(self, directory: Path):
        self.directory = directory
        self.before: dict[Path, tuple[int, int]] = {}
        self.verdicts: list = []
        self.left = 0  # traces under DIR from before the session

    def pytest_sessionstart(self) -> None:
        self.before = written(self.directory)

    @pytest.hookimpl(tryfirst=True)  # before pytest's JUnit writer, and after every fixture's teardown
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        from kipcheck.oracle.check import check_file

        now = written(self.directory)
        judged = sorted(path for path, stamp in now.items() if self.before.get(path) != stamp)
        self.left = len(now) - len(judged)
        self.verdicts = [check_file(path) for path in judged]
        reports = [self._report(verdict) for verdict in self.verdicts]
        _add_to_junit(session.config, reports)
        failed = [report for report in reports if report.failed]
        terminal = session.config.pluginmanager.get_plugin("terminalreporter")
        if terminal is not None and failed:
            terminal.stats.setdefault("failed", []).extend(failed)
        if failed and session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def _report(self, verdict) -> pytest.TestReport:
        from kipcheck.testing.findings import findings_of

        path = Path(verdict.name)
        name = NODE_PREFIX + os.path.relpath(path, self.directory)
        details = "\n".join(line for finding in findings_of(verdict, path, refusals=False) for line in finding.lines)
        return pytest.TestReport(name, (str(self.directory), None, name), {}, "passed" if verdict else "failed",
                                 details or None, "call")

    def pytest_terminal_summary(self, terminalreporter, config: pytest.Config) -> None:
        counts = {status: sum(verdict.status == status for verdict in self.verdicts)
                  for status in ("ok", "violation", "malformed")}
        tally = ", ".join(f"{count} {status}" for status, count in counts.items() if count) or "none"
        markup = {"red": True} if counts["violation"] or counts["malformed"] else {"green": True}
        terminalreporter.write_sep("=", SECTION, **markup)
        terminalreporter.write_line(f"judged {_traces(len(self.verdicts))} written under {self.directory} in this "
                                    f"session: {tally}")
        for verdict in self.verdicts:
            if verdict.status != "ok" or config.get_verbosity() > 0:
                terminalreporter.write_line(verdict.summary())
        if not self.verdicts:
            terminalreporter.write_line("no trace was written there: nothing judged", yellow=True)
        if self.left:
            terminalreporter.write_line(f"({_traces(self.left)} there from before the session, unchanged, not judged)")


def _traces(count: int) -> str:
    return f"{count} trace{'' if count == 1 else 's'}"


def _add_to_junit(config: pytest.Config, reports: list[pytest.TestReport]) -> None:
    """One testcase per trace in the --junitxml file, if one is written (pytest has no public way to add one)."""
    from _pytest.junitxml import xml_key

    xml = config.stash.get(xml_key, None)
    for report in reports if xml is not None else ():
        xml.pytest_runtest_logreport(report)
