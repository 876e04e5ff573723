"""What every machine's judge shares: config, argument reading, comparison.

A judge turns a trace step into calls on its model and compares what was
observed with what the model allows. One judge per machine lives in
oracle/judges/; each declares its config defaults and one `op_<name>` method
per op of shared/TRACE-FORMAT.md.
"""

from __future__ import annotations

from typing import Any, Callable, ClassVar

import msgspec

from kipcheck.model.violation import Violation
from kipcheck.oracle.trace import Malformed, Step

_MISSING = object()


class Judge:
    machine: ClassVar[str]
    # Config keys and defaults; a trace's config may only override these.
    config_defaults: ClassVar[dict[str, Any]] = {}
    # Profiles this machine distinguishes; others are judged as "kip".
    profiles: ClassVar[tuple[str, ...]] = ("kip",)

    def __init__(self, config: dict[str, Any], profile: str) -> None:
        unknown = set(config) - set(self.config_defaults)
        if unknown:
            known = ", ".join(sorted(self.config_defaults)) or "none"
            raise Malformed(1, f"unknown config key(s) for {self.machine}: {', '.join(sorted(unknown))} (known: {known})")
        self.config = {**self.config_defaults, **config}
        for key, value in self.config.items():
            default = self.config_defaults[key]
            if default is not None and type(value) is not type(default):
                raise Malformed(1, f"config {key!r} must be {type(default).__name__}, found {value!r}")
        self.profile = profile if profile in self.profiles else "kip"
        self._ops: dict[str, Callable[[Step], None]] = {}

    @classmethod
    def ops(cls) -> list[str]:
        return sorted(name[3:] for name in dir(cls) if name.startswith("op_"))

    def judge(self, step: Step) -> None:
        """Judge one step: raise Violation if it is not allowed, Malformed if it makes no sense."""
        handler = self._ops.get(step.op)
        if handler is None:
            handler = getattr(self, "op_" + step.op, None)
            if handler is None:
                raise Malformed(step.line, f"unknown op {step.op!r} for {self.machine} (known: {', '.join(self.ops())})")
            self._ops[step.op] = handler
        handler(step)

    # Reading args and observed fields. Missing or ill-typed fields are malformed input.

    @staticmethod
    def arg(step: Step, name: str, kind: type | tuple[type, ...], default: Any = _MISSING) -> Any:
        value = step.args.get(name, default)
        if type(value) is kind:
            return value
        if value is _MISSING:
            raise Malformed(step.line, f"op {step.op!r} needs args.{name}")
        if not _has_type(value, kind):
            raise Malformed(step.line, f"args.{name} of {step.op!r} must be {_kind_name(kind)}, found {value!r}")
        return value

    @staticmethod
    def observed(step: Step, name: str, kind: type | tuple[type, ...]) -> Any:
        """An observed field, or None when it was left out (a field left out is not judged)."""
        if step.observed is None or name not in step.observed:
            return None
        value = step.observed[name]
        if not _has_type(value, kind):
            raise Malformed(step.line, f"observed.{name} of {step.op!r} must be {_kind_name(kind)}, found {value!r}")
        return value

    @staticmethod
    def expect(clause: str, name: str, expected: Any, observed: Any) -> None:
        """Compare one observed field (None: not observed, not judged) with the single allowed value."""
        if observed is not None and observed != expected:
            raise Violation(clause, f"{name}={_show(expected)}", f"{name}={_show(observed)}")


def _has_type(value: Any, kind: type | tuple[type, ...]) -> bool:
    # bool is an int subclass in Python but never a valid integer field.
    if type(value) is bool:
        return kind is bool or (isinstance(kind, tuple) and bool in kind)
    return isinstance(value, kind)


def _kind_name(kind: type | tuple[type, ...]) -> str:
    names = {int: "an integer", str: "a string", list: "a list", dict: "an object", bool: "a boolean"}
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(names.get(k, k.__name__) for k in kinds)


def _show(value: Any) -> str:
    return msgspec.json.encode(value).decode() if not isinstance(value, str) else value
