"""One `kipcheck conform` session against a target: probes, client scenarios, the broker's own traces, the verdict.

    target = targets.resolve("embedded", TargetOptions("kafka-4.2"))
    probe_names, client_names = target.scenarios([])
    outcome = run(target, probe_names, client_names, work_dir, seed=1, budget_s=60, tolerance_ms=None)
    print(outcome.render(verbose=False, target_text="embedded"))
    outcome.failures            # probe runs failed + client scenarios failed + broker traces not allowed

Progress goes to stderr (a bar over the probe budget, then one line per client scenario).
"""

from __future__ import annotations

import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from tqdm import tqdm

from kipcheck.oracle.check import Verdict, check_file
from kipcheck.oracle.conformance.probes.runner import ProbeRun
from kipcheck.oracle.conformance.probes.tolerance import DEFAULT_TOLERANCE_MS
from kipcheck.oracle.conformance.report import clause_table, format_table
from kipcheck.oracle.conformance.scenarios.runner import ScenarioResult
from kipcheck.oracle.conformance.shrink import shrink_file
from kipcheck.oracle.conformance.targets import Target


@dataclass
class Outcome:
    profile: str
    probe_runs: list[ProbeRun] = field(default_factory=list)
    client_results: list[ScenarioResult] = field(default_factory=list)
    broker_verdicts: list[Verdict] = field(default_factory=list)
    broker_traces_label: str = "the broker's own traces"
    unobservable: dict[str, str] = field(default_factory=dict)
    shrunk: Path | None = None
    replay: str = ""
    error: str | None = None

    @property
    def verdicts(self) -> list[Verdict]:
        return ([verdict for run in self.probe_runs for verdict in run.verdicts] + self.broker_verdicts
                + [verdict for result in self.client_results for verdict in result.traces])

    @property
    def failures(self) -> int:
        return (sum(run.failed for run in self.probe_runs) + sum(not result.ok for result in self.client_results)
                + sum(verdict.status != "ok" for verdict in self.broker_verdicts) + (self.error is not None))

    def render(self, verbose: bool, target_text: str) -> str:
        lines = [f"\nprobes against {target_text} ({self.profile}):"]
        for run in self.probe_runs:
            lines.append(f"  {run.outcome.upper():<15} {run.name:<24} {run.detail}  ({run.seconds:.1f} s)")
            lines += [f"      {verdict.summary()}" for verdict in run.verdicts if verdict.status != "ok"]
        if self.client_results:
            lines.append("\nclient scenarios (confluent-kafka clients; each on a broker of its own):")
            lines += [f"  {result.summary()}" for result in self.client_results]
        if self.broker_verdicts:
            bad = [verdict for verdict in self.broker_verdicts if verdict.status != "ok"]
            lines.append(f"\n{self.broker_traces_label}: {len(self.broker_verdicts) - len(bad)} of "
                         f"{len(self.broker_verdicts)} allowed")
            lines += [f"  {verdict.summary()}" for verdict in bad]
        if self.error:
            lines.append(f"\nthe target failed: {self.error}")
        lines.append("\nclauses:")
        lines.append(self.table(verbose))
        if self.shrunk is not None:
            lines.append(f"\nfirst failure, shrunk: {self.shrunk}\n  reproduce: kipcheck check {self.shrunk}"
                         f"\n  replay:    {self.replay}")
        return "\n".join(lines)

    def table(self, verbose: bool) -> str:
        return format_table(clause_table(self.verdicts, self.profile, self.unobservable), verbose)

    def counterexamples(self, most: int = 10) -> list[tuple[Verdict, Path]]:
        """(verdict, trace) of the traces that broke a clause, the probes' first."""
        return [(verdict, Path(verdict.name)) for verdict in self.verdicts if verdict.status == "violation"][:most]

    def junit_cases(self) -> list[tuple[str, str, float, str | None, str | None]]:
        cases = []
        for run in self.probe_runs:
            failure = None
            if run.failed:
                failure = "\n".join([run.detail] + [verdict.summary() for verdict in run.verdicts if verdict.status != "ok"])
            skipped = run.detail if run.outcome in ("not observable", "inconclusive") else None
            cases.append(("probes", run.name, run.seconds, failure, skipped))
        for result in self.client_results:
            cases.append(("client scenarios", result.name, result.seconds, None if result.ok else result.summary(), None))
        for verdict in self.broker_verdicts:
            cases.append(("broker traces", Path(verdict.name).name, 0.0,
                          None if verdict.status == "ok" else verdict.summary(), None))
        if self.error is not None:
            cases.append(("target", "the target ran to the end", 0.0, self.error, None))
        return cases


