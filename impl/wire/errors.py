"""Kafka's errors on the wire: names to codes and back, the seed's own codes included (spec/ic.md IC-17).

    error_code("INVALID_RECORD_STATE") -> ErrorCode.invalid_record_state   # a field kio types as ErrorCode
    error_code_of("INDIVIDUAL_COMMIT_TOO_OLD") -> 1091;  error_name(1091) -> "INDIVIDUAL_COMMIT_TOO_OLD"

kio's ErrorCode knows Kafka's codes only; the seed's five (model/ic.py
WIRE_CODES) travel as plain int16 fields (schemas.py).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from kipcheck.model.ic import WIRE_CODES

_NAMES = {code: name for name, code in WIRE_CODES.items()}


def error_code(name_or_code: str | int | ErrorCode) -> ErrorCode:
    """Kafka's error by its name ("INVALID_RECORD_STATE") or number."""
    if isinstance(name_or_code, ErrorCode):
        return name_or_code
    if isinstance(name_or_code, str):
        return ErrorCode[name_or_code.lower()]
    return ErrorCode(name_or_code)


def error_code_of(name: str) -> int:
    """The int16 of an error name: Kafka's own, or the seed's (IC-17)."""
    return WIRE_CODES[name] if name in WIRE_CODES else ErrorCode[name.lower()].value


def error_name(code: int | ErrorCode) -> str:
    if isinstance(code, ErrorCode):
        return code.name.upper()
    if code in _NAMES:
        return _NAMES[code]
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return f"UNKNOWN_ERROR_CODE_{code}"
