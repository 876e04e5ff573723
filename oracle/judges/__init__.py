"""One judge per machine of shared/TRACE-FORMAT.md, by machine name."""

from __future__ import annotations

from kipcheck.oracle.judge import Judge


def judges() -> dict[str, type[Judge]]:
    """Every machine's judge class, imported on first use."""
    from kipcheck.oracle.judges import expansion

    found: list[type[Judge]] = [expansion.ExpansionJudge]
    return {judge.machine: judge for judge in found}
