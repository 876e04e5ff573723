"""The in-process target: a share-partition implementation driven directly, on a virtual clock.

    kipcheck conform --target reference                        # impl/share's SharePartition
    kipcheck conform --target python:mypackage.partition:make  # yours, behind the adapter protocol below

The adapter protocol: FACTORY(config) returns an object with

    on_append(base_offset, count, now_ms) -> None      # a log batch of `count` records landed
    acquire(member_id, max_records, now_ms) -> [(first, last, delivery_count), ...]
    acknowledge(member_id, [(first, last, type), ...], now_ms) -> error name   # type: accept, release, reject
    release_member(member_id, now_ms) -> object         # the member's session ended (the answer is ignored)
    spso -> int                                         # optional: the start offset, read after every step
    straddle_npe -> str                                 # optional: "flag" if it answers INVALID_RECORD_STATE
                                                        # where Kafka 4.2 fails (spec SP-40); "accept" if absent

where `config` is a dict {"delivery_count_limit", "record_lock_duration_ms",
"max_inflight_records", "profile"} and times are milliseconds on a clock that
never goes back. Every call must first fire the locks whose deadline is
<= now_ms (the trace format's timers). oracle/conformance/adapter_example.py
is a worked example (impl/share's SharePartition, which `reference` uses).

Each seeded run draws its settings (lock duration, delivery limit, in-flight
limit, members) and then steps: appends, acquisitions, acknowledgements of
held records (whole, partial, any type), hostile ones (another member's
records, past the end, below SPSO, duplicates), sessions ending and time
passing past lock deadlines. The answers are written as a share-partition
trace (with a `check` of SPSO after every step when the adapter has `spso`;
its header says `"kafka_ranges": "waive"` under a Kafka profile when the drawn
settings are outside that Kafka's ranges, spec SP-45, SP-71) and judged; a run that raises is a failure with its traceback's last line.

There is no broker: no probe, client scenario or broker trace, nothing to
restart (XM-1 and SP-26 are not observable), and no settings to tell (each run
draws its own). `--scenario` takes `swarm` (runs until the budget is spent)
and `swarm:SEED` (that run again).
"""

from __future__ import annotations

import importlib
import json
import random
import time
from pathlib import Path
from typing import Callable

from kipcheck.model.share_partition import kafka_range_violation
from kipcheck.oracle.check import check_file
from kipcheck.oracle.conformance.probes.runner import SWARM, ProbeRun, scenario_names
from kipcheck.oracle.conformance.targets import Target, TargetError, TargetOptions

REFERENCE = "python:kipcheck.oracle.conformance.adapter_example:make_partition"
RUN_STEPS_MAX = 400


class AdapterError(TargetError):
    """A python:MODULE:FACTORY target that cannot be loaded (the message says why)."""


def load_factory(target: str) -> Callable[[dict], object]:
    """The FACTORY of `python:MODULE:FACTORY` (or of `reference`)."""
    spec = REFERENCE if target == "reference" else target
    module_name, _, factory_name = spec.removeprefix("python:").rpartition(":")
    if not spec.startswith("python:") or not module_name or not factory_name:
        raise AdapterError(f"{spec!r}: expected python:MODULE:FACTORY, e.g. {REFERENCE}")
    try:
        factory = getattr(importlib.import_module(module_name), factory_name)
    except (ImportError, AttributeError, ValueError) as error:
        raise AdapterError(f"cannot load {spec!r}: {error}") from None
    if not callable(factory):
        raise AdapterError(f"{spec!r} is not callable")
    return factory


class InProcessTarget(Target):
    forms = {"reference": "impl/share's share-partition, in this process, on a\n"
                          "virtual clock: seeded runs until the budget is spent",
             "python:MODULE:FACTORY": "your share-partition implementation behind a small\n"
                                      "adapter (oracle/conformance/targets/in_process.py;\n"
                                      "a worked example: oracle/conformance/adapter_example.py)"}
    runs_label = "runs"

    def __init__(self, text: str, options: TargetOptions):
        from kipcheck.impl.share.config import PROFILES, unserved_profile

        super().__init__(text, options)
        if text == "reference" and self.profile not in PROFILES:
            raise TargetError(f"--target reference: {unserved_profile(self.profile)}")
        self.factory = load_factory(text)

    @classmethod
    def accepts(cls, text: str) -> bool:
        return text == "reference" or text.startswith("python:")

    @property
    def unobservable(self) -> dict[str, str]:
        return {"XM-1": "no broker", "SP-26": "no broker"}

    def scenarios(self, names: list[str]) -> tuple[list[str], list[str]]:
        bad = [name for name in names if name != SWARM and not name.startswith(f"{SWARM}:")]
        if bad or scenario_names(names)[1]:
            raise TargetError(f"a python or reference target runs {SWARM} or {SWARM}:SEED only, "
                              f"not {', '.join(bad or names)}")
        return names or [SWARM], []

    def exercise(self, names: list[str], work_dir: Path, seed: int, budget_s: float, tolerance_ms: int,
                 progress: Callable[[ProbeRun, float], None] | None = None,
                 first_failure: bool = False) -> list[ProbeRun]:
        seeds = None if names == [SWARM] else [int(name.partition(":")[2]) for name in names]
        return run_seeds(self.factory, self.profile, work_dir, seed, budget_s, progress, first_failure, seeds)