def run(target: Target, probe_names: list[str], client_names: list[str], work_dir: Path, seed: int,
        budget_s: float, tolerance_ms: int | None, first_failure: bool = False) -> Outcome:
    """Open `target`, make its runs, judge its own traces, close it; then the client scenarios; the first failure
    shrunk. A target that dies or refuses is reported as a failure, never a traceback."""
    outcome = Outcome(target.profile, unobservable=dict(target.unobservable),
                      broker_traces_label=target.broker_traces_label)
    tolerance_ms = DEFAULT_TOLERANCE_MS if tolerance_ms is None else tolerance_ms
    try:
        target.open(work_dir)
        if probe_names:
            outcome.probe_runs = _exercise(target, probe_names, work_dir, seed, budget_s, tolerance_ms, first_failure)
        outcome.broker_verdicts = [check_file(path) for path in target.broker_traces()]
    except Exception as error:
        # One line for the verdict; the whole traceback beside the run's traces, for whoever reports it.
        log = work_dir / "target-failure.txt"
        log.write_text(traceback.format_exc())
        outcome.error = f"{type(error).__name__}: {error} (traceback in {log})"
    finally:
        target.close()
    if client_names and not (first_failure and outcome.failures):
        outcome.client_results = _clients(client_names, work_dir / "clients", target)
    _shrink_first_failure(outcome, work_dir, target)
    return outcome


def _exercise(target: Target, names: list[str], work_dir: Path, seed: int, budget_s: float, tolerance_ms: int,
              first_failure: bool) -> list[ProbeRun]:
    label = target.runs_label
    with tqdm(total=100, desc=label, file=sys.stderr, leave=False, bar_format="{desc} {bar} {n:.0f}% of the budget") as bar:
        def progress(run: ProbeRun, fraction: float) -> None:
            bar.n = max(bar.n, fraction * 100)
            bar.set_description_str(f"{label} (last: {run.name} {run.outcome})")

        return target.exercise(names, work_dir / label, seed, budget_s, tolerance_ms, progress, first_failure)


def _clients(names: list[str], work_root: Path, target: Target) -> list[ScenarioResult]:
    from kipcheck.oracle.conformance import scenarios

    launcher = {"launcher": target.options.launcher} if target.options.launcher else {}
    results = []
    for name in names:
        print(f"client scenario {name} ...", file=sys.stderr, flush=True)
        results.append(scenarios.scenario(name)(work_root / name, profile=target.profile, **launcher))
    return results


def _shrink_first_failure(outcome: Outcome, work_dir: Path, target: Target) -> None:
    for run_ in outcome.probe_runs:
        failing = [path for path, verdict in zip(run_.paths, run_.verdicts) if verdict.status == "violation"]
        if failing:
            outcome.shrunk = shrink_file(failing[0], work_dir / f"shrunk-{failing[0].name}")
            outcome.replay = target.replay(run_.name)
            return
    bad = [verdict for verdict in outcome.verdicts if verdict.status == "violation"]
    if bad:
        path = Path(bad[0].name)
        outcome.shrunk = shrink_file(path, work_dir / f"shrunk-{path.name}")
        outcome.replay = f"kipcheck check {path}"
