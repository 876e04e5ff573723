"""Kafka's errors on the wire: model/errors.py's names to codes and back, the seed's own codes included (IC-17).

    error_code(Error.INVALID_RECORD_STATE) -> ErrorCode.invalid_record_state   # a field kio types as ErrorCode
    error_code_of("INDIVIDUAL_COMMIT_TOO_OLD") -> 1091;  error_name(1091) -> Error.INDIVIDUAL_COMMIT_TOO_OLD

kio's ErrorCode knows Kafka's codes only; the seed's five travel as plain
int16 fields (schemas.py).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from kipcheck.model.errors import Error


def error_code(name_or_code: str | int | ErrorCode) -> ErrorCode:
    """Kafka's error by its name ("INVALID_RECORD_STATE") or number."""
    if isinstance(name_or_code, ErrorCode):
        return name_or_code
    if isinstance(name_or_code, str):
        return ErrorCode[name_or_code.lower()]
    return ErrorCode(name_or_code)


def error_code_of(name: str) -> int:
    """The int16 of an error name: Kafka's own, or the seed's (IC-17)."""
    return Error[name].code


def error_name(code: int | ErrorCode) -> str:
    """The error a wire code stands for; UNKNOWN_ERROR_CODE_<code> for a code no error has."""
    try:
        return Error.of_code(int(code))
    except ValueError:
        return f"UNKNOWN_ERROR_CODE_{code}"
