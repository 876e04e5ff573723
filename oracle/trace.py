"""Reading kipcheck traces (shared/TRACE-FORMAT.md, version 1) as a stream.

Only the envelope is checked here: the header, step numbering, the clock and
the types every step shares. What an op's args and observed fields mean is
the business of the machine's judge.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Iterator, NoReturn

import msgspec

from kipcheck.model.profiles import PROFILES

FORMAT = "kipcheck-trace"
VERSION = 1
HEADER_FIELDS = {"format", "version", "machine", "profile", "config", "view", "conduct"}
VIEWS = ("full", "partial")
STEP_FIELDS = {"step", "at_ms", "actor", "op", "args", "observed"}


class Malformed(Exception):
    """The input is not a well-formed trace; `line` is 1-based (None: the file as a whole)."""

    def __init__(self, line: int | None, reason: str) -> None:
        super().__init__(f"line {line}: {reason}" if line is not None else reason)
        self.line = line
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Header:
    machine: str
    profile: str
    config: dict[str, Any]
    view: str = "full"       # "partial": the steps of some members only (spec SP-80, SS-41)
    conduct: bool = False    # the actors' own conduct is judged too (spec SP-85, SS-40, IC-22)


class Step(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """One step line. msgspec decodes it and checks its types and fields in C: the
    checker's speed on long traces rests on this (bench/bench_check.py)."""

    number: int = msgspec.field(name="step")
    at_ms: int
    actor: str
    op: str
    args: dict[str, Any] = msgspec.field(default_factory=dict)
    observed: dict[str, Any] | None = None
    # The line number is set by the reader. The name below stands in for a trace
    # key only because a Struct field needs one; the reader overwrites it.
    line: int = msgspec.field(default=0, name="kipcheck.line")


_EMPTY: dict[str, Any] = {}
_decode_step = msgspec.json.Decoder(Step).decode
_decode_any = msgspec.json.Decoder().decode


_BOM = ("\ufeff", b"\xef\xbb\xbf")


def _parse(text: bytes | str, line: int) -> Any:
    try:
        return _decode_any(text)
    except UnicodeError:
        raise Malformed(line, _not_utf8(text)) from None
    except msgspec.DecodeError as error:
        if text.startswith(_BOM[isinstance(text, bytes)]):
            raise Malformed(line, "starts with a byte order mark (BOM, bytes EF BB BF): a trace is UTF-8 "
                                  "without one; save the file without the BOM") from None
        raise Malformed(line, f"not JSON: {error}") from None


def _not_utf8(text: bytes | str) -> str:
    """Where a line stops being UTF-8 (a str line can only hold a lone surrogate)."""
    try:
        text.decode("utf-8") if isinstance(text, bytes) else text.encode("utf-8")
    except UnicodeError as error:
        return f"not UTF-8: byte {error.start + 1} of the line is 0x{text[error.start]:02x}" \
            if isinstance(text, bytes) else f"not UTF-8: character {error.start + 1} of the line is a lone surrogate"
    return "not UTF-8"


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
    view, conduct = header.get("view", "full"), header.get("conduct", False)
    if view not in VIEWS:
        raise Malformed(1, f'"view" must be one of {", ".join(VIEWS)}, found {view!r}')
    if type(conduct) is not bool:
        raise Malformed(1, f'"conduct" must be true or false, found {conduct!r}')
    return Header(machine, profile, config, view, conduct)


def read_steps(lines: Iterator[bytes | str], first_line: int = 2) -> Iterator[Step]:
    """Yield the steps of `lines` (the lines after the header), checking the envelope.

    The common case, a well-formed step, costs one typed decode and two
    comparisons; anything else goes to _diagnose, which finds the precise reason.
    """
    decode, invalid = _decode_step, (msgspec.DecodeError, msgspec.ValidationError, UnicodeError)
    expected_step, clock_ms, line_number = 1, 0, first_line - 1
    for text in lines:
        line_number += 1
        try:
            step = decode(text)
        except invalid:
            if not text.strip():
                continue
            _diagnose(text, line_number, expected_step, clock_ms)
        if step.number != expected_step or step.at_ms < clock_ms:
            _diagnose(text, line_number, expected_step, clock_ms)
        step.line = line_number
        yield step
        expected_step += 1
        clock_ms = step.at_ms


def _diagnose(text: bytes | str, line_number: int, expected_step: int, clock_ms: int) -> NoReturn:
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
    if unknown:
        raise Malformed(line_number, f"unknown step field(s): {', '.join(sorted(unknown))}")
    try:
        _decode_step(text)
    except msgspec.ValidationError as error:  # what is left, e.g. an integer too large for 64 bits
        raise Malformed(line_number, f"invalid step: {error}") from None


def dumps(record: dict[str, Any]) -> bytes:
    """One trace line, as writers in this project emit it."""
    return msgspec.json.encode(record) + b"\n"


def write_trace(path: str, header: dict[str, Any], steps: Iterable[dict[str, Any]]) -> None:
    """Write a whole trace: `header` (machine, optional profile and config) then `steps` numbered 1, 2, ..."""
    with open(path, "wb") as out:
        out.write(dumps({"format": FORMAT, "version": VERSION, **header}))
        for number, step in enumerate(steps, start=1):
            out.write(dumps({"step": number, **step}))
