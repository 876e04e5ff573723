"""What `kipcheck conform --target` points at: one Target class per kind of target, one module each in this package.

    target = resolve("wire://10.0.0.5:9092", TargetOptions("kafka-4.2", {"group.share.record.lock.duration.ms": "15000"}))
    probes, clients = target.scenarios(names)   # of the --scenario names, what it runs (everything it can: none named)
    target.open(work_dir)                       # start what the runner starts (the embedded broker); then
    target.contact(timeout_s=30)                # wait until it serves share groups, read the settings it describes:
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
    client_scenarios() the client scenarios (scenarios/) it can run; by default none. Those with Apache Kafka's
                       Java clients (scenarios/java.py) run only when named, or with --java-clients
    run_client_scenario(name, work_dir)   one of them: by default on a broker of its own, after the target closed;
                       a target with clients_on_target runs them on its own broker while it is open, before its
                       broker_traces() are read (Apache Kafka's, whose records then hold theirs too)
    client_scenarios_label  what its client scenarios are, in the verdict
    settings           the share settings its traces are judged with: those --set told the runner, or, for a
                       broker it starts, those it started it with; then (contact) those the broker describes
                       about itself where it was told none, else Kafka's defaults
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
    --set (by Kafka's names), --launcher (the command that runs the embedded broker), and --java-clients (the
    client scenarios of Apache Kafka's Java clients run too)."""

    profile: str = KAFKA_42
    settings: dict[str, str] = field(default_factory=dict)
    launcher: tuple[str, ...] | None = None
    java_clients: bool = False


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
    clients_on_target: ClassVar[bool] = False   # its client scenarios run on its own broker, while it is open
    client_scenarios_label: ClassVar[str] = "client scenarios (each on a broker of its own)"

    # Where the settings the runner was given come from, for the report: --set, or what it started the broker with.
    given_by: ClassVar[str] = "--set"

    def __init__(self, text: str, options: TargetOptions):
        """Check `text` and the options (TargetError), and start nothing: `open` does."""
        self.name = text
        self.options = options
        self.profile = options.profile
        self.given = dict(options.settings)   # share settings by Kafka's names, as the runner was told them
        self.described: dict[str, str] = {}   # those the broker described about itself (contact)
        self.settings = BrokerSettings.from_properties(self.given, options.profile)
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

    def run_client_scenario(self, name: str, work_dir: Path):
        """The client scenario `name` (a ScenarioResult), on a reference broker of its own started with the
        target's profile and --launcher."""
        from kipcheck.oracle.conformance import scenarios

        launcher = {"launcher": self.options.launcher} if self.options.launcher else {}
        return scenarios.scenario(name)(work_dir, profile=self.profile, **launcher)

    def scenarios(self, names: list[str]) -> tuple[list[str], list[str]]:
        """(probe runs, client scenarios) to run of the --scenario `names`: with none named, the whole catalogue,
        swarm runs and every client scenario this target runs but the Java clients' (scenarios/java.py: a JVM
        each, and Kafka's jars); those with --java-clients, beside what is named. TargetError for a name it does
        not run."""
        from kipcheck.oracle.conformance import scenarios
        from kipcheck.oracle.conformance.probes.catalogue import CATALOGUE
        from kipcheck.oracle.conformance.probes.runner import SWARM, scenario_names

        java = [name for name in scenarios.java_names() if self.options.java_clients]
        if java and not set(java) <= set(self.client_scenarios()):
            raise TargetError(f"--java-clients: --target {self.name} runs no client scenarios (embedded and "
                              f"kafka:LINE do)")
        if not names:
            return [*CATALOGUE, SWARM], [name for name in self.client_scenarios()
                                         if name in java or name not in scenarios.java_names()]
        clients = [name for name in names if name in scenarios.names()]
        clients += [name for name in java if name not in clients]
        probes, unknown = scenario_names([name for name in names if name not in clients])
        if unknown:
            known = ", ".join([*CATALOGUE, SWARM, f"{SWARM}:SEED", *scenarios.names()])
            raise TargetError(f"unknown scenario{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} "
                              f"(known: {known})")
        if not set(clients) <= set(self.client_scenarios()):
            others = sorted(set(clients) - set(self.client_scenarios()))
            raise TargetError(f"client scenarios ({', '.join(others)}) start their own broker: use --target embedded")
        return probes, clients

    def open(self, work_dir: Path) -> None:
        """Start what the runner starts for this target, keeping its files under `work_dir`."""

    def contact(self, timeout_s: float) -> None:
        """Once open: wait until the broker serves share groups (TargetUnreachable after `timeout_s`), then read the
        share settings it describes. They take the place of Kafka's defaults, never of settings the runner was
        given (`settings_report` shows where they disagree)."""
        from kipcheck.oracle.conformance.targets.contact import describe_settings, wait_ready

        wait_ready(self.address, timeout_s)
        self.described = describe_settings(self.address, BrokerSettings.NAMES)
        self.settings = BrokerSettings.from_properties({**self.described, **self.given}, self.profile)

    def reachable(self, timeout_s: float) -> bool:
        """Whether the broker serves share groups again within `timeout_s` (after a run lost it)."""
        from kipcheck.oracle.conformance.targets.contact import TargetUnreachable, wait_ready

        try:
            wait_ready(self.address, timeout_s)
        except TargetUnreachable:
            return False
        return True

    def partition_trace_config(self) -> dict:
        """The config of the share-partition traces the probes write (a new partition adds its start_offset)."""
        return self.settings.partition_config()

    def settings_report(self) -> list[str]:
        """One line per share setting the traces are judged with, and where it came from."""
        lines = []
        for name, field_name in BrokerSettings.NAMES.items():
            value, given, described = getattr(self.settings, field_name), self.given.get(name), self.described.get(name)
            source = self.given_by if given is not None else "described by the broker" if described else \
                "Kafka's default"
            if given is not None and described is not None and int(described) != value:
                source += f"; the broker describes {described}"
            lines.append(f"{name}={value} ({source})")
        return lines

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
