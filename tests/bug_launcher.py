"""The `__main__` of the seeded-bug launchers (tests/broker_bugs.py, tests/expansion_broker_bugs.py,
tests/expansion_processor_bugs.py): `python LAUNCHER BUG ARGS...` patches BUG in, then runs a command's main."""

from __future__ import annotations

import sys
from typing import Callable, NoReturn


def run_with_bug(bugs: dict[str, Callable[[], None]], load_main: Callable[[], Callable[[list[str]], int]]) -> NoReturn:
    """Patches the bug sys.argv[1] names, then exits with `load_main()(sys.argv[2:])` (the main is loaded only
    after the patch, so modules it imports see it)."""
    name, arguments = sys.argv[1], sys.argv[2:]
    if name not in bugs:
        raise SystemExit(f"unknown bug {name!r} (known: {', '.join(bugs)})")
    bugs[name]()
    raise SystemExit(load_main()(arguments))
