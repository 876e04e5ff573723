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
    """Yield the steps of `lines` (the lines after the header), checking the envelope.

    The common case, a well-formed step, takes one combined test; anything
    else goes to _diagnose, which finds the precise reason.
    """
    loads, decode_error = orjson.loads, orjson.JSONDecodeError
    expected_step, clock_ms, line_number = 1, 0, first_line - 1
    for text in lines:
        line_number += 1
        try:
            record = loads(text)
            number, at_ms, actor, op = record["step"], record["at_ms"], record["actor"], record["op"]
        except (decode_error, KeyError, TypeError):
            if not text.strip():
                continue
            _diagnose(text, line_number, expected_step, clock_ms)
            raise AssertionError("unreachable: _diagnose raises")  # pragma: no cover
        args = record.get("args", _EMPTY)
        observed = record.get("observed", _ABSENT)
        if (
            number != expected_step or type(number) is not int
            or type(at_ms) is not int or at_ms < clock_ms
            or type(actor) is not str or type(op) is not str
            or type(args) is not dict or not (observed is _ABSENT or observed is None or type(observed) is dict)
            # Any field beyond the six known ones makes the record longer than the ones it has.
            or len(record) != 4 + (args is not _EMPTY) + (observed is not _ABSENT)
        ):
            _diagnose(text, line_number, expected_step, clock_ms)
        if observed is _ABSENT:
            observed = None
        yield Step(number, line_number, at_ms, actor, op, args, observed)
        expected_step += 1
        clock_ms = at_ms


_EMPTY: dict[str, Any] = {}
_ABSENT = object()


def _diagnose(text: bytes | str, line_number: int, expected_step: int, clock_ms: int) -> None:
    """Raise Malformed with the precise reason a step line is not well formed."""
    record = _parse(text, line_number)
    if not isinstance(record, dict):
        raise Malformed(line_number, "a step must be a JSON object")
    for name in ("step", "at_ms", "actor", "op"):
        if name not in record:
            raise Malformed(line_number, f"missing required field {name!r}")
    number, at_ms = record["step"], record["at_ms"]
    if number != expected_step or not _is_int(number):
        raise Malformed(line_number, f'"step" must be {expected_step}, found {number!r}')
    if not _is_int(at_ms) or at_ms < 0:
        raise Malformed(line_number, f'"at_ms" must be a non-negative integer, found {at_ms!r}')
    if at_ms < clock_ms:
        raise Malformed(line_number, f'"at_ms" went back in time ({at_ms} after {clock_ms})')
    if not isinstance(record["actor"], str) or not isinstance(record["op"], str):
        raise Malformed(line_number, '"actor" and "op" must be strings')
    observed = record.get("observed")
    if not isinstance(record.get("args", _EMPTY), dict) or not (observed is None or isinstance(observed, dict)):
        raise Malformed(line_number, '"args" and "observed" must be objects')
    unknown = set(record) - STEP_FIELDS
    raise Malformed(line_number, f"unknown step field(s): {', '.join(sorted(unknown))}")


def dumps(record: dict[str, Any]) -> bytes:
    """One trace line, as writers in this project emit it."""
    return orjson.dumps(record) + b"\n"


def write_trace(path: str, header: dict[str, Any], steps: Iterable[dict[str, Any]]) -> None:
    """Write a whole trace: `header` (machine, optional profile and config) then `steps` numbered 1, 2, ..."""
    with open(path, "wb") as out:
        out.write(dumps({"format": FORMAT, "version": VERSION, **header}))
        for number, step in enumerate(steps, start=1):
            out.write(dumps({"step": number, **step}))
