"""Reading kipcheck traces (shared/TRACE-FORMAT.md, version 1) as a stream.

Only the envelope is checked here: the header, step numbering, the clock and
the types every step shares. What an op's args and observed fields mean is
the business of the machine's judge.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Iterator

import orjson

FORMAT = "kipcheck-trace"
VERSION = 1
PROFILES = ("kip", "kafka-4.2")
HEADER_FIELDS = {"format", "version", "machine", "profile", "config"}
STEP_FIELDS = {"step", "at_ms", "actor", "op", "args", "observed"}


class Malformed(Exception):
    """The input is not a well-formed trace; `line` is 1-based (0: no line)."""

    def __init__(self, line: int, reason: str) -> None:
        super().__init__(f"line {line}: {reason}")
        self.line = line
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Header:
    machine: str
    profile: str
    config: dict[str, Any]


@dataclass(slots=True)
class Step:
    number: int
    line: int
    at_ms: int
    actor: str
    op: str
    args: dict[str, Any]
    observed: dict[str, Any] | None


def _parse(text: bytes | str, line: int) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as error:
        raise Malformed(line, f"not JSON: {error}") from None


def _is_int(value: Any) -> bool:
    return type(value) is int


def read_header(text: bytes | str) -> Header:
    header = _parse(text, 1)
    if not isinstance(header, dict):
        raise Malformed(1, "the header must be a JSON object")
    unknown = set(header) - HEADER_FIELDS
    if unknown:
        raise Malformed(1, f"unknown header field(s): {', '.join(sorted(unknown))}")
    if header.get("format") != FORMAT:
        raise Malformed(1, f'"format" must be "{FORMAT}"')
    if header.get("version") != VERSION:
        raise Malformed(1, f"unsupported version {header.get('version')!r} (this checker reads version {VERSION})")
    machine = header.get("machine")
    if not isinstance(machine, str):
        raise Malformed(1, 'missing "machine"')
    profile = header.get("profile", "kip")
    if profile not in PROFILES:
        raise Malformed(1, f"unknown profile {profile!r} (known: {', '.join(PROFILES)})")
    config = header.get("config", {})
    if not isinstance(config, dict):
        raise Malformed(1, '"config" must be an object')
    return Header(machine, profile, config)


def read_steps(lines: Iterator[bytes | str], first_line: int = 2) -> Iterator[Step]:
    """Yield the steps of `lines` (the lines after the header), checking the envelope."""
    expected_step = 1
    clock_ms = None
    for line_number, text in enumerate(lines, start=first_line):
        if not text.strip():
            continue
        record = _parse(text, line_number)
        if not isinstance(record, dict):
            raise Malformed(line_number, "a step must be a JSON object")
        try:
            number, at_ms, actor, op = record["step"], record["at_ms"], record["actor"], record["op"]
        except KeyError as missing:
            raise Malformed(line_number, f"missing required field {missing.args[0]!r}") from None
        if number != expected_step or not _is_int(number):
            raise Malformed(line_number, f'"step" must be {expected_step}, found {number!r}')
        if not _is_int(at_ms) or at_ms < 0:
            raise Malformed(line_number, f'"at_ms" must be a non-negative integer, found {at_ms!r}')
        if clock_ms is not None and at_ms < clock_ms:
            raise Malformed(line_number, f'"at_ms" went back in time ({at_ms} after {clock_ms})')
        if not isinstance(actor, str) or not isinstance(op, str):
            raise Malformed(line_number, '"actor" and "op" must be strings')
        args = record.get("args", {})
        observed = record.get("observed")
        if not isinstance(args, dict) or not (observed is None or isinstance(observed, dict)):
            raise Malformed(line_number, '"args" and "observed" must be objects')
        if not STEP_FIELDS.issuperset(record):
            raise Malformed(line_number, f"unknown step field(s): {', '.join(sorted(set(record) - STEP_FIELDS))}")
        yield Step(number, line_number, at_ms, actor, op, args, observed)
        expected_step += 1
        clock_ms = at_ms


def dumps(record: dict[str, Any]) -> bytes:
    """One trace line, as writers in this project emit it."""
    return orjson.dumps(record) + b"\n"


def write_trace(path: str, header: dict[str, Any], steps: Iterable[dict[str, Any]]) -> None:
    """Write a whole trace: `header` (machine, optional profile and config) then `steps` numbered 1, 2, ..."""
    with open(path, "wb") as out:
        out.write(dumps({"format": FORMAT, "version": VERSION, **header}))
        for number, step in enumerate(steps, start=1):
            out.write(dumps({"step": number, **step}))
