"""Running one broker scenario: a broker in its own work dir, a body that drives clients, then the traces judged.

    result = run_scenario(name, work_dir, settings, body, launcher, profile, needs_traces=True)
    result = run_on_shared(name, SharedBroker(bootstrap, work_dir), body, profile)   # on a target's own broker
    check(condition, "what the clients saw instead")      # inside a body: raises ScenarioFailed

Every scenario module of this package is built on it. A scenario that runs on a broker it did not start (a
target's own, e.g. Apache Kafka) is judged by what its clients saw; the target judges that broker's traces.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from kipcheck.oracle.check import Verdict, check_file
from kipcheck.oracle.conformance.targets.embedded import DEFAULT_LAUNCHER, EmbeddedBroker

WAIT_S = 90.0


class ScenarioFailed(AssertionError):
    """What the clients saw breaks the protocol's promise."""


@dataclass
class ScenarioResult:
    name: str
    checks_ok: bool
    detail: str
    traces: list[Verdict] = field(default_factory=list)
    seconds: float = 0.0
    needs_traces: bool = True  # a scenario that uses share groups must leave traces to judge
    profile: str = "kafka-4.2"
    skipped: str = ""          # why it could not run here (its clients are missing): neither passed nor failed

    @property
    def traces_ok(self) -> bool:
        return (bool(self.traces) or not self.needs_traces) and all(verdict.status == "ok" for verdict in self.traces)

    @property
    def ok(self) -> bool:
        return self.checks_ok and self.traces_ok

    def violations(self) -> list[Verdict]:
        return [verdict for verdict in self.traces if verdict.status != "ok"]

    def summary(self) -> str:
        if self.skipped:
            return f"SKIP  broker/{self.profile}/{self.name:<26} {self.skipped}"
        mark = "PASS" if self.ok else "FAIL"
        traces = f"{len(self.traces) - len(self.violations())}/{len(self.traces)} traces ok" if self.traces \
            else "no traces of its own"
        lines = [f"{mark}  broker/{self.profile}/{self.name:<26} clients: {'ok' if self.checks_ok else 'FAILED'}; {traces}  ({self.seconds:.0f} s)"]
        if not self.checks_ok:
            lines.append(f"      {self.detail}")
        lines += [f"      {verdict.summary()}" for verdict in self.violations()]
        return "\n".join(lines)


def judge_traces(trace_dir: Path) -> list[Verdict]:
    return [check_file(path) for path in sorted(Path(trace_dir).glob("*.jsonl"))]


def run_scenario(name: str, work_dir: Path, settings: dict, body: Callable[[EmbeddedBroker], str],
         launcher: tuple[str, ...], profile: str, needs_traces: bool = True) -> ScenarioResult:
    started = time.monotonic()
    broker = EmbeddedBroker(work_dir, settings, profile=profile, launcher=launcher)
    try:
        broker.start()
        detail, ok = body(broker), True
    except Exception as error:  # a scenario reports, it never crashes the runner
        detail, ok = f"{type(error).__name__}: {error}", False
    finally:
        try:
            broker.stop()
        except Exception as error:
            detail, ok = f"{detail}; stop failed: {error}", False
    if not ok:
        detail += f"\n      broker log tail:\n{broker.log_tail(15)}"
    return ScenarioResult(name, ok, detail, judge_traces(broker.trace_dir), time.monotonic() - started, needs_traces,
                          profile)


@dataclass(frozen=True)
class SharedBroker:
    """A running broker a scenario uses but did not start: where it is, and a work dir for the scenario's files."""

    bootstrap: str
    work_dir: Path


def run_on_shared(name: str, broker: SharedBroker, body: Callable[[SharedBroker], str],
                  profile: str) -> ScenarioResult:
    """`body` on a broker the scenario did not start: judged by what its clients saw alone."""
    started = time.monotonic()
    broker.work_dir.mkdir(parents=True, exist_ok=True)
    try:
        detail, ok = body(broker), True
    except Exception as error:  # a scenario reports, it never crashes the runner
        detail, ok = f"{type(error).__name__}: {error}", False
    return ScenarioResult(name, ok, detail, [], time.monotonic() - started, needs_traces=False, profile=profile)


def skipped(name: str, reason: str, profile: str) -> ScenarioResult:
    return ScenarioResult(name, True, reason, needs_traces=False, profile=profile, skipped=reason)


def check(condition: bool, message: str) -> None:
    if not condition:
        raise ScenarioFailed(message)


def named_scenario(name: str, body, doc: str, settings: dict[str, str] | None = None):
    """A scenario of the registry: `body` run by run_scenario under `name` on a broker with `settings`."""
    def scenario(work_dir: Path, launcher: tuple[str, ...] = DEFAULT_LAUNCHER,
                 profile: str = "kafka-4.2") -> ScenarioResult:
        return run_scenario(name, work_dir, settings or {}, body, launcher, profile)
    scenario.__doc__ = doc
    return scenario
