"""The connectors' options: named as Spark's own Kafka source names them where they overlap.

Options arrive from Spark as strings, keys lower-cased. `parse(options, known)`
checks every key against the connector's table and converts the values; a bad
option raises OptionError with a sentence naming the option, what it got and
what it takes. Options starting with `kafka.` go to the Kafka client unchanged
(without the prefix), as in Spark's Kafka source.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from kipcheck.impl.settings import parse_boolean

TRACE_PROFILES = ("kafka-4.2", "kip")
# Spark Kafka source options these connectors do not take, with what to use instead.
NOT_SUPPORTED = {
    "assign": "name the topics with subscribe",
    "subscribepattern": "name the topics with subscribe",
    "startingtimestamp": "use startingOffsets",
    "startingoffsetsbytimestamp": "use startingOffsets",
    "endingtimestamp": "use endingOffsets",
    "endingoffsetsbytimestamp": "use endingOffsets",
    "groupidprefix": "set kafka.group.id",
}


class OptionError(ValueError):
    """A connector option is missing, unknown or has a value the connector cannot take."""


@dataclass(frozen=True)
class Option:
    name: str  # as a user writes it (Spark's camelCase); looked up lower-cased
    convert: Callable[[str, str], Any]
    default: Any = None
    required: bool = False


def text(name: str, value: str) -> str:
    if not value.strip():
        raise OptionError(f"option {name} is empty")
    return value.strip()


def positive_int(name: str, value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise OptionError(f"option {name} must be a positive integer, found {value!r}") from None
    if number < 1:
        raise OptionError(f"option {name} must be a positive integer, found {value!r}")
    return number


def boolean(name: str, value: str) -> bool:
    try:
        return parse_boolean(name, value)
    except ValueError as error:
        raise OptionError(f"option {error}") from None


def topics(name: str, value: str) -> tuple[str, ...]:
    names = tuple(part.strip() for part in value.split(","))
    if not all(names) or len(set(names)) != len(names):
        raise OptionError(f"option {name} must be a comma-separated list of distinct topic names, found {value!r}")
    return names


def one_of(*choices: str) -> Callable[[str, str], str]:
    def convert(name: str, value: str) -> str:
        if value not in choices:
            raise OptionError(f"option {name} must be one of {', '.join(choices)}, found {value!r}")
        return value
    return convert


def json_object(name: str, value: str) -> dict:
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as error:
        raise OptionError(f"option {name} must be a JSON object: {error}") from None
    if not isinstance(parsed, dict):
        raise OptionError(f"option {name} must be a JSON object, found {value!r}")
    return parsed


COMMON = (
    Option("kafka.bootstrap.servers", text, required=True),
    Option("subscribe", topics, required=True),
    Option("includeHeaders", boolean, False),
    Option("maxOffsetsPerTrigger", positive_int),
    Option("traceLocation", text),
    Option("traceProfile", one_of(*TRACE_PROFILES), "kafka-4.2"),
    Option("traceConfig", json_object, {}),
)


def parse(options: Mapping[str, str], known: tuple[Option, ...], connector: str,
          refused: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The options as {name: value} (names as in `known`, plus `kafka` for the client config).

    `refused`: options (lower-case) this connector does not take, each with the reason.
    """
    table = {option.name.lower(): option for option in (*COMMON, *known)}
    not_taken = {**NOT_SUPPORTED, **(refused or {})}
    options = {key.lower(): value for key, value in options.items()}
    parsed: dict[str, Any] = {"kafka": {}}
    for key, value in options.items():
        if key in table:
            continue
        if key in not_taken:
            raise OptionError(f"{connector} does not take option {key}: {not_taken[key]}")
        if not key.startswith("kafka."):
            raise OptionError(f"{connector} has no option {key!r} (its options: "
                              f"{', '.join(sorted(option.name for option in table.values()))}, kafka.*)")
        parsed["kafka"][key[len("kafka."):]] = value
    for key, option in table.items():
        if key in options:
            parsed[option.name] = option.convert(option.name, options[key])
        elif option.required:
            raise OptionError(f"{connector} needs option {option.name}")
        else:
            parsed[option.name] = option.default
    parsed["kafka"]["bootstrap.servers"] = parsed["kafka.bootstrap.servers"]
    return parsed
