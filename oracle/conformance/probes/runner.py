"""The conformance run: probe scenarios against a target within a budget, every trace judged, results collected.

    runs = run_probes(target, names, work_dir, seed=7, budget_s=120, progress=bar.update)
    runs[0].verdicts, runs[0].outcome     # "passed", "failed", "inconclusive", "not observable", "error"

The named catalogue runs first, in order; the rest of the budget goes to swarm
runs, seeds `seed`, `seed + 1`, ... (a failure names the seed that replays it:
`--scenario swarm:SEED`). A run whose requests straddled a lock deadline is
inconclusive (tolerance.Ambiguous) and tried once more. A run during which the
target went away (its connection broke) is `lost`: what it saw until then is
judged (a violation there is a failure), and it is otherwise inconclusive, never
failed; when the target does not serve share groups again within LOST_WAIT_S,
probing stops. Once a run's scenario is done, its group and partitions are read
from the outside (outside.py, `observations`, kept as outside.json beside its
traces): what `conform --compare` compares besides the traces.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from kipcheck.impl.consumer.connection import ConnectionFailed
from kipcheck.oracle.check import Verdict
from kipcheck.oracle.conformance.probes.catalogue import CATALOGUE, NotObservable, swarm
from kipcheck.oracle.conformance.outside import probe_view
from kipcheck.oracle.conformance.probes.probe import Probe, ProbeError, judge
from kipcheck.oracle.conformance.probes.tolerance import Ambiguous, Timers

SWARM = "swarm"
SWARM_RUN_S = 25  # what one swarm run may take at most (a few lock expiries and waits), to keep within the budget
LOST_WAIT_S = 10.0  # how long a target that went away during a run may take to come back


@dataclass
class ProbeRun:
    name: str
    outcome: str
    detail: str
    verdicts: list[Verdict] = field(default_factory=list)
    paths: list[Path] = field(default_factory=list)
    seconds: float = 0.0
    lost: bool = False  # the target went away during the run
    observations: dict[str, dict] = field(default_factory=dict)  # its group and topics seen from outside, at the end

    @property
    def failed(self) -> bool:
        return self.outcome in ("failed", "error")


def scenario_names(text_names: list[str]) -> tuple[list[str], list[str]]:
    """(valid names, unknown ones): catalogue names, `swarm` (as many as the budget allows) or `swarm:SEED`."""
    unknown = [name for name in text_names if not (name in CATALOGUE or name == SWARM or _swarm_seed(name) is not None)]
    return [name for name in text_names if name not in unknown], unknown


def _swarm_seed(name: str) -> int | None:
    prefix, _, number = name.partition(":")
    return int(number) if prefix == SWARM and number.isdigit() else None


def run_probes(target, names: list[str], work_dir: Path, seed: int, budget_s: float, tolerance_ms: int,
               progress: Callable[[ProbeRun, float], None] | None = None,
               first_failure: bool = False) -> list[ProbeRun]:
    """Run the named scenarios (`swarm`: swarm runs while the budget lasts); with `first_failure`, stop at the first
    run that failed."""
    started = time.monotonic()
    runs: list[ProbeRun] = []

    def spent() -> float:
        return time.monotonic() - started

    def stopped() -> bool:
        gone = bool(runs) and runs[-1].lost and not target.reachable(LOST_WAIT_S)
        return gone or (first_failure and any(run.failed for run in runs))

    def one(name: str, scenario) -> None:
        run = _run_one(target, name, scenario, work_dir / name.replace(":", "-"), tolerance_ms)
        if run.outcome == "inconclusive" and not run.lost:
            run = _run_one(target, name, scenario, work_dir / (name.replace(":", "-") + "-again"), tolerance_ms)
        runs.append(run)
        if progress is not None:
            progress(run, min(spent() / budget_s, 1.0))

    for name in names:
        if stopped():
            break
        if name == SWARM:
            next_seed = seed
            while spent() + SWARM_RUN_S < budget_s and not stopped():
                one(f"{SWARM}:{next_seed}", swarm(next_seed))
                next_seed += 1
        elif _swarm_seed(name) is not None:
            one(name, swarm(_swarm_seed(name)))
        else:
            one(name, CATALOGUE[name])
    return runs


def _run_one(target, name: str, scenario, work_dir: Path, tolerance_ms: int) -> ProbeRun:
    started = time.monotonic()
    probe, lost, observations = None, False, {}
    try:
        probe = Probe(target, name.replace(":", "-"), Timers(tolerance_ms))
        detail, outcome = scenario(probe), "passed"
        observations = probe_view(probe)
    except NotObservable as reason:
        detail, outcome = str(reason), "not observable"
    except Ambiguous as reason:
        detail, outcome = str(reason), "inconclusive"
    except ProbeError as error:
        detail, outcome = f"{type(error).__name__}: {error}", "error"
    except (ConnectionFailed, OSError) as error:
        detail, outcome, lost = f"the target went away: {error}", "inconclusive", True
    paths = probe.finish(work_dir) if probe is not None else []
    if observations:
        (work_dir / "outside.json").write_text(json.dumps(observations, indent=1, sort_keys=True) + "\n")
    run = ProbeRun(name, outcome, detail, paths=paths, seconds=time.monotonic() - started, lost=lost,
                   observations=observations)
    if outcome in ("passed", "error") or run.lost:
        run.verdicts = judge(paths)
        if any(verdict.status == "violation" for verdict in run.verdicts) or (
                not run.lost and any(verdict.status != "ok" for verdict in run.verdicts)):
            run.outcome = "failed"
    return run
