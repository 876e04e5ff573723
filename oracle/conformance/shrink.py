"""Shrinking a failing trace: the fewest steps that still break the same clause, for `kipcheck check`.

    path = shrink_file(trace_path, out_path)     # writes the minimal trace; returns out_path

Greedy delta debugging over the step lines: drop chunks of steps (halves, then
quarters, ... then single steps) while the trace still fails at the same clause
with the same allowed answer (so it still shows the same fault), then renumber the steps. The header is kept. Each try is one judge of a short
trace, so a few hundred tries take well under a second.
"""

from __future__ import annotations

import json
from pathlib import Path

from kipcheck.oracle.check import check_lines


def _fails_alike(header: str, steps: list[str], clause: str, allowed: str) -> bool:
    verdict = check_lines([header, *_renumbered(steps)])
    return verdict.status == "violation" and (verdict.clause, verdict.allowed) == (clause, allowed)


def _renumbered(steps: list[str]) -> list[str]:
    lines = []
    for number, line in enumerate(steps, start=1):
        step = json.loads(line)
        step["step"] = number
        lines.append(json.dumps(step))
    return lines


def shrink_lines(lines: list[str]) -> list[str]:
    """The shortest failing form found of a violating trace (header first); unchanged if it does not fail."""
    header, steps = lines[0], [line for line in lines[1:] if line.strip()]
    verdict = check_lines(lines)
    if verdict.status != "violation":
        return lines
    clause, allowed = verdict.clause, verdict.allowed
    steps = steps[:verdict.step]  # nothing after the failing step matters
    chunk = max(len(steps) // 2, 1)
    while True:
        index, removed = 0, False
        while index < len(steps):
            candidate = steps[:index] + steps[index + chunk:]
            if candidate and _fails_alike(header, candidate, clause, allowed):
                steps, removed = candidate, True
            else:
                index += chunk
        if chunk == 1 and not removed:
            return [header, *_renumbered(steps)]
        chunk = max(chunk // 2, 1)


def shrink_file(path: Path, out_path: Path) -> Path:
    out_path.write_text("\n".join(shrink_lines(Path(path).read_text().splitlines())) + "\n")
    return out_path
