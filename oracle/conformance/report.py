"""The verdict of a conformance run: a table per machine and clause, JUnit XML, and the first failure shrunk.

    rows = clause_table(verdicts, profile, observable_machines, unobservable_clauses)
    print(format_table(rows))
    write_junit(path, cases)        # cases: (suite, name, seconds, failure message or None, skipped reason or None)

A clause is `failed` when a judged trace broke it, `passed` when traces of its
machine were judged on this target and none broke it, and `not observable` when
the target cannot show it (no trace of its machine, or a scenario it needs
could not run there). Clauses that do not hold under the run's profile are left out.
"""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from pathlib import Path

from kipcheck.oracle.check import Verdict
from kipcheck.spec import clauses

MACHINES = ("share-partition", "share-session", "share-state", "cross-machine")


@dataclass(frozen=True)
class ClauseRow:
    machine: str
    clause: str
    title: str
    status: str  # "passed", "failed", "not observable"
    traces: int  # traces of its machine judged


def clause_table(verdicts: list[Verdict], profile: str, unobservable: dict[str, str]) -> list[ClauseRow]:
    """One row per clause of the share-group machines; `unobservable` maps a clause id to why this target cannot
    show it (its machine then counts as judged only if some of its traces were)."""
    judged: dict[str, int] = {}
    for verdict in verdicts:
        if verdict.machine is not None:
            judged[verdict.machine] = judged.get(verdict.machine, 0) + 1
    # Cross-machine rules are judged through the share-partition traces after the event they speak of.
    judged["cross-machine"] = judged.get("share-partition", 0)
    failed = {verdict.clause for verdict in verdicts if verdict.status == "violation"}
    rows = []
    for clause in clauses().values():
        if clause.machine not in MACHINES or not clause.holds_under(profile):
            continue
        traces = judged.get(clause.machine, 0)
        if clause.id in failed:
            status = "failed"
        elif clause.id in unobservable or not traces:
            status = "not observable"
        else:
            status = "passed"
        rows.append(ClauseRow(clause.machine, clause.id, clause.title, status, traces))
    return rows


def format_table(rows: list[ClauseRow], verbose: bool = False) -> str:
    """Per machine: counts of passed / failed / not observable, and the clauses that failed or could not be seen
    (every clause with `verbose`)."""
    lines = [f"{'machine':<16} {'traces':>6} {'passed':>7} {'failed':>7} {'not observable':>15}"]
    for machine in MACHINES:
        mine = [row for row in rows if row.machine == machine]
        if not mine:
            continue
        count = {status: sum(row.status == status for row in mine) for status in ("passed", "failed", "not observable")}
        lines.append(f"{machine:<16} {mine[0].traces:>6} {count['passed']:>7} {count['failed']:>7} "
                     f"{count['not observable']:>15}")
        for row in mine:
            if verbose or row.status != "passed":
                lines.append(f"    {row.status.upper():<15} {row.clause:<6} {row.title}")
    return "\n".join(lines)


def write_junit(path: Path, cases: list[tuple[str, str, float, str | None, str | None]]) -> None:
    """JUnit XML: one testcase per (suite, name, seconds, failure message, skipped reason)."""
    root = ElementTree.Element("testsuites", name="kipcheck conform")
    suites: dict[str, ElementTree.Element] = {}
    for suite_name, name, seconds, failure, skipped in cases:
        suite = suites.get(suite_name)
        if suite is None:
            suite = suites[suite_name] = ElementTree.SubElement(root, "testsuite", name=suite_name)
        case = ElementTree.SubElement(suite, "testcase", classname=suite_name, name=name, time=f"{seconds:.3f}")
        if failure is not None:
            ElementTree.SubElement(case, "failure", message=failure.splitlines()[0][:200]).text = failure
        elif skipped is not None:
            ElementTree.SubElement(case, "skipped", message=skipped)
    for suite in suites.values():
        cases_here = list(suite)
        suite.set("tests", str(len(cases_here)))
        suite.set("failures", str(sum(case.find("failure") is not None for case in cases_here)))
        suite.set("skipped", str(sum(case.find("skipped") is not None for case in cases_here)))
    ElementTree.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)
