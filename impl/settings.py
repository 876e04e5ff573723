"""Settings under Kafka's names, read the same way by every config in impl/ (broker, share, groups, ic, consumer).

    parse_integer("max.poll.records", " 100 ") -> 100        # strings (a properties file) or ints
    parse_boolean("accept.individual.commit", "TRUE") -> True
    field_of(PROPERTIES, "group.max.size", "group config") -> "classic_max_size"
    kafka_name(PROPERTIES, "classic_max_size") -> "group.max.size"

PROPERTIES maps each Kafka name to the config's field. Every failure is a
ValueError whose message names the setting, so a command line prints it
instead of a traceback.
"""

from __future__ import annotations

from typing import Iterable, Mapping


def parse_integer(name: str, raw: str | int) -> int:
    """An integer setting given as a string or an int; ValueError naming the setting otherwise."""
    if type(raw) is int:
        return raw
    try:
        return int(str(raw).strip())
    except ValueError:
        raise ValueError(f"{name} must be an integer, found {raw!r}") from None


def parse_boolean(name: str, raw: str | int | bool) -> bool:
    """A true/false setting given as a string or a bool; ValueError naming the setting otherwise."""
    if type(raw) is bool:
        return raw
    text = str(raw).strip().lower()
    if text not in ("true", "false"):
        raise ValueError(f"{name} must be true or false, found {raw!r}")
    return text == "true"


def field_of(properties: Mapping[str, str], name: str, kind: str, also_known: Iterable[str] = ()) -> str:
    """The field Kafka's setting `name` sets; ValueError naming it, and every name known, when unknown."""
    field = properties.get(name)
    if field is None:
        raise ValueError(f"unknown {kind} {name!r} (known: {', '.join(sorted([*properties, *also_known]))})")
    return field


def kafka_name(properties: Mapping[str, str], field: str) -> str:
    """Kafka's name of a config field, for messages."""
    return next(name for name, field_name in properties.items() if field_name == field)
