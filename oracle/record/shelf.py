"""The traces `kipcheck record` writes: opened by name, their steps put in time order, violations printed.

    shelf = Shelf(directory, judging=True, out=sys.stdout)
    trace = shelf.open("share-session.g.m1", header)
    sink = shelf.sink(trace)                      # what oracle/share_traces.ShareSteps writes to
    sink.add(at_ms, actor, op, args, observed)    # placed, not yet written
    shelf.flush(before_ms)                        # written (and judged) in time order, up to before_ms
    shelf.summary()                               # the table printed at the end; 0 or 1

Requests of different clients cross the proxy at the same time, and their answers come in any order, so steps
are not written as answers come: each is placed at its time (an acknowledgement when it was sent, an
acquisition when its answer came: spec/conformance.md), and written once no request still unanswered (or
answered and not yet observed) was sent before it; so every trace's steps are in the order of their times.
The buffer is bounded (`max_placed`): past it the oldest steps are written at once, and the traces they
belong to are marked partial views (their order is no longer certain), never silently.
"""

from __future__ import annotations

import heapq
import itertools
from pathlib import Path
from typing import Callable, TextIO

from kipcheck.oracle.check import OK, VIOLATION
from kipcheck.oracle.record.live import LiveTrace
from kipcheck.impl.tracing import safe_name

MAX_PLACED_STEPS = 100_000


class PlacedSink:
    """A trace's steps, placed on the shelf (the `add` oracle/share_traces.Sink asks for)."""

    def __init__(self, shelf: "Shelf", trace: LiveTrace):
        self.shelf, self.trace = shelf, trace

    def add(self, at_ms: int, actor: str, op: str, args: dict, observed: dict | None = None) -> None:
        self.shelf.place(self.trace, at_ms, actor, op, args, observed)


class Shelf:
    def __init__(self, directory: Path, judging: bool, out: TextIO, max_placed: int = MAX_PLACED_STEPS,
                 confirm: Callable[[LiveTrace], bool] | None = None, min_lock_duration_ms: int = 15_000):
        self.directory = directory
        self.judging, self.out, self.max_placed, self.confirm = judging, out, max_placed, confirm
        self.min_lock_duration_ms = min_lock_duration_ms
        self.traces: list[LiveTrace] = []
        self._placed: list[tuple] = []
        self._order = itertools.count()
        directory.mkdir(parents=True, exist_ok=True)

    def open(self, parts: list[str], header: dict) -> LiveTrace:
        """A new trace `<part>.<part>...jsonl` (each part made safe for a file name)."""
        trace = LiveTrace(self.directory, ".".join(safe_name(part) for part in parts), header, self.judging,
                          self._report, self.confirm)
        self.traces.append(trace)
        return trace

    def sink(self, trace: LiveTrace) -> PlacedSink:
        return PlacedSink(self, trace)

    def place(self, trace: LiveTrace, at_ms: int, actor: str, op: str, args: dict, observed: dict | None) -> None:
        heapq.heappush(self._placed, (at_ms, next(self._order), trace, actor, op, args, observed))
        while len(self._placed) > self.max_placed:
            oldest = heapq.heappop(self._placed)
            oldest[2].demote(f"more than {self.max_placed} steps waited to be put in order", self.min_lock_duration_ms)
            self._write(oldest).flush()

    def flush(self, before_ms: int | None = None) -> None:
        """Write every step placed before `before_ms` (None: every step)."""
        written = set()
        while self._placed and (before_ms is None or self._placed[0][0] < before_ms):
            written.add(self._write(heapq.heappop(self._placed)))
        for trace in written:
            trace.flush()

    @staticmethod
    def _write(placed: tuple) -> LiveTrace:
        at_ms, _, trace, actor, op, args, observed = placed
        trace.add(at_ms, actor, op, args, observed)
        return trace

    def _report(self, trace: LiveTrace) -> None:
        print(f"VIOLATION  {trace.verdict.reason}", file=self.out, flush=True)
        print(f"           trace {trace.path}", file=self.out, flush=True)

    def close(self) -> None:
        self.flush()
        for trace in self.traces:
            trace.flush()

    def summary(self, not_observed: dict[str, int]) -> int:
        """Print the table of traces and what was not observed; 1 if any trace broke a clause, else 0."""
        rows = [(trace.path.name, trace.header["machine"], "partial" if trace.partial else "full", trace.steps,
                 "-" if not self.judging else trace.verdict.status if trace.verdict.status != VIOLATION
                 else f"VIOLATION {trace.verdict.clause} at step {trace.verdict.step}") for trace in self.traces]
        width = max([len(row[0]) for row in rows] + [5])
        print(f"{'trace':<{width}}  {'machine':<15}  {'view':<7}  {'steps':>6}  verdict", file=self.out)
        for name, machine, view, steps, verdict in rows:
            print(f"{name:<{width}}  {machine:<15}  {view:<7}  {steps:>6}  {verdict}", file=self.out)
        for trace in self.traces:
            for note in (trace.demoted and f"partial view from then on: {trace.demoted}",
                         trace.ended and f"ended early: {trace.ended}"):
                if note:
                    print(f"note: {trace.path.name}: {note}", file=self.out)
        for reason, count in sorted(not_observed.items()):
            print(f"not observed: {count} {reason}", file=self.out)
        violations = sum(trace.verdict.status == VIOLATION for trace in self.traces)
        if self.judging:
            print(f"{len(self.traces)} traces, {violations} with a violation", file=self.out, flush=True)
        return 1 if violations else 0


__all__ = ["OK", "PlacedSink", "Shelf"]
