"""assert_conforms: a test's own traces, judged, failing with pytest's diff of what was allowed and observed.

    assert_conforms("traces/orders.jsonl")                 # a trace file, or a directory of *.jsonl traces
    assert_conforms(steps, machine="share-partition", profile="kafka-4.2", config={"record_lock_duration_ms": 2000})

The kipcheck pytest plugin has pytest rewrite this module's asserts, so a violation shows pytest's own diff
of the allowed answer against the observed one; without pytest it fails with the same message.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable

from kipcheck.commands.check import expand
from kipcheck.oracle.check import MALFORMED, OK, VIOLATION, Verdict, check_file, check_lines
from kipcheck.oracle.trace import FORMAT, VERSION, dumps
from kipcheck.testing.findings import check_command, shorten, violation_lines, why_malformed


def assert_conforms(path_or_steps: str | os.PathLike | Iterable[dict[str, Any]], machine: str | None = None,
                    profile: str | None = None, config: dict[str, Any] | None = None) -> None:
    """Fail (AssertionError) unless the trace conforms to the model of its machine.

    `path_or_steps`: a trace file, a directory standing for every *.jsonl trace under it (at least one), or
    the steps of one trace as dicts (`step` numbers may be left out: they are numbered in order). For steps,
    `machine` is required and `profile` (default "kip") and `config` make the header; for files the header
    names them, and a `machine` or `profile` given must be the one it names.
    """
    __tracebackhide__ = True
    if isinstance(path_or_steps, (str, os.PathLike)):
        if config is not None:
            raise TypeError("assert_conforms: config is for steps; a trace file's header holds its own")
        names = expand([os.fspath(path_or_steps)])
        if not names:
            raise AssertionError(f"no trace files: {os.fspath(path_or_steps)} is a directory with no *.jsonl file "
                                 "under it")
        for name in names:
            _assert_verdict(check_file(name), Path(name), None, machine, profile)
        return
    if isinstance(path_or_steps, (bytes, dict)) or machine is None:
        raise TypeError("assert_conforms: give a trace file, a directory of traces, or steps (dicts) with machine=")
    steps = [{"step": number, **step} for number, step in enumerate(path_or_steps, start=1)]
    header = {"format": FORMAT, "version": VERSION, "machine": machine, "profile": profile or "kip",
              "config": config or {}}
    verdict = check_lines([dumps(header), *map(dumps, steps)], "<steps>")
    failing = steps[verdict.step - 1] if verdict.status == VIOLATION and verdict.step else header
    _assert_verdict(verdict, None, shorten(dumps(failing).decode().strip()), None, None)


def _assert_verdict(verdict: Verdict, path: Path | None, step_text: str | None, machine: str | None,
                    profile: str | None) -> None:
    __tracebackhide__ = True
    if verdict.status == MALFORMED:
        reproduce = f"\n    reproduce: {check_command(path)}" if path is not None else ""
        _fail(f"{verdict.name} is malformed: {why_malformed(verdict)}{reproduce}", verdict.status, OK)
    if machine is not None and verdict.machine != machine:
        _fail(f"{verdict.name} is a {verdict.machine} trace, not {machine}", verdict.machine, machine)
    if profile is not None and verdict.profile != profile:
        _fail(f"{verdict.name} is judged under profile {verdict.profile}, not {profile}", verdict.profile, profile)
    if verdict.status == VIOLATION:
        _fail("\n".join(violation_lines(verdict, path, step_text)), f"observed {verdict.observed}",
              f"allowed {verdict.allowed}")


def _fail(message: str, observed: Any, expected: Any) -> None:
    """Fail with `message` and pytest's diff of `observed` against `expected` (which differ)."""
    __tracebackhide__ = True
    assert observed == expected, message  # pytest rewrites this module's asserts into a diff
    raise AssertionError(message)  # reached under python -O, which strips assert statements
