"""What every machine's judge shares: ops and their fields, config, argument reading, comparison.

A judge turns a trace step into calls on its model and compares what was
observed with what the model allows. One judge per machine lives in
oracle/judges/; each declares its config defaults and one `op_<name>` method
per op of TRACE-FORMAT.md, decorated with `@op(...)`, which declares once the
fields the op's `args` and `observed` may hold. A field an op does not
declare, at the top or inside an object of a declared field, is malformed
input: a misspelt field can never pass unjudged (TRACE-FORMAT.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Iterable, NamedTuple

import msgspec

from kipcheck.model.violation import Violation
from kipcheck.oracle.trace import Malformed, Step

_MISSING = object()
REFUSALS_MAX = 100  # refusals a judge keeps of one trace: enough to explain it, bounded for endless traces


class Refusal(NamedTuple):
    """A request the model says must be refused, and the target refused: the target was right, its client
    was not (an acknowledgement of records the client no longer held, for one). Read by the pytest plugin."""

    step: int
    actor: str
    op: str
    args: dict[str, Any]
    error: str
    clause: str


@dataclass(frozen=True)
class Fields:
    """The fields one op defines. `objects` maps a field of args or observed ("args.batches") that holds
    objects, in a list or keyed by name, to the fields each object may hold."""

    args: frozenset[str]
    observed: frozenset[str]
    objects: tuple[tuple[str, str, frozenset[str]], ...]  # (part, field, object fields)


def op(args: Iterable[str] = (), observed: Iterable[str] = (), objects: dict[str, Iterable[str]] | None = None):
    """Declare an op method's fields, e.g. @op(args=["batches"], observed=["error"],
    objects={"args.batches": ["first", "last", "type"]})."""
    nested = tuple((where.split(".")[0], where.split(".", 1)[1], frozenset(names)) for where, names in (objects or {}).items())
    fields = Fields(frozenset(args), frozenset(observed), nested)
    assert all(part in ("args", "observed") and name in getattr(fields, part) for part, name, _ in nested), objects

    def declare(method: Callable) -> Callable:
        method.fields = fields
        return method
    return declare


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
        # op name -> (bound handler, its args fields, its observed fields, its object fields)
        self._ops: dict[str, tuple] = {}
        self.refusals: list[Refusal] = []  # the first REFUSALS_MAX, in step order

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        undeclared = [name for name in cls.ops() if not hasattr(getattr(cls, "op_" + name), "fields")]
        assert not undeclared, f"{cls.__name__}: ops without @op(...) field declarations: {undeclared}"

    @classmethod
    def ops(cls) -> list[str]:
        return sorted(name[3:] for name in dir(cls) if name.startswith("op_"))

    def judge(self, step: Step) -> None:
        """Judge one step: raise Violation if it is not allowed, Malformed if it makes no sense."""
        entry = self._ops.get(step.op)
        if entry is None:
            entry = self._op(step)
        handler, args, observed_fields, objects = entry
        observed = step.observed
        # The common case costs two subset tests in C; _check_fields words the error.
        if not args.issuperset(step.args) or (observed is not None and not observed_fields.issuperset(observed)):
            _check_fields(step, handler.fields)
        if objects:
            _check_objects(step, objects)
        handler(step)

    def _op(self, step: Step) -> tuple:
        handler = getattr(self, "op_" + step.op, None)
        if handler is None:
            raise Malformed(step.line, f"unknown op {step.op!r} for {self.machine} (known: {', '.join(self.ops())})")
        fields = handler.fields
        self._ops[step.op] = entry = (handler, fields.args, fields.observed, fields.objects)
        return entry

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

    def refused(self, step: Step, error: str, clause: str) -> None:
        """Note a step the target rightly refused with `error` under `clause` (kept up to REFUSALS_MAX)."""
        if len(self.refusals) < REFUSALS_MAX:
            self.refusals.append(Refusal(step.number, step.actor, step.op, step.args, error, clause))

    @staticmethod
    def expect(clause: str, name: str, expected: Any, observed: Any) -> None:
        """Compare one observed field (None: not observed, not judged) with the single allowed value."""
        if observed is not None and observed != expected:
            raise Violation(clause, f"{name}={_show(expected)}", f"{name}={_show(observed)}")


def _check_fields(step: Step, fields: Fields) -> None:
    for part, known in (("args", fields.args), ("observed", fields.observed)):
        _known_fields(step, part, getattr(step, part) or {}, known)


def _check_objects(step: Step, objects: tuple[tuple[str, str, frozenset[str]], ...]) -> None:
    """The objects inside declared fields (a list of them, or a map of them by name) hold only their fields."""
    for part, name, known in objects:
        value = (getattr(step, part) or _EMPTY).get(name)
        for entry in value if type(value) is list else value.values() if type(value) is dict else ():
            if type(entry) is dict and not known.issuperset(entry):
                _report_object(step, part, name, value, known)


def _report_object(step: Step, part: str, name: str, value: list | dict, known: frozenset[str]) -> None:
    keyed = enumerate(value) if type(value) is list else value.items()
    for key, entry in keyed:
        if type(entry) is dict:
            _known_fields(step, f"{part}.{name}[{key}]" if type(value) is list else f"{part}.{name}.{key}", entry, known)


def _known_fields(step: Step, where: str, value: dict, known: frozenset[str]) -> None:
    unknown = sorted(set(value) - known)
    if unknown:
        names = ", ".join(sorted(known)) or "none"
        raise Malformed(step.line, f"unknown field{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} "
                                   f"in {where} of {step.op!r} (known: {names})")


_EMPTY: dict[str, Any] = {}


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
