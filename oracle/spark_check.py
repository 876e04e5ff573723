"""`kipcheck check --spark`: judge many traces at once on Spark; each trace is judged whole by one task.

A trace is sequential by nature (each step is judged in the state the steps
before it left), so the unit of work is the trace, never part of one. Each
task runs the same checker as `kipcheck check` (check_file, which streams:
memory stays flat however long the trace) over its share of the traces, and
the verdicts come back in input order. The traces are packed into up to
TASKS_PER_CORE tasks per core of the cluster, the largest first, each to the
task with the fewest bytes so far: a Python task costs tens of milliseconds
to start, as much as judging a 10,000-step trace. A single huge trace is one
task: it takes as long as on one core, and Spark adds only its start-up. The
paths must be readable where the tasks run: on local[*] any local path; on a
cluster, a file system every executor mounts.
"""

from __future__ import annotations

import heapq
import os
from typing import Sequence

from kipcheck.oracle.check import Verdict, check_file

TASKS_PER_CORE = 4


def packed(paths: Sequence[str], tasks: int) -> list[list[tuple[int, str]]]:
    """(index, path) pairs in `tasks` groups of about equal bytes: largest first, each to the lightest group."""
    def size(path: str) -> int:
        try:
            return os.path.getsize(path)
        except OSError:
            return 0  # judged as unreadable by its task, like the plain checker does

    groups: list[list[tuple[int, str]]] = [[] for _ in range(tasks)]
    lightest = [(0, number) for number in range(tasks)]
    for index, path in sorted(enumerate(paths), key=lambda item: -size(item[1])):
        load, number = heapq.heappop(lightest)
        groups[number].append((index, path))
        heapq.heappush(lightest, (load + size(path), number))
    return [group for group in groups if group]


def check_on_spark(paths: Sequence[str], master: str = "local[*]", reference: bool = False,
                   spark=None) -> list[Verdict]:
    """The verdicts of `paths`, in order, judged on Spark (on `spark`, or a new session on `master`)."""
    if not paths:
        return []
    from kipcheck.impl.spark.session import local_session

    session = spark or local_session(master, "kipcheck-check")
    try:
        context = session.sparkContext
        groups = packed(paths, min(len(paths), max(1, context.defaultParallelism) * TASKS_PER_CORE))
        judged = (context.parallelize(groups, numSlices=len(groups))
                  .flatMap(lambda group: [(index, check_file(path, reference)) for index, path in group])
                  .collect())
    finally:
        if spark is None:
            session.stop()
    return [verdict for _, verdict in sorted(judged, key=lambda pair: pair[0])]
