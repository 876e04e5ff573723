"""Traces written step by step and judged as they are written.

    trace = LiveTrace(directory, "share-partition.g.orders-0", header, judging=True, report=print_violation)
    trace.add(at_ms, actor, op, args, observed)   # written (one line), then judged
    trace.flush()                                 # appended to its file
    trace.demote("an unseen member joined")       # a full view becomes a partial one: header rewritten, re-judged
    trace.verdict                                 # the oracle's Verdict so far (oracle/check.py)

A trace is judged by the same judges as `kipcheck check` (oracle/views.judge_for), fed each line as it is
written, so a violation is found at the step that makes it, and the file on disk gives the same verdict
afterwards. After a violation the trace is still written, and no longer judged (the first disallowed step is
the verdict, as for `kipcheck check`).

A full view is judged by every clause, but what an observer saw can stop being a full view (a member it does
not see joins the group, a request crossed a lock's expiry, a leader moved): `demote` marks the file a partial
view (SP-80: `"view": "partial"`, and `min_lock_duration_ms` in its config) by rewriting its header, and judges
it again from its first step by the partial view's clauses. A full view's violation is reported only once
`confirm` (given by the observer) says the view was full; otherwise the trace is demoted.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from kipcheck.impl.tracing import new_incarnation
from kipcheck.model.violation import Violation
from kipcheck.oracle.check import OK, Verdict, violation_verdict
from kipcheck.oracle.trace import FORMAT, VERSION, Malformed, read_header, read_steps
from kipcheck.oracle.views import judge_for


class _Lines:
    """The lines a judge reads, pushed one at a time (read_steps pulls exactly one per step it yields)."""

    def __init__(self) -> None:
        self.line: bytes | None = None

    def __iter__(self) -> "_Lines":
        return self

    def __next__(self) -> bytes:
        line, self.line = self.line, None
        assert line is not None, "a step is judged only after its line is pushed"
        return line


class LiveTrace:
    def __init__(self, directory: Path, stem: str, header: dict, judging: bool,
                 report: Callable[["LiveTrace"], None], confirm: Callable[["LiveTrace"], bool] | None = None):
        self.path = new_incarnation(directory, stem)
        self.header = {"format": FORMAT, "version": VERSION, **header}
        self.judging, self.report, self.confirm = judging, report, confirm
        self.steps = 0
        self.clock_ms = 0
        self.ended: str | None = None   # why nothing more is written (a leader moved, the proxy missed a step)
        self.demoted: str | None = None
        self._unwritten: list[bytes] = []   # lines not yet handed to the file (flush)
        self.path.write_bytes(b"")
        self._write(self.header)
        self._start_judging()

    @property
    def partial(self) -> bool:
        return self.header.get("view") == "partial"

    def _start_judging(self) -> None:
        self.verdict = Verdict(self.path.name, OK, self.header["machine"], self.header.get("profile", "kip"))
        self._lines = _Lines()
        self._judge = None
        if self.judging:
            try:
                self._judge = judge_for(read_header(json.dumps(self.header)))
            except (Malformed, Violation) as error:  # the writer's own header: a bug of ours, said loudly
                raise AssertionError(f"{self.path}: a header the oracle refuses: {error}") from error
            self._reader = read_steps(self._lines)

    def add(self, at_ms: int, actor: str, op: str, args: dict, observed: dict | None = None) -> None:
        if self.ended:
            return
        self.steps += 1
        self.clock_ms = max(self.clock_ms, at_ms)
        step = {"step": self.steps, "at_ms": self.clock_ms, "actor": actor, "op": op, "args": args}
        if observed is not None:
            step["observed"] = observed
        line = self._write(step)
        self._judge_line(line)

    def _judge_line(self, line: bytes) -> None:
        if self._judge is None or self.verdict.status != OK:
            return
        self._lines.line = line
        try:
            self._judge.judge(next(self._reader))
        except Violation as violation:
            self._violated(violation)
        except Malformed as error:  # a step of ours the oracle cannot read: a bug of ours, said loudly
            raise AssertionError(f"{self.path} step {self.steps}: the oracle refuses it: {error.reason}") from None

    def _violated(self, violation: Violation) -> None:
        if not self.partial and self.confirm is not None and not self.confirm(self):
            return  # confirm demoted it: judged again as a partial view
        self.verdict = violation_verdict(str(self.path), self.header["machine"], self.header.get("profile", "kip"),
                                         self.steps - 1, violation)
        self.report(self)

    def demote(self, reason: str, min_lock_duration_ms: int) -> None:
        """From now on (and from its first step) the trace is a partial view: rewrite it, judge it again."""
        if self.partial:
            return
        self.demoted = reason
        self.flush()
        self.header = {**self.header, "view": "partial",
                       "config": {**self.header["config"], "min_lock_duration_ms": min_lock_duration_ms}}
        lines = self.path.read_bytes().splitlines()[1:]
        self.path.write_bytes(b"")
        self._write(self.header)
        self._start_judging()
        for line in lines:
            self._unwritten.append(line + b"\n")
            self._judge_line(line)
        self.flush()

    def end(self, reason: str) -> None:
        """Write nothing more: what follows was not observed as this trace needs it."""
        if not self.ended:
            self.ended = reason

    def flush(self) -> None:
        """Append what was written to the file (the shelf does it after each round of steps). The file is
        opened for it and closed again, so that any number of traces costs no file descriptors."""
        if self._unwritten:
            with self.path.open("ab") as file:
                file.writelines(self._unwritten)
            self._unwritten.clear()

    def _write(self, record: dict) -> bytes:
        line = json.dumps(record, separators=(", ", ": ")).encode()
        self._unwritten.append(line + b"\n")
        return line
