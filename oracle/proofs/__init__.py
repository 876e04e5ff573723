"""Theorems about the models, proved with z3: the engine behind `kipcheck prove`.

One module per theorem family. Each module's `THEOREMS` lists `Theorem`s; a
theorem's `check()` returns None when the claim holds, or a concrete
counterexample in words. A theorem stated to fail (`expect_refuted`) passes
only when z3 finds its counterexample.

Every proof is about a z3 encoding written here, not about the Python code, so
each family also samples the model's own function and compares it with the
encoding (`agreement` in the theorem's name): a model that drifts from the
proved encoding fails `kipcheck prove` with the input where they differ.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Iterable

import z3

TIMEOUT_MS = 120_000


class ProofUnknown(Exception):
    """z3 gave up (timeout or incompleteness): neither proved nor refuted."""


@dataclass(frozen=True)
class Theorem:
    name: str
    clauses: tuple[str, ...]
    statement: str  # the claim, its encoding and its bounds, in one or two sentences
    check: Callable[[], str | None]  # None: holds; otherwise a counterexample in words
    expect_refuted: bool = False


@dataclass(frozen=True)
class Result:
    theorem: Theorem
    status: str  # "proved", "refuted as expected", "FAILED" or "UNKNOWN"
    detail: str
    seconds: float

    @property
    def ok(self) -> bool:
        return self.status in ("proved", "refuted as expected")


def run(theorem: Theorem) -> Result:
    started = time.perf_counter()
    try:
        counterexample = theorem.check()
    except ProofUnknown as unknown:
        return Result(theorem, "UNKNOWN", str(unknown), time.perf_counter() - started)
    except Exception as crash:  # noqa: BLE001 - a model that crashes on a sampled input fails its theorem
        return Result(theorem, "FAILED", f"crashed: {type(crash).__name__}: {crash}", time.perf_counter() - started)
    seconds = time.perf_counter() - started
    if theorem.expect_refuted:
        if counterexample is None:
            return Result(theorem, "FAILED", "expected a counterexample, z3 found none", seconds)
        return Result(theorem, "refuted as expected", counterexample, seconds)
    if counterexample is None:
        return Result(theorem, "proved", "", seconds)
    return Result(theorem, "FAILED", counterexample, seconds)


def counterexample(hypotheses: Iterable[z3.BoolRef], goal: z3.BoolRef, name: str) -> z3.ModelRef | None:
    """A model of the hypotheses breaking `goal`, or None when the goal follows (z3 says unsat)."""
    solver = z3.Solver()
    solver.set("timeout", TIMEOUT_MS)
    solver.add(*hypotheses)
    solver.add(z3.Not(goal))
    verdict = solver.check()
    if verdict == z3.unsat:
        return None
    if verdict == z3.unknown:
        raise ProofUnknown(f"{name}: z3 returned unknown ({solver.reason_unknown()})")
    return solver.model()


def first_failure(steps: Iterable[tuple[str, list, z3.BoolRef]], show: Callable[[z3.ModelRef], str]) -> str | None:
    """Check (name, hypotheses, goal) steps in order; describe the first one z3 refutes.

    Each step's hypotheses must be satisfiable on their own: contradictory hypotheses would prove anything.
    """
    for name, hypotheses, goal in steps:
        if counterexample(hypotheses, z3.BoolVal(False), f"{name} (hypotheses)") is None:
            return f"{name}: vacuous, its hypotheses contradict each other"
        model = counterexample(hypotheses, goal, name)
        if model is not None:
            return f"{name}: {show(model)}"
    return None


def describe(model: z3.ModelRef, **terms) -> str:
    """`name=value` for each term the model assigns (terms it leaves free do not matter)."""
    shown = ((name, model.eval(term)) for name, term in terms.items())
    return ", ".join(f"{name}={value}" for name, value in shown if z3.is_int_value(value) or z3.is_true(value) or z3.is_false(value))


def all_theorems() -> list[Theorem]:
    from kipcheck.oracle.proofs import ic_merge, key_range_split, linear_hashing, share_partition_bmc

    return [theorem for module in (ic_merge, key_range_split, linear_hashing, share_partition_bmc)
            for theorem in module.THEOREMS]
