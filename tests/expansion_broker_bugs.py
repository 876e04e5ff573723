"""Seeded bugs in the reference broker's part of KIP-287 (CreatePartitions, the linear-hashing assignor). TEST-ONLY.

Run as a script, this module is a `kipcheck broker` launcher that first patches one bug into the broker, in this
process only (the production code is never edited):

    python tests/expansion_broker_bugs.py BUG broker --port 0 ...   # what EmbeddedBroker(launcher=launcher(BUG)) runs

- `grown-in-memory`: CreatePartitions grows the topic without writing topics.json: answered, lost by kill -9.
- `assignor-forgets-initial-count`: the linear-hashing server assignor hashes over the current processor
  count instead of N0 (partitions 15..17 of the seed's job go to processors 0..2, not 5..7).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable

HERE = Path(__file__).resolve()


def launcher(bug: str) -> tuple[str, ...]:
    return (sys.executable, str(HERE), bug, "broker")


def _grown_in_memory() -> None:
    from dataclasses import replace

    from kipcheck.impl.broker.metadata import Topics

    def grow(self, name, partitions):
        grown = replace(self.by_name[name], partitions=partitions)
        self._add(grown)
        return grown

    Topics.grow = grow


def _assignor_forgets_initial_count() -> None:
    from kipcheck.impl.expansion import assignor
    from kipcheck.model.expansion import linear_hash

    assignor.target = lambda job, partition: linear_hash(partition, job.processors, job.processors)


BUGS: dict[str, Callable[[], None]] = {
    "grown-in-memory": _grown_in_memory,
    "assignor-forgets-initial-count": _assignor_forgets_initial_count,
}


def _cli_main():
    from kipcheck.cli import main

    return main


if __name__ == "__main__":
    from bug_launcher import run_with_bug

    run_with_bug(BUGS, _cli_main)
