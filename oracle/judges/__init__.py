"""One judge per machine of TRACE-FORMAT.md, one module each, named after its machine.

The judge of machine `share-partition` is the one Judge subclass in module
`share_partition`. Only the module of the machine being judged is imported:
`kipcheck check` on one small file must not pay for every model.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from kipcheck.oracle.judge import Judge


@cache
def machines() -> tuple[str, ...]:
    """Every machine that has a judge, found without importing any judge."""
    return tuple(sorted(info.name.replace("_", "-") for info in pkgutil.iter_modules(__path__)))


@cache
def judge_class(machine: str) -> type[Judge] | None:
    """The judge class of `machine`, or None when no judge knows it."""
    if machine not in machines():
        return None
    module = importlib.import_module(f"{__name__}.{machine.replace('-', '_')}")
    found = [value for value in vars(module).values()
             if isinstance(value, type) and issubclass(value, Judge) and value.__module__ == module.__name__]
    assert len(found) == 1 and found[0].machine == machine, f"{module.__name__} must define the one judge of {machine}"
    return found[0]
