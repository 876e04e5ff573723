"""Running one broker scenario: a broker in its own work dir, a body that drives clients, then the traces judged.

    result = run_scenario(name, work_dir, settings, body, launcher, profile, needs_traces=True)
    result = run_on_shared(name, SharedBroker(bootstrap, work_dir), body, profile)   # on a target's own broker
    check(condition, "what the clients saw instead")      # inside a body: raises ScenarioFailed
    scenario = portable_scenario(name, body, doc, leaves)  # runs on either, and reads what it `leaves` after

Every scenario module of this package is built on it. A scenario that runs on a broker it did not start (a
target's own, e.g. Apache Kafka) is judged by what its clients saw; the target judges that broker's traces.
A scenario that names what it leaves behind (outside.Leaves: its groups and topics) has them read from the
outside once its body is done, while its broker still runs (`observations`): what `conform --compare` compares.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from kipcheck.oracle.check import Verdict, check_file
from kipcheck.oracle.conformance.outside import Leaves, broker_view
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
    observations: dict[str, dict] = field(default_factory=dict)  # what it left, seen from outside (outside.py)

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
         launcher: tuple[str, ...], profile: str, needs_traces: bool = True,
         leaves: Leaves | None = None) -> ScenarioResult:
    started = time.monotonic()
    broker = EmbeddedBroker(work_dir, settings, profile=profile, launcher=launcher)
    observations: dict[str, dict] = {}
    try:
        broker.start()
        detail, ok = body(broker), True
        observations = _observe(broker, leaves)
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
                          profile, observations=observations)


@dataclass(frozen=True)
class SharedBroker:
    """A running broker a scenario uses but did not start: where it is, and a work dir for the scenario's files."""

    bootstrap: str
    work_dir: Path
    restart: Callable[[], None] | None = None   # kill -9 the broker and start it again, where the target can

    def kill_and_start(self) -> None:
        if self.restart is None:
            raise ScenarioFailed("this scenario kills the broker, which this target cannot restart")
        self.restart()


def run_on_shared(name: str, broker: SharedBroker, body: Callable[[SharedBroker], str],
                  profile: str, leaves: Leaves | None = None) -> ScenarioResult:
    """`body` on a broker the scenario did not start: judged by what its clients saw alone."""
    started = time.monotonic()
    broker.work_dir.mkdir(parents=True, exist_ok=True)
    observations: dict[str, dict] = {}
    try:
        detail, ok = body(broker), True
        observations = _observe(broker, leaves)
    except Exception as error:  # a scenario reports, it never crashes the runner
        detail, ok = f"{type(error).__name__}: {error}", False
    return ScenarioResult(name, ok, detail, [], time.monotonic() - started, needs_traces=False, profile=profile,
                          observations=observations)


def _observe(broker: EmbeddedBroker | SharedBroker, leaves: Leaves | None) -> dict[str, dict]:
    """What the scenario left (`leaves`), read from the outside, and kept beside its files as outside.json."""
    if leaves is None:
        return {}
    observations = broker_view(broker.bootstrap, leaves)
    (Path(broker.work_dir) / "outside.json").write_text(json.dumps(observations, indent=1, sort_keys=True) + "\n")
    return observations


def skipped(name: str, reason: str, profile: str) -> ScenarioResult:
    return ScenarioResult(name, True, reason, needs_traces=False, profile=profile, skipped=reason)


def check(condition: bool, message: str) -> None:
    if not condition:
        raise ScenarioFailed(message)


def portable_scenario(name: str, body, doc: str, leaves: Leaves, settings: dict[str, str] | None = None,
                      needs_traces: bool = True):
    """A scenario of the registry that also runs on a broker it did not start (`shared`: a target's own, e.g.
    Apache Kafka, whose settings are the embedded broker's), its clients confluent-kafka's; `leaves` is read from
    the outside after its body, on either broker."""
    def scenario(work_dir: Path, launcher: tuple[str, ...] = DEFAULT_LAUNCHER, profile: str = "kafka-4.2",
                 shared: SharedBroker | None = None) -> ScenarioResult:
        if shared is not None:
            return run_on_shared(name, shared, body, profile, leaves)
        return run_scenario(name, work_dir, settings or {}, body, launcher, profile, needs_traces, leaves)
    scenario.__doc__ = doc
    scenario.portable = True
    return scenario


def named_scenario(name: str, body, doc: str, settings: dict[str, str] | None = None):
    """A scenario of the registry: `body` run by run_scenario under `name` on a broker with `settings`."""
    def scenario(work_dir: Path, launcher: tuple[str, ...] = DEFAULT_LAUNCHER,
                 profile: str = "kafka-4.2") -> ScenarioResult:
        return run_scenario(name, work_dir, settings or {}, body, launcher, profile)
    scenario.__doc__ = doc
    return scenario