def run_seeds(factory: Callable[[dict], object], profile: str, work_dir: Path, seed: int, budget_s: float,
              progress: Callable[[ProbeRun, float], None] | None = None, first_failure: bool = False,
              seeds: list[int] | None = None) -> list[ProbeRun]:
    """Seeded runs from `seed` on while the budget lasts (or exactly `seeds`)."""
    started = time.monotonic()
    runs: list[ProbeRun] = []
    next_seed = seed
    while (seeds is None and time.monotonic() - started < budget_s) or (seeds is not None and len(runs) < len(seeds)):
        current = seeds[len(runs)] if seeds is not None else next_seed
        runs.append(_run(factory, profile, work_dir, current))
        next_seed += 1
        if progress is not None:
            progress(runs[-1], min((time.monotonic() - started) / budget_s, 1.0))
        if first_failure and runs[-1].failed:
            break
    return runs


def _run(factory, profile: str, work_dir: Path, seed: int) -> ProbeRun:
    started = time.monotonic()
    rng = random.Random(seed)
    config = {"delivery_count_limit": rng.randint(1, 6), "record_lock_duration_ms": rng.choice([100, 1000, 30000]),
              "max_inflight_records": rng.choice([5, 20, 200]), "profile": profile}
    steps: list[dict] = []
    detail = f"seed {seed}"
    outcome = "passed"
    settings = {key: value for key, value in config.items() if key != "profile"}
    try:
        partition = factory(dict(config))
        if getattr(partition, "straddle_npe", "accept") != "accept":
            settings["straddle_npe"] = partition.straddle_npe
        _drive(partition, rng, config, steps)
    except Exception as error:  # the implementation under test failed: a finding, reported with what it did
        outcome, detail = "error", f"seed {seed}: the implementation raised {type(error).__name__}: {error}"
    path = work_dir / f"python-{seed}.share-partition.jsonl"
    work_dir.mkdir(parents=True, exist_ok=True)
    if kafka_range_violation(settings, profile) is not None:
        settings["kafka_ranges"] = "waive"   # SP-45, SP-71: test-sized settings, drawn to reach limits in a few steps
    header = {"format": "kipcheck-trace", "version": 1, "machine": "share-partition", "profile": profile,
              "config": settings}
    path.write_text("\n".join(json.dumps(line) for line in [header, *steps]) + "\n")
    verdict = check_file(path)
    if verdict.status != "ok":
        outcome = "failed"
    return ProbeRun(f"swarm:{seed}", outcome, detail, [verdict], [path], time.monotonic() - started)


def _drive(partition, rng: random.Random, config: dict, steps: list[dict]) -> None:
    members = [f"m{index}" for index in range(rng.randint(1, 4))]
    held: dict[str, list[list[int]]] = {member: [] for member in members}
    now, log_end = 0, 0

    def record(actor: str, op: str, args: dict, observed: dict | None = None) -> None:
        step = {"step": len(steps) + 1, "at_ms": now, "actor": actor, "op": op, "args": args}
        if observed is not None:
            step["observed"] = observed
        steps.append(step)
        if op not in ("check", "tick") and hasattr(partition, "spso"):  # after a call, its locks have fired
            record("check", "check", {}, {"spso": partition.spso})

    for _ in range(rng.randint(20, RUN_STEPS_MAX)):
        now += rng.choice([0, 1, 10, config["record_lock_duration_ms"] // 2, config["record_lock_duration_ms"]])
        member = rng.choice(members)
        kind = rng.choice(["append", "acquire", "acquire", "ack", "ack", "hostile", "leave", "tick"])
        if kind == "append" or log_end == 0:
            count = rng.randint(1, 10)
            partition.on_append(log_end, count, now)
            log_end += count
            record("log", "append", {"count": count})
        elif kind == "acquire":
            max_records = rng.randint(1, 20)
            runs = [[int(first), int(last), int(count)] for first, last, count in partition.acquire(member, max_records, now)]
            held[member] += runs
            record(member, "acquire", {"max_records": max_records}, {"records": [list(run) for run in runs]})
        elif kind in ("ack", "hostile"):
            batches = _acknowledgement(rng, held[member] if kind == "ack" else held[rng.choice(members)], log_end)
            error = partition.acknowledge(member, batches, now)
            record(member, "acknowledge", {"batches": [{"first": first, "last": last, "type": kind}
                                                       for first, last, kind in batches]}, {"error": error})
        elif kind == "leave":
            partition.release_member(member, now)
            held[member] = []
            record(member, "leave", {})
        else:
            record("clock", "tick", {})


def _acknowledgement(rng: random.Random, runs: list[list[int]], log_end: int) -> list[tuple[int, int, str]]:
    """Part of one held run with a random type; or, with nothing held, a range anywhere up to past the log end."""
    kind = rng.choice(["accept", "accept", "release", "reject"])
    if not runs:
        first = rng.randint(0, log_end + 2)
        return [(first, first + rng.randint(0, 3), kind)]
    first, last, _ = rng.choice(runs)
    low = rng.randint(first, last)
    return [(low, rng.randint(low, last) + rng.choice([0, 0, 0, 2]), kind)]
