"""One judge per machine of shared/TRACE-FORMAT.md, one module each, found by discovery."""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from kipcheck.oracle.judge import Judge


@cache
def judges() -> dict[str, type[Judge]]:
    """Every machine's judge class, by machine name."""
    found: dict[str, type[Judge]] = {}
    for module_info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{module_info.name}")
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, Judge) and value is not Judge and value.__module__ == module.__name__:
                found[value.machine] = value
    return found
