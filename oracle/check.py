"""`kipcheck check`: judge trace files against the models, one verdict per file."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

from kipcheck.model.violation import Violation
from kipcheck.oracle.judge import Refusal
from kipcheck.oracle.views import judge_for
from kipcheck.oracle.trace import Malformed, read_header, read_steps

OK, VIOLATION, MALFORMED = "ok", "violation", "malformed"
EXIT_CODES = {OK: 0, VIOLATION: 1, MALFORMED: 2}


@dataclass
class Verdict:
    """The oracle's judgement of one trace.

    `status` is ok, violation or malformed; `reason` says why in one sentence
    (None when ok), and `summary()` is the one line `kipcheck check` prints. A
    violation names the first disallowed `step` (0: the header), the `clause` it breaks and its
    `title`, what the model `allowed` and what was `observed`; a malformed
    trace names its `line` (None when the file as a whole is at fault). An ok trace lists in `refusals`
    the requests its target rightly refused (oracle/judge.py Refusal; the first REFUSALS_MAX).
    """

    name: str
    status: str
    machine: str | None = None
    profile: str | None = None
    steps: int = 0
    step: int | None = None
    clause: str | None = None
    title: str | None = None
    allowed: str | None = None
    observed: str | None = None
    line: int | None = None
    reason: str | None = None
    extra: dict = field(default_factory=dict)
    refusals: list[Refusal] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.status]

    def __bool__(self) -> bool:
        return self.status == OK

    def summary(self) -> str:
        what = f"{self.machine}/{self.profile}" if self.machine else "?"
        if self.status == OK:
            return f"ok         {self.name}  ({what}, {self.steps} steps)"
        if self.status == VIOLATION:
            return f"VIOLATION  {self.name}  ({what}) {self.reason}"
        where = f"line {self.line}: " if self.line is not None else ""
        return f"MALFORMED  {self.name}  {where}{self.reason}"


def violation_verdict(name: str, machine: str, profile: str, steps: int, violation: Violation,
                      judged: bool = True) -> Verdict:
    """The verdict of a trace whose step `steps + 1` (0: the header, when not `judged`) broke a clause."""
    from kipcheck.spec import clauses  # read only when a trace breaks a clause

    clause = clauses().get(violation.clause)
    title = clause.title if clause else None
    named = f'{violation.clause} "{title}"' if title else violation.clause
    # A header whose config the target cannot have (SP-45) is step 0, before the first step.
    step = steps + 1 if judged else 0
    where = f"step {step}" if judged else "the header"
    reason = (f"{where} breaks {named}: allowed {violation.allowed}; observed {violation.observed} "
              f"(see: kipcheck spec --show {violation.clause})")
    return Verdict(name, VIOLATION, machine, profile, steps, step=step, clause=violation.clause, title=title,
                   allowed=violation.allowed, observed=violation.observed, reason=reason)


def check_lines(lines: Iterable[bytes | str], name: str = "<trace>", reference: bool = False) -> Verdict:
    """Judge a trace given as lines (header first). Streams: memory does not grow with length.

    `reference` judges with the plain models even where a judge has a fast acceptor (oracle/judges/fast/).
    """
    iterator: Iterator[bytes | str] = iter(lines)
    machine = profile = judge = None
    steps = 0
    try:
        first = next(iterator, None)
        if first is None:
            raise Malformed(None, "empty file: a trace's first line is its header")
        if not first.strip():
            raise Malformed(1, "blank line: a trace's first line is its header")
        header = read_header(first)
        machine, profile = header.machine, header.profile
        judge = judge_for(header, reference)
        for step in read_steps(iterator):
            judge.judge(step)
            steps += 1
    except Malformed as error:
        return Verdict(name, MALFORMED, machine, profile, steps, line=error.line, reason=error.reason)
    except Violation as violation:
        return violation_verdict(name, machine, profile, steps, violation, judged=judge is not None)
    return Verdict(name, OK, machine, profile, steps, refusals=judge.refusals)


def check_file(path: str | Path, reference: bool = False) -> Verdict:
    """Judge one trace file (`reference`: with the plain models, see check_lines)."""
    path = Path(path)
    try:
        with path.open("rb") as lines:
            return check_lines(lines, str(path), reference)
    except OSError as error:  # the file as a whole: no line to name
        return Verdict(str(path), MALFORMED, reason=f"cannot read: {error.strerror or error}")


def check_files(paths: Iterable[str | Path]) -> Iterator[Verdict]:
    for path in paths:
        yield check_file(path)


def exit_code(verdicts: Iterable[Verdict]) -> int:
    """2 if any input was malformed, else 1 if any trace broke a clause, else 0."""
    return max((verdict.exit_code for verdict in verdicts), default=0)
