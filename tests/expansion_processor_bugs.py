"""Seeded bugs in a KIP-287 processor on a real broker. TEST-ONLY.

Run as a script, this module is the launcher of examples/kip287_expansion.py's processors that first patches
one bug into impl/expansion's Processor, in that process only (the production code is never edited):

    python tests/expansion_processor_bugs.py BUG processor --bootstrap ... --index 12   # Job(launcher=launcher(BUG))

- `output-before-caught-up`: a new processor outputs the records of its partitions S1 while it catches up
  (tests/test_expansion_seeded_bugs.py's patch, here in a processor of its own on a broker).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).resolve()
EXAMPLE = HERE.parent.parent / "examples" / "kip287_expansion.py"


def launcher(bug: str) -> tuple[str, ...]:
    return (sys.executable, str(HERE), bug)


def load_example():
    """examples/kip287_expansion.py as a module (examples/ is no package), loaded once."""
    if "kip287_expansion" not in sys.modules:
        spec = importlib.util.spec_from_file_location("kip287_expansion", EXAMPLE)
        sys.modules[spec.name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[spec.name])
    return sys.modules["kip287_expansion"]


def _output_before_caught_up() -> None:
    from test_expansion_seeded_bugs import output_while_catching_up

    from kipcheck.impl.expansion.processor import Processor

    Processor._use = output_while_catching_up


BUGS = {"output-before-caught-up": _output_before_caught_up}


if __name__ == "__main__":
    from bug_launcher import run_with_bug

    run_with_bug(BUGS, lambda: load_example().main)
