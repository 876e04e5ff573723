"""The traces a judged fixture's target wrote, judged, and what a failing test prints about them.

    run = JudgedRun(trace_dir, refusals=True, what="the reference broker's traces")
    run.findings(running=True)     # when the test's body ends: the target may still be writing
    run.findings(running=False)    # at teardown, once it stopped: only what was not reported before
    run.explain(findings)          # the failure's text: verdict, step, clause and the command that reproduces it

A finding is a trace that breaks a clause, a malformed trace, or (with `refusals`) a request the target was
right to refuse: an acknowledgement of records the client no longer held, the mistake of the application
under test that a conforming trace still shows (oracle/judge.py Refusal).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from kipcheck.commands.check import expand
from kipcheck.oracle.check import MALFORMED, VIOLATION, Verdict, check_file, check_lines
from kipcheck.oracle.judge import Refusal

REFUSED, UNREAD = "refused", "unread"  # the kinds of finding beside a verdict's VIOLATION and MALFORMED
REFUSALS_SHOWN = 5  # of one trace; the rest are counted
FINDINGS_SHOWN = 20  # of one test; the rest are counted
STEP_CHARS_MAX = 400  # of a step line quoted in a message


@dataclass(frozen=True)
class Finding:
    """One thing wrong in one trace, as lines a failing test prints."""

    path: Path
    kind: str  # VIOLATION, MALFORMED, REFUSED or UNREAD
    step: int | None  # the step it is at (None: the trace as a whole)
    lines: tuple[str, ...]

    @property
    def key(self) -> tuple[Path, str, int | None]:
        return self.path, self.kind, self.step


def judge_trace(path: Path, running: bool) -> Verdict | None:
    """The verdict on the trace at `path`. `running`: its writer may be mid-line, so only its complete lines
    are judged (None when it has none yet); a prefix of an allowed trace is allowed, so this is sound."""
    if not running:
        return check_file(path)
    try:
        data = path.read_bytes()
    except OSError:
        return check_file(path)  # reports why it cannot be read
    complete = data[:data.rfind(b"\n") + 1]
    return check_lines(complete.splitlines(keepends=True), str(path)) if complete else None


def findings_of(verdict: Verdict, path: Path, refusals: bool) -> list[Finding]:
    """What is wrong in one judged trace: its violation or why it is malformed, else (with `refusals`) the
    requests its target refused."""
    if verdict.status == VIOLATION:
        return [Finding(path, VIOLATION, verdict.step, violation_lines(verdict, path))]
    if verdict.status == MALFORMED:
        return [Finding(path, MALFORMED, None, (f"MALFORMED  {path.name}  {why_malformed(verdict)}",
                                                f"    reproduce: {check_command(path)}"))]
    if not refusals:
        return []
    return [Finding(path, REFUSED, refusal.step, refusal_lines(refusal, path, verdict))
            for refusal in verdict.refusals]


def why_malformed(verdict: Verdict) -> str:
    return f"line {verdict.line}: {verdict.reason}" if verdict.line is not None else str(verdict.reason)


def violation_lines(verdict: Verdict, path: Path | None, step_text: str | None = None) -> tuple[str, ...]:
    """The verdict, the step it names (read from `path` unless given) and the command that reproduces it."""
    lines = [f"VIOLATION  {Path(verdict.name).name}  ({verdict.machine}/{verdict.profile}) {verdict.reason}"]
    if step_text is None and path is not None and verdict.step is not None:
        step_text = read_step(path, verdict.step)
    if step_text is not None:
        lines.append(f"    {'the header' if verdict.step == 0 else f'step {verdict.step}'}: {step_text}")
    if path is not None:
        lines.append(f"    reproduce: {check_command(path)}")
    return tuple(lines)


def refusal_lines(refusal: Refusal, path: Path, verdict: Verdict) -> tuple[str, ...]:
    from kipcheck.spec import clauses  # read only when there is a refusal to explain

    clause = clauses().get(refusal.clause)
    named = f'{refusal.clause} "{clause.title}"' if clause else refusal.clause
    return (f"REFUSED    {path.name}  ({verdict.machine}/{verdict.profile}) step {refusal.step}: {refusal.actor} "
            f"asked to {refusal.op} {asked(refusal)} and was refused {refusal.error}, as {named} demands",
            f"    the trace conforms (the target was right; kipcheck spec --show {refusal.clause}): {path}")


def asked(refusal: Refusal) -> str:
    """What the refused request asked, in a few words: "0-2 accept, 5 release" for an acknowledgement."""
    batches = refusal.args.get("batches")
    if refusal.op != "acknowledge" or not isinstance(batches, list):
        return str(refusal.args)
    return ", ".join(f"{batch['first']}{'' if batch['first'] == batch['last'] else '-' + str(batch['last'])} "
                     f"{batch['type']}" for batch in batches)


def read_step(path: Path, number: int) -> str | None:
    """Line of step `number` (0: the header) of the trace at `path`: steps are numbered in file order and
    blank lines do not count (TRACE-FORMAT.md). None when the file has no such step."""
    try:
        with path.open("rb") as lines:
            counted = -1
            for line in lines:
                if line.strip() or counted == -1:
                    counted += 1
                if counted == number:
                    return shorten(line.decode(errors="replace").strip())
    except OSError:
        return None
    return None


def shorten(text: str) -> str:
    return text if len(text) <= STEP_CHARS_MAX else text[:STEP_CHARS_MAX - 3] + "..."


def check_command(path: Path) -> str:
    return f"kipcheck check {shlex.quote(str(path))}"


class JudgedRun:
    """The traces of one test's target, judged when the test's body ends and again at teardown.

    `collect` (optional) writes traces of the target into `trace_dir` before each judging while it runs, and
    returns None or why it could not (a finding: what it would have written is not judged).
    """

    def __init__(self, trace_dir: Path, refusals: bool, what: str, collect: Callable[[], str | None] | None = None):
        self.trace_dir = trace_dir
        self.refusals = refusals
        self.what = what
        self.collect = collect
        self.reported: set[tuple] = set()

    def findings(self, running: bool) -> list[Finding]:
        """What is wrong in the traces under `trace_dir` and was not reported by an earlier call."""
        found = []
        if running and self.collect is not None:
            trouble = self.collect()
            if trouble is not None:
                found.append(Finding(self.trace_dir, UNREAD, None, (f"UNREAD     {trouble}",)))
        for name in expand([str(self.trace_dir)]) if self.trace_dir.is_dir() else []:
            verdict = judge_trace(Path(name), running)
            if verdict is not None:
                found += findings_of(verdict, Path(name), self.refusals)
        new = [finding for finding in found if finding.key not in self.reported]
        self.reported |= {finding.key for finding in new}
        return new

    def explain(self, findings: list[Finding]) -> str:
        lines = [f"kipcheck: {summary(findings)} in {self.what} ({self.trace_dir})"]
        shown = _shown(findings)
        for finding in shown:
            lines += finding.lines
        if len(shown) < len(findings):
            lines.append(f"... and {len(findings) - len(shown)} more")
        if any(finding.kind == REFUSED for finding in findings):
            lines.append('A test whose client is meant to be refused: @pytest.mark.kipcheck(refused_acknowledgements="allow")')
        return "\n".join(lines)


def summary(findings: list[Finding]) -> str:
    names = {VIOLATION: ("violation", "violations"), MALFORMED: ("malformed trace", "malformed traces"),
             REFUSED: ("refused acknowledgement", "refused acknowledgements"),
             UNREAD: ("source of traces not read", "sources of traces not read")}
    counts = {kind: sum(finding.kind == kind for finding in findings) for kind in names}
    return ", ".join(f"{count} {names[kind][count != 1]}" for kind, count in counts.items() if count)


def _shown(findings: list[Finding]) -> list[Finding]:
    """At most FINDINGS_SHOWN findings, and of those at most REFUSALS_SHOWN refusals of one trace."""
    shown, refusals_of = [], {}
    for finding in findings:
        if finding.kind == REFUSED:
            refusals_of[finding.path] = refusals_of.get(finding.path, 0) + 1
            if refusals_of[finding.path] > REFUSALS_SHOWN:
                continue
        shown.append(finding)
    return shown[:FINDINGS_SHOWN]
