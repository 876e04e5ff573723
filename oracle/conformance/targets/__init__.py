"""What `kipcheck conform --target` points at: one Target class per kind of target, one module each in this package.

    target = resolve("wire://10.0.0.5:9092", TargetOptions("kafka-4.2", {"group.share.record.lock.duration.ms": "15000"}))
    probes, clients = target.scenarios(names)   # of the --scenario names, what it runs (everything it can: none named)
    target.open(work_dir)                       # start what the runner starts (the embedded broker); then:
    target.address, target.settings             # where the probes connect, and what their trace headers say
    runs = target.exercise(probes, ...)         # probe runs, or seeded runs in this process, each judged
    traces = target.broker_traces()             # traces beside the probes' (the embedded broker's own), after the run
    target.close()

What a target tells the session and the command, so that neither asks which target it is:

    default_profile(text)  (a classmethod) the profile it is judged by when --profile names none: kafka-4.2,
                       or the line a kafka:LINE target runs (kafka:4.4: kafka-4.4)
    name               the --target text that names it again (the replay line uses it)
    can_restart        the runner may kill -9 its broker and start it again (the broker-restart probe)
    unobservable       clause id -> why this target cannot show it (the table says "not observable"); by
                       default XM-1 and SP-26 when it cannot restart
    client_scenarios() the client scenarios (scenarios/) it runs; by default none
    settings           the share settings its traces are judged with: by default those --set told the runner;
                       those it started its broker with, for a broker it starts
    runs_label         what its runs are called ("probes"; "runs" in process)
    broker_traces_label what its broker_traces() are, in the verdict
    replay(scenario)   the command that runs one failing run again

Adding a target, in two steps:

1. A module in this package holding one subclass of Target. It declares `forms` (each --target form it takes,
   with the lines `kipcheck conform --help` shows for it), `accepts(text)` when a form is a pattern, and
   overrides only what differs from Target, which is a broker reached over the wire that the runner neither
   started nor can restart (wire.py adds only the parsing of HOST:PORT). A broker the runner starts as a
   subprocess, like embedded.py, starts it in `open` and stops it in `close`, sets can_restart and `restart`,
   takes its settings from what it started the broker with, and returns from `broker_traces` whatever traces it
   can read back once the runs are over (the broker's own, records read back from its internal topics, or none).
   A target that is not probed, like in_process.py or a passive proxy that records what real clients do,
   overrides `scenarios` (which --scenario names it takes) and `exercise` (what it runs or waits for).
2. Its module's name in TARGET_MODULES, where the order is that of the forms in --help and in errors.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Callable, ClassVar

from kipcheck.model.profiles import KAFKA_42, KAFKA_44, is_kafka

TARGET_MODULES = ("embedded", "kafka", "wire", "librdkafka_mock", "in_process")
# The target `kipcheck conform` probes when --target names none, by --profile: the reference broker, but for a
# profile it does not serve (spec/README.md, "Profiles"), judged against the Kafka it describes.
DEFAULT_TARGETS = {KAFKA_44: "kafka:4.4"}
DEFAULT_TARGET = "embedded"
RESTART_UNOBSERVABLE = {"XM-1": "needs a broker restart", "SP-26": "needs a broker restart"}


class TargetError(ValueError):
    """A target or setting the runner cannot use; the message says why."""


@dataclass(frozen=True)
class TargetOptions:
    """What the command line says about any target: the profile it is judged by, the share settings given with
    --set (by Kafka's names), and --launcher (the command that runs the embedded broker)."""

    profile: str = KAFKA_42
    settings: dict[str, str] = field(default_factory=dict)
    launcher: tuple[str, ...] | None = None


@dataclass(frozen=True)
class BrokerSettings:
    """The broker's share settings, under Kafka's names, as the runner must know them to write trace headers."""

    lock_ms: int = 30_000
    delivery_limit: int = 5
    max_record_locks: int = 2_000
    max_sessions: int = 2_000
    max_group_size: int = 200

    NAMES = {"group.share.record.lock.duration.ms": "lock_ms", "group.share.delivery.count.limit": "delivery_limit",
             "group.share.partition.max.record.locks": "max_record_locks",
             "group.share.max.share.sessions": "max_sessions", "group.share.max.size": "max_group_size"}

    @classmethod
    def from_properties(cls, properties: dict[str, str], profile: str) -> "BrokerSettings":
        values = {}
        for name, raw in properties.items():
            if name not in cls.NAMES:
                continue  # settings the traces do not name (the broker's own business)
            if not str(raw).isdigit() or int(raw) < 1:
                raise TargetError(f"{name} must be a positive integer, found {raw!r}")
            values[cls.NAMES[name]] = int(raw)
        settings = cls(**values)
        if is_kafka(profile) and settings.max_group_size > settings.max_sessions:
            # Kafka keeps group.share.max.size at most group.share.max.share.sessions (ShareGroupConfig.validate):
            # a broker given only its session limit holds no larger group.
            settings = replace(settings, max_group_size=settings.max_sessions)
        return settings

    def partition_config(self) -> dict:
        return {"delivery_count_limit": self.delivery_limit, "record_lock_duration_ms": self.lock_ms,
                "max_inflight_records": self.max_record_locks}


class Target:
    """The protocol, with the defaults of a broker reached over the wire that the runner did not start."""

    # Each --target form this class takes -> the lines `kipcheck conform --help` shows for it.
    forms: ClassVar[dict[str, str]] = {}
    can_restart: ClassVar[bool] = False
    runs_label: ClassVar[str] = "probes"  # what its runs are called in the progress bar and the work dir
    broker_traces_label: ClassVar[str] = "the broker's own traces"  # what broker_traces() are, in the verdict

    def __init__(self, text: str, options: TargetOptions):
        """Check `text` and the options (TargetError), and start nothing: `open` does."""
        self.name = text
        self.options = options
        self.profile = options.profile
        self.settings = BrokerSettings.from_properties(options.settings, options.profile)
        self.address: tuple[str, int] | None = None

    @classmethod
    def accepts(cls, text: str) -> bool:
        """True when `text` names a target of this class (TargetError when it does, but wrongly)."""
        return text in cls.forms

    @classmethod
    def default_profile(cls, text: str) -> str:
        """The profile a target named `text` is judged by when the command line names none."""
        return KAFKA_42

    @property
    def unobservable(self) -> dict[str, str]:
        return {} if self.can_restart else dict(RESTART_UNOBSERVABLE)

    def client_scenarios(self) -> list[str]:
        return []

    def scenarios(self, names: list[str]) -> tuple[list[str], list[str]]:
        """(probe runs, client scenarios) to run of the --scenario `names`: with none named, the whole catalogue,
        swarm runs and every client scenario this target runs. TargetError for a name it does not run."""
        from kipcheck.oracle.conformance import scenarios
        from kipcheck.oracle.conformance.probes.catalogue import CATALOGUE
        from kipcheck.oracle.conformance.probes.runner import SWARM, scenario_names

        if not names:
            return [*CATALOGUE, SWARM], self.client_scenarios()
        clients = [name for name in names if name in scenarios.names()]
        probes, unknown = scenario_names([name for name in names if name not in clients])
        if unknown:
            known = ", ".join([*CATALOGUE, SWARM, f"{SWARM}:SEED", *scenarios.names()])
            raise TargetError(f"unknown scenario{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} "
                              f"(known: {known})")
        if not set(clients) <= set(self.client_scenarios()):
            raise TargetError(f"client scenarios ({', '.join(clients)}) start their own broker: use --target embedded")
        return probes, clients

    def open(self, work_dir: Path) -> None:
        """Start what the runner starts for this target, keeping its files under `work_dir`."""

    def exercise(self, names: list[str], work_dir: Path, seed: int, budget_s: float, tolerance_ms: int,
                 progress: Callable | None = None, first_failure: bool = False) -> list:
        """The runs `names` asks for (probes/runner.py), their traces written under `work_dir` and judged."""
        from kipcheck.oracle.conformance.probes.runner import run_probes

        return run_probes(self, names, work_dir, seed, budget_s, tolerance_ms, progress, first_failure)

    def restart(self) -> None:
        raise TargetError(f"{self.name}: the runner cannot restart a broker it did not start")

    def broker_traces(self) -> list[Path]:
        """Traces to judge beside the probes', available once the runs are over."""
        return []

    def replay(self, scenario: str) -> str:
        return f"kipcheck conform --target {self.name} --profile {self.profile} --scenario {scenario}"

    def close(self) -> None:
        """Stop what `open` started (safe when it started nothing)."""


@cache
def target_classes() -> tuple[type[Target], ...]:
    """Every target class, in the order of TARGET_MODULES (each module holds one)."""
    classes = []
    for module_name in TARGET_MODULES:
        module = importlib.import_module(f"{__name__}.{module_name}")
        found = [value for value in vars(module).values()
                 if isinstance(value, type) and issubclass(value, Target) and value.__module__ == module.__name__]
        assert len(found) == 1, f"{module.__name__} must define one Target class, found {found}"
        classes.append(found[0])
    return tuple(classes)


def forms() -> dict[str, str]:
    """Every --target form -> its lines in --help, in the registry's order."""
    return {form: text for target_class in target_classes() for form, text in target_class.forms.items()}


def target_class_of(text: str) -> type[Target]:
    """The class of the target `text` names; TargetError names the forms."""
    for target_class in target_classes():
        if target_class.accepts(text):
            return target_class
    raise TargetError(f"unknown target {text!r} (accepted: {', '.join(forms())})")


def resolve(text: str, options: TargetOptions) -> Target:
    """The target `text` names, checked but not opened; TargetError names the forms."""
    return target_class_of(text)(text, options)


def default_target(profile: str | None) -> str:
    """The target `kipcheck conform --profile PROFILE` probes when --target names none."""
    return DEFAULT_TARGETS.get(profile, DEFAULT_TARGET)


def default_profile(text: str) -> str:
    """The profile the target `text` names is judged by when --profile names none."""
    return target_class_of(text).default_profile(text)
