"""`kipcheck check`: judge trace files against the models, one verdict per file."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

from kipcheck.model.violation import Violation
from kipcheck.oracle import judges
from kipcheck.oracle.trace import Malformed, read_header, read_steps

OK, VIOLATION, MALFORMED = "ok", "violation", "malformed"
EXIT_CODES = {OK: 0, VIOLATION: 1, MALFORMED: 2}


@dataclass
class Verdict:
    """The oracle's judgement of one trace.

    `status` is ok, violation or malformed. A violation names the first
    disallowed `step`, the `clause` it breaks, what the model `allowed` and
    what was `observed`; a malformed trace names its `line` and `reason`.
    """

    name: str
    status: str
    machine: str | None = None
    profile: str | None = None
    steps: int = 0
    step: int | None = None
    clause: str | None = None
    allowed: str | None = None
    observed: str | None = None
    line: int | None = None
    reason: str | None = None
    extra: dict = field(default_factory=dict)

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
            return (
                f"VIOLATION  {self.name}  ({what}) step {self.step} breaks {self.clause}: "
                f"allowed {self.allowed}; observed {self.observed}"
            )
        return f"MALFORMED  {self.name}  line {self.line}: {self.reason}"


def check_lines(lines: Iterable[bytes | str], name: str = "<trace>", reference: bool = False) -> Verdict:
    """Judge a trace given as lines (header first). Streams: memory does not grow with length.

    `reference` judges with the plain models even where a judge has a fast acceptor (impl/fastcheck/).
    """
    iterator: Iterator[bytes | str] = iter(lines)
    machine = profile = None
    steps = 0
    try:
        first = next(iterator, None)
        if first is None or not first.strip():
            raise Malformed(1, "empty trace: the first line must be the header")
        header = read_header(first)
        machine, profile = header.machine, header.profile
        judge_class = judges.judge_class(machine)
        if judge_class is None:
            raise Malformed(1, f"unknown machine {machine!r} (known: {', '.join(judges.machines())})")
        if reference and getattr(judge_class, "has_fast_acceptor", False):
            judge = judge_class(header.config, header.profile, reference=True)
        else:
            judge = judge_class(header.config, header.profile)
        for step in read_steps(iterator):
            judge.judge(step)
            steps += 1
    except Malformed as error:
        return Verdict(name, MALFORMED, machine, profile, steps, line=error.line, reason=error.reason)
    except Violation as violation:
        return Verdict(
            name, VIOLATION, machine, profile, steps, step=steps + 1,
            clause=violation.clause, allowed=violation.allowed, observed=violation.observed,
        )
    return Verdict(name, OK, machine, profile, steps)


def check_file(path: str | Path, reference: bool = False) -> Verdict:
    """Judge one trace file (`reference`: with the plain models, see check_lines)."""
    path = Path(path)
    try:
        with path.open("rb") as lines:
            return check_lines(lines, str(path), reference)
    except OSError as error:
        return Verdict(str(path), MALFORMED, line=0, reason=f"cannot read: {error.strerror or error}")
    except UnicodeDecodeError as error:
        return Verdict(str(path), MALFORMED, line=0, reason=f"not UTF-8: {error}")


def check_files(paths: Iterable[str | Path]) -> Iterator[Verdict]:
    for path in paths:
        yield check_file(path)


def exit_code(verdicts: Iterable[Verdict]) -> int:
    """2 if any input was malformed, else 1 if any trace broke a clause, else 0."""
    return max((verdict.exit_code for verdict in verdicts), default=0)
